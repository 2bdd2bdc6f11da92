"""Who may call what: every API endpoint, anonymous (401), a role too low (403), the role it needs (success).

The websocket side of the same rule is tested in tests/verifier/realtime/test_run_stream.py.
"""

from dataclasses import dataclass
from urllib.parse import urlsplit

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import resolve, reverse
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from tests.verifier.api.error_shape import assert_error
from verifier.models import Run
from verifier.roles import ROLES

pytestmark = pytest.mark.django_db


@dataclass(frozen=True)
class Endpoint:
    name: str
    method: str
    role: str  # the lowest role allowed
    success: int
    url: object  # (objects) -> url
    data: object = None  # (objects) -> request body


def csv_upload(objects):
    return {"kg": objects["kg"].pk, "file": SimpleUploadedFile("flagged.csv", b"head,relation,tail\nQ90,P17,Q142\n")}


ENDPOINTS = [
    Endpoint("api root", "get", "viewer", 200, lambda o: reverse("api:api-root")),
    Endpoint("kg list", "get", "viewer", 200, lambda o: reverse("api:kg-list")),
    Endpoint("kg detail", "get", "viewer", 200, lambda o: reverse("api:kg-detail", args=[o["kg"].pk])),
    Endpoint("kg train", "post", "admin", 202, lambda o: reverse("api:kg-train", args=[o["kg"].pk])),  # it has no model yet
    Endpoint("task list", "get", "viewer", 200, lambda o: reverse("api:task-list")),
    Endpoint("task detail", "get", "viewer", 200, lambda o: reverse("api:task-detail", args=[o["task"].pk])),
    Endpoint("task import", "post", "curator", 201, lambda o: reverse("api:task-import"), csv_upload),
    Endpoint("task bulk assign", "post", "curator", 200, lambda o: reverse("api:task-bulk"),
             lambda o: {"action": "assign", "ids": [o["task"].pk], "assignee": o["curator"].pk}),
    Endpoint("task bulk run", "post", "curator", 200, lambda o: reverse("api:task-bulk"),
             lambda o: {"action": "run", "ids": [o["task"].pk]}),
    Endpoint("run list", "get", "viewer", 200, lambda o: reverse("api:run-list")),
    Endpoint("run start", "post", "curator", 201, lambda o: reverse("api:run-list"), lambda o: {"task": o["task"].pk}),
    Endpoint("run detail", "get", "viewer", 200, lambda o: reverse("api:run-detail", args=[o["run"].pk])),
    Endpoint("run steps", "get", "viewer", 200, lambda o: reverse("api:run-steps", args=[o["run"].pk]) + "?after=2"),
    Endpoint("run cancel", "post", "curator", 200, lambda o: reverse("api:run-cancel", args=[o["queued"].pk])),
    Endpoint("run reviews", "get", "viewer", 200, lambda o: reverse("api:run-reviews", args=[o["run"].pk])),
    Endpoint("run comment", "post", "curator", 201, lambda o: reverse("api:run-reviews", args=[o["run"].pk]),
             lambda o: {"decision": "comment", "reason": "Check the second source."}),
    Endpoint("run decision", "post", "reviewer", 201, lambda o: reverse("api:run-reviews", args=[o["run"].pk]),
             lambda o: {"decision": "accept"}),
    Endpoint("run promote", "post", "reviewer", 201, lambda o: reverse("api:run-promote", args=[o["run"].pk]), lambda o: {}),
    Endpoint("memory list", "get", "viewer", 200, lambda o: reverse("api:memory-list") + "?similar=Douglas%20Adams"),
    Endpoint("memory detail", "get", "viewer", 200, lambda o: reverse("api:memory-detail", args=[o["memory"].pk])),
    Endpoint("memory retire", "post", "reviewer", 200, lambda o: reverse("api:memory-retire", args=[o["memory"].pk])),
    Endpoint("memory restore", "post", "reviewer", 200, lambda o: reverse("api:memory-restore", args=[o["memory"].pk])),
    Endpoint("memory review", "post", "reviewer", 200, lambda o: reverse("api:memory-review", args=[o["memory"].pk]),
             lambda o: {"lesson": "His own article names the university."}),
    Endpoint("memory bulk review", "post", "reviewer", 200, lambda o: reverse("api:memory-bulk-review"),
             lambda o: {"ids": [o["memory"].pk], "action": "keep"}),
    Endpoint("evaluation list", "get", "viewer", 200, lambda o: reverse("api:evaluation-list")),
    Endpoint("evaluation detail", "get", "viewer", 200, lambda o: reverse("api:evaluation-detail", args=[o["evaluation"].pk])),
    Endpoint("evaluation resume", "post", "admin", 200, lambda o: reverse("api:evaluation-resume", args=[o["evaluation"].pk])),
    Endpoint("evaluation stop", "post", "admin", 200, lambda o: reverse("api:evaluation-stop", args=[o["waiting"].pk])),
    Endpoint("audit list", "get", "admin", 200, lambda o: reverse("api:audit-list")),
    Endpoint("audit detail", "get", "admin", 200, lambda o: reverse("api:audit-detail", args=[o["audit"].pk])),
    Endpoint("run compare", "get", "viewer", 200,
             lambda o: reverse("api:run-compare", kwargs={"pk": o["rerun"].pk, "other": o["run"].pk})),
    Endpoint("webhook list", "get", "admin", 200, lambda o: reverse("api:webhook-list")),
    Endpoint("webhook register", "post", "admin", 201, lambda o: reverse("api:webhook-list"),
             lambda o: {"url": "https://example.org/hook", "events": ["review.recorded"]}),
    Endpoint("webhook detail", "get", "admin", 200, lambda o: reverse("api:webhook-detail", args=[o["webhook"].pk])),
    Endpoint("webhook test", "post", "admin", 200, lambda o: reverse("api:webhook-test", args=[o["webhook"].pk])),
    Endpoint("webhook deliveries", "get", "admin", 200, lambda o: reverse("api:webhook-deliveries", args=[o["webhook"].pk])),
    Endpoint("claim list", "get", "viewer", 200, lambda o: reverse("api:claim-list") + "?status=failed"),
    Endpoint("claim submit", "post", "curator", 201, lambda o: reverse("api:claim-list"),
             lambda o: {"kg": o["kg"].pk, "text": "Douglas Adams was born in Cambridge."}),
    Endpoint("claim detail", "get", "viewer", 200, lambda o: reverse("api:claim-detail", args=[o["claim"].pk])),
    Endpoint("claim retry", "post", "curator", 200, lambda o: reverse("api:claim-retry", args=[o["claim"].pk])),
    Endpoint("claim import", "post", "curator", 201, lambda o: reverse("api:claim-import-file"),
             lambda o: {"kg": o["kg"].pk, "file": SimpleUploadedFile("claims.txt", b"Douglas Adams was born in Cambridge.\n")}),
    Endpoint("claim comment", "post", "curator", 201, lambda o: reverse("api:claim-review", args=[o["written_claim"].pk]),
             lambda o: {"decision": "comment", "reason": "Which Cambridge?"}),
    Endpoint("claim decision", "post", "reviewer", 201, lambda o: reverse("api:claim-review", args=[o["written_claim"].pk]),
             lambda o: {"decision": "override", "verdict": "refuted", "reason": "He was born in Cambridge, England."}),
    Endpoint("confidence model list", "get", "viewer", 200, lambda o: reverse("api:confidence-model-list") + "?active=true"),
    Endpoint("confidence model detail", "get", "viewer", 200,
             lambda o: reverse("api:confidence-model-detail", args=[o["own_model"].pk])),
    Endpoint("confidence model activate", "post", "admin", 200,
             lambda o: reverse("api:confidence-model-activate", args=[o["own_model"].pk])),
    Endpoint("confidence model stand down", "post", "admin", 200,
             lambda o: reverse("api:confidence-model-stand-down", args=[o["own_model"].pk])),
    Endpoint("confidence model refit", "post", "admin", 400, lambda o: reverse("api:confidence-model-refit"),
             lambda o: {"kg": o["kg"].pk}),  # too few reviewed runs: refused with the reason, past the permission check
    Endpoint("own weighing", "get", "viewer", 200, lambda o: reverse("api:confidence-model-own-weighing-state") + f"?kg={o['kg'].pk}"),
    Endpoint("own weighing verify", "post", "admin", 409, lambda o: reverse("api:confidence-model-verify-calibration-triples"),
             lambda o: {"kg": o["kg"].pk}),  # the KG has no structural model to take calibration triples from
    Endpoint("own weighing fit", "post", "admin", 409, lambda o: reverse("api:confidence-model-fit-on-calibration-triples"),
             lambda o: {"kg": o["kg"].pk}),  # nothing verified yet
    Endpoint("kg audit list", "get", "viewer", 200, lambda o: reverse("api:kg-audit-list") + f"?kg={o['kg'].pk}"),
    Endpoint("kg audit start", "post", "curator", 201, lambda o: reverse("api:kg-audit-list"), lambda o: {"kg": o["kg"].pk}),
    Endpoint("kg audit detail", "get", "viewer", 200, lambda o: reverse("api:kg-audit-detail", args=[o["kg_audit"].pk])),
    Endpoint("kg audit suspects", "get", "viewer", 200, lambda o: reverse("api:kg-audit-suspects", args=[o["kg_audit"].pk])),
    Endpoint("kg audit queue", "post", "curator", 200, lambda o: reverse("api:kg-audit-queue", args=[o["kg_audit"].pk]),
             lambda o: {"top": 1}),
    Endpoint("kg audit csv", "get", "viewer", 200, lambda o: reverse("api:kg-audit-csv", args=[o["kg_audit"].pk])),
    Endpoint("onboarding list", "get", "admin", 200, lambda o: reverse("api:onboarding-list")),
    Endpoint("onboarding upload", "post", "admin", 201, lambda o: reverse("api:onboarding-list"),
             lambda o: {"name": "uploaded", "file": SimpleUploadedFile("kg.tsv", b"Q42\tP27\tQ145\n")}),
    Endpoint("onboarding detail", "get", "admin", 200, lambda o: reverse("api:onboarding-detail", args=[o["onboarding"].pk])),
    Endpoint("export", "get", "viewer", 200, lambda o: reverse("api:export", kwargs={"fmt": "csv"}) + f"?tasks={o['task'].pk}"),
    Endpoint("schema", "get", "viewer", 200, lambda o: reverse("api:schema")),
    Endpoint("docs", "get", "viewer", 200, lambda o: reverse("api:docs")),
]


