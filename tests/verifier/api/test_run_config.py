"""A run's configuration is validated and bounded before a run exists (one rule: AgentConfig)."""

import pytest
from django.urls import reverse

from verifier.models import Run

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("config, message", [
    ({"t_max": 2.5}, "t_max must be a whole number"),
    ({"memory_k": "3"}, "memory_k must be a whole number"),
    ({"t_max": "5"}, "t_max must be a whole number"),
    ({"t_max": None}, "t_max must be a whole number"),
    ({"t_max": 100000}, "t_max must be between 1 and 30"),
    ({"samples": 100000}, "samples must be between 1 and 20"),
    ({"max_step_tokens": 1000000000}, "max_step_tokens must be between"),
    ({"use_memory": "yes"}, "use_memory must be true or false"),
    ({"budget": 5}, "unknown setting(s) budget"),
    (["t_max"], "JSON object"),
])
def test_the_api_refuses_an_unbounded_or_mistyped_configuration(verified, client_as, config, message):
    before = Run.objects.count()
    response = client_as("curator").post(reverse("api:run-list"), {"task": verified["task"].pk, "config": config}, format="json")
    assert response.status_code == 400, response.content
    assert message in response.content.decode()
    assert Run.objects.count() == before
