"""Evaluations started, stopped and resumed through the API: the workbench's rules (control.py), answered in JSON, and
driven by the real worker."""

from __future__ import annotations

import pytest
from django.urls import reverse

from tests.verifier.api.error_shape import assert_error
from tests.workers import wait_for
from verifier.models import AuditEvent, Evaluation

START = {"benchmark": "codex-s", "mode": "kge", "n": 4, "seed": 0}


@pytest.mark.django_db
def test_a_start_the_api_refuses_says_why_per_field_and_draws_nothing(codex_like, client_as):
    client = client_as("admin")
    for body, field, message in [
        ({**START, "benchmark": "fb15k-237"}, "benchmark", "'fb15k-237' is not a benchmark here; one of: codex-s"),
        ({**START, "benchmark": "/etc/passwd"}, "benchmark", "'/etc/passwd' is not a benchmark here"),
        ({**START, "n": 5000}, "n", "Ensure this value is less than or equal to 2000."),
        ({**START, "ablations": ["memory", "luck"]}, "ablations", '"luck" is not a valid choice.'),
        ({**START, "mode": "oracle"}, "mode", '"oracle" is not a valid choice.'),
    ]:
        error = assert_error(client.post(reverse("api:evaluation-list"), body, format="json"), 400, "invalid")
        assert message in str(error["details"][field]), error
    assert not Evaluation.objects.exists()
    assert_error(client_as("reviewer").post(reverse("api:evaluation-list"), START, format="json"), 403, "permission_denied")


@pytest.mark.django_db
def test_an_evaluation_waiting_its_turn_is_withdrawn_by_stop_and_handed_back_by_resume(codex_like, client_as):
    """Without a worker running, the evaluation handed over waits: the API says so, and stop and resume act on it."""
    client = client_as("admin")
    started = client.post(reverse("api:evaluation-list"), START, format="json")
    assert started.status_code == 201, started.content[:500]
    body = started.json()
    assert (body["outcome"], body["status"], body["waiting_for_worker"], body["sample_size"]) == ("started", "created", True, 4)
    url = reverse("api:evaluation-detail", args=[body["id"]])

    stopped = client.post(f"{url}stop/").json()
    assert (stopped["outcome"], stopped["status"], stopped["waiting_for_worker"]) == ("withdrawn", "created", False)
    assert_error(client.post(f"{url}stop/"), 409, "conflict")  # nothing left to stop

    again = client.post(reverse("api:evaluation-list"), START, format="json")  # the same parameters resume it
    assert again.status_code == 200 and again.json()["outcome"] == "resumed" and again.json()["id"] == body["id"]
    assert client.post(f"{url}resume/").json()["waiting_for_worker"] is True
    assert Evaluation.objects.count() == 1
    assert list(AuditEvent.objects.filter(object_type="verifier.evaluation").order_by("pk").values_list("action", flat=True)) == [
        "evaluation.create", "evaluation.start", "evaluation.stop", "evaluation.resume", "evaluation.resume"]


@pytest.mark.django_db(transaction=True)
def test_an_evaluation_started_through_the_api_is_verified_by_the_worker(codex_like, client_as, celery_worker_process):
    client = client_as("admin")
    body = client.post(reverse("api:evaluation-list"), START, format="json").json()
    url = reverse("api:evaluation-detail", args=[body["id"]])
    wait_for(lambda: client.get(url).json()["status"] == "finished", timeout=120, what="the worker to verify the draw")
    finished = client.get(url).json()
    assert finished["metrics"]["n"] == 4 and all(item["run"] and item["status"] == "succeeded" for item in finished["items"])

    again = client.post(reverse("api:evaluation-list"), START, format="json")
    assert again.status_code == 200 and again.json()["outcome"] == "finished"  # not drawn or verified twice
    assert_error(client.post(f"{url}resume/"), 409, "conflict")
    assert_error(client.post(f"{url}stop/"), 409, "conflict")