@pytest.fixture
def objects(verified, settings, tmp_path):
    from tests.http_fixtures import refused_url
    from tests.verifier.exports.verified_runs import make_task
    from verifier.models import AuditEvent, Claim, ConfidenceModel, Evaluation, KGAudit, Onboarding, Suspect, Webhook

    settings.KGV_UPLOAD_DIR = tmp_path / "uploads"  # where an onboarding keeps its upload

    other = make_task(verified["kg"], tail="Q90")  # its run in flight leaves verified["task"] free to start
    queued = Run.objects.create(task=other, status=Run.Status.QUEUED)
    audit = AuditEvent.objects.create(action="test.event", object_type="verifier.run", object_id=str(queued.pk))
    evaluation = Evaluation.objects.create(name="permissions", kg=verified["kg"], benchmark="codex-s", sample_size=2)
    waiting = Evaluation.objects.create(name="permissions-waiting", kg=verified["kg"], benchmark="codex-s", sample_size=2,
                                        worker_driver="a-driver-waiting-its-turn")
    rerun = Run.objects.create(task=verified["run"].task, status=Run.Status.FAILED, error="the model endpoint is down")
    webhook = Webhook.objects.create(url=refused_url() + "/hook")  # a test delivery fails fast, and is answered 200
    claim = Claim.objects.create(kg=verified["kg"], text="A claim whose model was down.", status=Claim.Status.FAILED,
                                 error="the model could not be asked")
    written_claim = Claim.objects.create(kg=verified["kg"], text="Douglas Adams was born in Cambridge.",
                                         status=Claim.Status.DECOMPOSED)
    own_model = ConfidenceModel.objects.create(kg=verified["kg"], features=["structural_logit"], coefficients=[1.0], intercept=0.0,
                                               source="permissions", metrics={"n": 40})
    kg, task = verified["kg"], verified["task"]
    kg_audit = KGAudit.objects.create(kg=kg, kg_version=kg.version, status=KGAudit.Status.FINISHED, triples=1, scored=1,
                                      summary={"suspects": 1, "likely_wrong": 1, "per_relation": [], "compared": None})
    Suspect.objects.create(audit=kg_audit, rank=1, head_id=task.head_id, relation_id=task.relation_id, tail_id=task.tail_id,
                           suspicion=0.9)
    onboarding = Onboarding.objects.create(name="permissions", file=str(tmp_path / "kg.tsv"))
    return {**verified, "queued": queued, "kg_audit": kg_audit, "onboarding": onboarding, "audit": audit,
            "own_model": own_model, "evaluation": evaluation, "waiting": waiting,
            "rerun": rerun, "webhook": webhook,
            "claim": claim, "written_claim": written_claim}


