"""Claims over the API and the pages: submitting queues the worker's decomposition, reading shows the parts and the
verdict, bad input is a 400 with a message, and a dead model endpoint fails the claim with the reason."""

import pytest
from django.urls import reverse

from tests.openai_server import ScriptedOpenAIServer
from tests.verifier.api.error_shape import assert_error
from verifier.agent.llm import OpenAICompatibleLLM
from verifier.claims.pipeline import submit_claim, verify_claim_now
from verifier.models import Claim, Run

pytestmark = pytest.mark.django_db


@pytest.fixture
def api(make_user):
    from rest_framework.test import APIClient

    def signed_in(role):
        client = APIClient()
        client.force_login(make_user(role))
        return client
    return signed_in


@pytest.mark.slow
def test_a_submitted_claim_is_queued_then_decomposed_and_its_parts_run(world_kg, api, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks() as queued:
        response = api("curator").post(reverse("api:claim-list"), {"kg": world_kg.pk, "text": " Douglas Adams  was born in Cambridge. "},
                                       format="json")
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["status"] == "pending" and body["text"] == "Douglas Adams was born in Cambridge." and body["verdict"] == "open"
    assert len(queued) == 1  # the worker's task, sent once the claim is committed
    with ScriptedOpenAIServer(["Douglas Adams || place of birth || Cambridge"]) as server:
        llm = OpenAICompatibleLLM(server.url, "test", "scripted", max_retries=0, supports_grammar=True)
        with django_capture_on_commit_callbacks() as runs:
            claim = verify_claim_now(body["id"], llm=llm)
    assert claim.status == Claim.Status.DECOMPOSED and len(runs) == 1  # one run per part, queued
    detail = api("viewer").get(reverse("api:claim-detail", args=[claim.pk])).json()
    (part,) = detail["parts"]
    assert (part["head"], part["relation"], part["tail"], part["run_status"]) == ("Q42", "P19", "Q350", "queued")
    assert part["run"] == Run.objects.get(task_id=part["task"]).pk and detail["verdict"] == "open"
    listed = api("viewer").get(reverse("api:claim-list") + "?status=decomposed&q=cambridge").json()
    assert [c["id"] for c in listed["results"]] == [claim.pk]


@pytest.mark.parametrize("data, field, message", [
    ({"text": ""}, "text", "blank"),
    ({"text": "x" * 1001}, "text", "1000"),
    ({"text": "A claim.", "kg": 999999}, "kg", "does not exist"),
    ({"text": "A claim.", "category": "rumour"}, "category", "valid choice"),
])
def test_a_claim_that_cannot_be_taken_is_a_400_naming_the_field(world_kg, api, data, field, message):
    response = api("curator").post(reverse("api:claim-list"), {"kg": world_kg.pk, **data}, format="json")
    error = assert_error(response, 400, "invalid")
    assert message in str(error["details"][field])
    assert not Claim.objects.exists()


def test_a_dead_model_endpoint_fails_the_claim_with_the_reason_and_it_can_be_retried(world_kg, api):
    from tests.http_fixtures import refused_url

    claim = submit_claim(kg=world_kg, text="Douglas Adams was born in Cambridge.")
    llm = OpenAICompatibleLLM(refused_url() + "/v1", "test", "scripted", max_retries=0, timeout=2)
    claim = verify_claim_now(claim.pk, llm=llm)
    assert claim.status == Claim.Status.FAILED and claim.error.startswith("the model could not be asked")
    client = api("curator")
    response = client.post(reverse("api:claim-retry", args=[claim.pk]))
    assert response.status_code == 200 and response.json()["status"] == "pending"
    again = client.post(reverse("api:claim-retry", args=[claim.pk]))
    assert "only a failed claim is retried" in str(assert_error(again, 400, "invalid"))


def test_the_claims_page_takes_one_claim_per_line(world_kg, client, make_user):
    client.force_login(make_user("curator"))
    response = client.post(reverse("claim-list"), {"kg": world_kg.pk, "claims": "First claim.\n\n  Second   claim. \n"})
    assert response.status_code == 302 and response["Location"] == reverse("claim-list")
    assert list(Claim.objects.order_by("id").values_list("text", "source")) == [("First claim.", "workbench"),
                                                                                ("Second claim.", "workbench")]
    too_many = client.post(reverse("claim-list"), {"kg": world_kg.pk, "claims": "\n".join(f"Claim {i}." for i in range(51))})
    assert too_many.status_code == 400 and "At most 50 claims" in too_many.content.decode()
    page = client.get(reverse("claim-list")).content.decode()
    assert "First claim." in page and 'id="claim-form"' in page
    state = client.get(reverse("claim-state", args=[Claim.objects.first().pk])).json()
    assert state["status"] == "pending" and state["settled"] is False and "writing the claim as triples" in state["html"]


def test_a_viewer_cannot_submit_claims(world_kg, client, make_user):
    client.force_login(make_user("viewer"))
    response = client.post(reverse("claim-list"), {"kg": world_kg.pk, "claims": "A claim."})
    assert response.status_code == 403 and not Claim.objects.exists()
