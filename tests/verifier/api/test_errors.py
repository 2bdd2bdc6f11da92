"""Every kind of API error comes back in the one shape {"error": {"code", "message", "details"}}."""

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from tests.verifier.api.error_shape import assert_error
from tests.verifier.exports.verified_runs import make_task
from verifier.models import Review, Run, VerificationTask

pytestmark = pytest.mark.django_db


def test_a_validation_error_names_each_bad_field(verified, client_as):
    response = client_as("curator").post(reverse("api:task-bulk"), {"action": "explode", "ids": []}, format="json")
    error = assert_error(response, 400, "invalid")
    assert set(error["details"]) == {"action", "ids"}
    assert error["message"].startswith("Invalid input")


def test_an_unknown_id_in_a_body_is_a_validation_error(verified, client_as):
    error = assert_error(client_as("curator").post(reverse("api:run-list"), {"task": 999999}, format="json"), 400, "invalid")
    assert "999999" in error["details"]["task"][0]


def test_a_bad_agent_config_is_refused_by_the_service_message(verified, client_as):
    client = client_as("curator")
    error = assert_error(client.post(reverse("api:run-list"), {"task": verified["task"].pk, "config": {"mode": "guess"}},
                                     format="json"), 400, "invalid")
    assert "unknown mode 'guess'" in error["message"]
    error = assert_error(client.post(reverse("api:run-list"), {"task": verified["task"].pk, "config": [1]}, format="json"), 400)
    assert "JSON object" in error["details"]["config"][0]
    assert Run.objects.filter(task=verified["task"]).count() == 1  # only the fixture's


def test_missing_objects_and_unknown_paths_are_404(verified, client_as):
    client = client_as("viewer")
    error = assert_error(client.get(reverse("api:run-detail", args=[999999])), 404, "not_found")
    assert "Run" in error["message"]
    assert_error(client.get("/api/no-such-thing/"), 404, "not_found")
    assert_error(client.get(reverse("api:export", kwargs={"fmt": "docx"}) + "?runs=1"), 404, "not_found")


def test_a_wrong_method_is_405(verified, client_as):
    assert_error(client_as("admin").delete(reverse("api:run-detail", args=[verified["run"].pk])), 405, "method_not_allowed")


def test_a_review_the_service_rejects_is_400_with_its_reason(verified, client_as):
    client = client_as("reviewer")
    url = reverse("api:run-reviews", args=[verified["run"].pk])
    error = assert_error(client.post(url, {"decision": "override"}, format="json"), 400, "rejected")
    assert error["message"] == "overriding a verdict needs a reason"
    queued = Run.objects.create(task=verified["task"], status=Run.Status.QUEUED)
    error = assert_error(client.post(reverse("api:run-reviews", args=[queued.pk]), {"decision": "accept"}, format="json"), 400, "rejected")
    assert "no verdict to review" in error["message"]
    assert Review.objects.filter(run__task=verified["task"]).count() == 1  # only the fixture's


def test_cancelling_a_finished_run_is_a_conflict(verified, client_as):
    error = assert_error(client_as("curator").post(reverse("api:run-cancel", args=[verified["run"].pk])), 409, "conflict")
    assert "already ended" in error["message"]


def test_an_import_with_bad_rows_lists_them_all_and_queues_nothing(verified, client_as):
    body = b"head,relation,tail,label\nQ90,P17,Q142,true\nNobody,P17,Q142,true\nQ25,P131\n"
    response = client_as("curator").post(reverse("api:task-import"), {
        "kg": verified["kg"].pk, "file": SimpleUploadedFile("flagged.csv", body)}, format="multipart")
    error = assert_error(response, 400, "import_rejected")
    assert [row["line"] for row in error["details"]["rows"]] == [3, 4]
    assert "Nobody" in error["details"]["rows"][0]["message"]
    assert not VerificationTask.objects.filter(head__external_id="Q90").exists()


def test_bad_queue_filters_are_400_naming_the_parameter(verified, client_as):
    client = client_as("viewer")
    for query, param in (("verdict=maybe", "verdict"), ("confidence_min=high", "confidence_min"), ("sort=colour", "sort"),
                         ("assignee=someone", "assignee")):
        error = assert_error(client.get(reverse("api:task-list") + "?" + query), 400, "invalid")
        assert param in error["details"], query


def test_bad_export_selections_are_400(verified, client_as):
    client = client_as("viewer")
    url = reverse("api:export", kwargs={"fmt": "json"})
    assert "tasks" in assert_error(client.get(url + "?tasks=1,x"), 400, "invalid")["details"]
    assert "name the tasks, runs or claims" in assert_error(client.get(url), 400, "invalid")["message"]
    pending = make_task(verified["kg"], "Q90", "P17", "Q142")
    assert "has a finished run" in assert_error(client.get(url + f"?tasks={pending.pk}"), 400, "invalid")["message"]


def test_a_run_that_could_end_only_without_a_verdict_is_a_conflict_and_starts_nothing(verified, client_as):
    """With no confidence model in force the evidence and reading modes decide nothing: the API refuses them, the
    single run and the bulk run alike, and says how to put a weighing in force."""
    client = client_as("curator")
    other = make_task(verified["kg"], "Q90", "P17", "Q142")
    for mode in ("evidence", "reading"):
        error = assert_error(client.post(reverse("api:run-list"), {"task": other.pk, "config": {"mode": mode}}, format="json"),
                             409, "conflict")
        assert error["message"].startswith(f"the {mode} mode decides only through a confidence model, and none is in force")
        assert "manage.py calibrate --import verifier/data/confidence_model.json" in error["message"]
    error = assert_error(client.post(reverse("api:task-bulk"), {"action": "run", "ids": [other.pk, verified["task"].pk],
                                                                "config": {"mode": "evidence"}}, format="json"), 409, "conflict")
    assert not Run.objects.filter(task=other).exists()
    assert client.post(reverse("api:run-list"), {"task": other.pk}, format="json").status_code == 201  # the agent answers itself