def call(client: APIClient, endpoint: Endpoint, objects):
    data = endpoint.data(objects) if endpoint.data else None
    url = endpoint.url(objects)
    if endpoint.method == "get":
        return client.get(url)
    multipart = data is not None and any(hasattr(v, "read") for v in data.values())
    return client.post(url, data, format="multipart" if multipart else "json")


def role_below(role: str) -> str | None:
    index = ROLES.index(role)
    return ROLES[index - 1] if index else None


@pytest.mark.parametrize("endpoint", ENDPOINTS, ids=lambda e: e.name)
def test_anonymous_is_refused_with_401(endpoint, objects):
    response = call(APIClient(), endpoint, objects)
    error = assert_error(response, 401, "not_authenticated")
    assert "credentials" in error["message"].lower()
    assert response["WWW-Authenticate"] == "Token"


@pytest.mark.parametrize("endpoint", ENDPOINTS, ids=lambda e: e.name)
def test_a_role_too_low_is_refused_with_403(endpoint, objects, client_as):
    error = assert_error(call(client_as(role_below(endpoint.role)), endpoint, objects), 403, "permission_denied")
    assert endpoint.role in error["message"]


@pytest.mark.parametrize("endpoint", ENDPOINTS, ids=lambda e: e.name)
def test_the_role_needed_succeeds(endpoint, objects, client_as):
    response = call(client_as(endpoint.role), endpoint, objects)
    assert response.status_code == endpoint.success, response.content[:500]


def test_every_api_route_is_in_the_permission_matrix(objects):
    from verifier.api import urls as api_urls

    routes = {f"api:{pattern.name}" for pattern in api_urls.urlpatterns if pattern.name != "not-found"}
    tested = {resolve(urlsplit(endpoint.url(objects)).path).view_name for endpoint in ENDPOINTS}
    assert tested == routes


def test_a_token_authenticates_api_calls(verified, make_user):
    token = Token.objects.create(user=make_user("viewer"))
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    response = client.get(reverse("api:run-detail", args=[verified["run"].pk]))
    assert response.status_code == 200 and response.json()["verdict"] == "correct"
    client.credentials(HTTP_AUTHORIZATION="Token not-a-real-key")
    assert_error(client.get(reverse("api:task-list")), 401, "authentication_failed")


def test_a_viewer_token_cannot_write(verified, make_user):
    token = Token.objects.create(user=make_user("viewer"))
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    assert_error(client.post(reverse("api:run-list"), {"task": verified["task"].pk}, format="json"), 403, "permission_denied")
    assert not Run.objects.filter(task=verified["task"]).exclude(pk=verified["run"].pk).exists()


def test_session_writes_need_the_csrf_token(verified, make_user):
    client = APIClient(enforce_csrf_checks=True)
    client.force_login(make_user("curator"))
    error = assert_error(client.post(reverse("api:run-list"), {"task": verified["task"].pk}, format="json"), 403)
    assert "CSRF" in error["message"]


def test_a_curator_cannot_decide_but_may_comment(verified, client_as):
    client = client_as("curator")
    url = reverse("api:run-reviews", args=[verified["run"].pk])
    for decision in ("accept", "override", "not_enough_evidence"):
        error = assert_error(client.post(url, {"decision": decision, "reason": "x"}, format="json"), 403, "permission_denied")
        assert "reviewer" in error["message"]
    assert client.post(url, {"decision": "comment", "reason": "x"}, format="json").status_code == 201
