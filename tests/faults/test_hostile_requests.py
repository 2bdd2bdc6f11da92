"""The hostile requests that once made the live demo fail, as tests (a probe of 3,027 requests): each is refused
with a 4xx and a message — or, where the value is a legitimate search, answered — never with a 5xx, and nothing logs
a traceback. Requests go through Django in this process (the live server's limits: test_live_limits.py).

- unicode digits ("²", "١٢") and ids past bigint in the query parameters of pages and API;
- JSON bodies nested 50,000 deep, a config nested 5,000 deep, ``1e999``, a 5,000-digit integer, a ``\\ud800`` escape;
  the same in a claims ``.jsonl`` file and in a memory-bank file for ``manage.py memory_bank import``;
- websocket paths no route serves;
- webhooks to internal addresses;
- a signed-in user without a role on /health/status/; an import of 100,000 bad rows; NUL bytes in a claims file;
  pages without inline script, under a Content-Security-Policy.
"""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import pytest
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from django.test import Client
from rest_framework.authtoken.models import Token

from kgv_web.asgi import application
from tests.faults.tally import tally
from tests.verifier.web.run_pages import make_finished_run, make_world
from verifier.models import Claim, KnowledgeGraph, MemoryEntry, Review, Run, VerificationTask, Webhook

pytestmark = pytest.mark.django_db

COUNTS = tally("Hostile requests", "requests_sent", "refused_with_a_4xx_and_a_message", "answered", "5xx", "tracebacks")
HOSTILE_IDS = ["²", "١٢", "99999999999999999999999"]


@pytest.fixture
def world(make_user):
    world = make_world()
    KnowledgeGraph.objects.filter(pk=world.kg.pk).update(version=1)  # loaded: claims are taken on it
    run = make_finished_run(world)
    return {"world": world, "run": run, "task": run.task}


def _client(make_user, role: str, *, token: bool = False) -> Client:
    client = Client(raise_request_exception=False)  # a 500 is an answer to count, not an exception here
    user = make_user(role)
    if token:
        client.defaults["HTTP_AUTHORIZATION"] = f"Token {Token.objects.create(user=user).key}"
    else:
        client.force_login(user)
    return client


def _message(response) -> str:
    if response["Content-Type"].startswith("application/json") and response.status_code >= 400:
        return response.json()["error"]["message"]
    return response.content.decode()


def judge(response, tracebacks, mark: int, *, refused: bool = True, naming: str = "") -> str:
    """Count the answer; it must not be a 5xx nor log a traceback; a refusal must be a 4xx whose message names
    ``naming``. Returns the message."""
    COUNTS["requests_sent"] += 1
    logged = tracebacks.since(mark)
    COUNTS["5xx"] += response.status_code >= 500
    COUNTS["tracebacks"] += len(logged)
    assert response.status_code < 500 and not logged, (response.status_code, response.content[:500], logged)
    message = _message(response)
    if refused:
        assert 400 <= response.status_code < 500 and naming in message, (response.status_code, message[:500])
        COUNTS["refused_with_a_4xx_and_a_message"] += 1
    else:
        assert response.status_code in (200, 201), message[:500]
        COUNTS["answered"] += 1
    return message


# ---- unicode digits and overlong ids in query parameters -----------------------------------------------------

ID_PARAMETERS = [  # (path, role, parameter): every route the probe crashed, pages and API
    ("/", "viewer", "kg"), ("/", "viewer", "assignee"), ("/", "viewer", "claim"), ("/", "viewer", "per_page"),
    ("/api/tasks/", "viewer", "kg"), ("/api/tasks/", "viewer", "assignee"), ("/api/tasks/", "viewer", "claim"),
    ("/api/runs/", "viewer", "task"), ("/api/runs/{run}/steps/", "viewer", "after"),
    ("/api/export/csv/", "viewer", "tasks"), ("/api/export/json/", "viewer", "tasks"), ("/api/claims/", "viewer", "kg"),
    ("/api/confidence-models/", "viewer", "kg"), ("/api/confidence-models/own-weighing/", "viewer", "kg"),
    ("/structure/status.json", "viewer", "kg"), ("/queue/rows/", "viewer", "tasks"),
    ("/evaluations/compare/", "viewer", "a"),
]
SEARCHED_AS_TEXT = [("/", "viewer", "relation"), ("/api/tasks/", "viewer", "relation"), ("/api/audit/", "admin", "actor"),
                    ("/audit/", "admin", "actor")]  # a relation's label, a username: "²" finds nothing


@pytest.mark.parametrize("value", HOSTILE_IDS)
@pytest.mark.parametrize("path, role, parameter", ID_PARAMETERS)
def test_an_id_parameter_in_unicode_digits_or_past_bigint_is_refused_naming_it(world, make_user, tracebacks, path, role,
                                                                               parameter, value):
    mark = len(tracebacks.records)
    query = {parameter: value, **({"b": "1"} if parameter == "a" else {})}
    response = _client(make_user, role).get(path.format(run=world["run"].pk), query)
    judge(response, tracebacks, mark, naming=parameter)


@pytest.mark.parametrize("path, role, parameter", SEARCHED_AS_TEXT)
def test_a_text_parameter_in_unicode_digits_is_searched_for(world, make_user, tracebacks, path, role, parameter):
    mark = len(tracebacks.records)
    judge(_client(make_user, role).get(path, {parameter: "²"}), tracebacks, mark, refused=False)


# ---- hostile JSON bodies -------------------------------------------------------------------------------------

def _nested(depth: int) -> str:
    return '{"a":' * depth + "1" + "}" * depth


BODIES = {  # name: (body with {task} for a task id, what the refusal names)
    "huge decimal": ('{"task": 1e999}', "1e999"),
    "50,000 deep": ("[" * 50_000 + "]" * 50_000, "nest more than 64 deep"),
    "config 5,000 deep": ('{"task": {task}, "config": ' + _nested(5_000) + "}", "nest more than 64 deep"),
    "lone surrogate": ('{"task": {task}, "config": {"\\ud800": 1}}', "unpaired surrogate"),
    "5,000 digits": ('{"task": ' + "7" * 5_000 + "}", "too large"),
    "NaN": ('{"task": NaN}', "NaN"),
    "NUL escape": ('{"task": {task}, "config": {"model": "a\\u0000b"}}', "NUL"),
}


@pytest.mark.parametrize("name", sorted(BODIES))
def test_a_hostile_json_body_is_refused_with_a_400_naming_the_problem(world, make_user, tracebacks, name):
    body, naming = BODIES[name]
    mark, runs = len(tracebacks.records), Run.objects.count()
    response = _client(make_user, "curator", token=True).post("/api/runs/", body.replace("{task}", str(world["task"].pk)),
                                                              content_type="application/json")
    judge(response, tracebacks, mark, naming=naming)
    assert response.status_code == 400 and Run.objects.count() == runs


def test_hostile_lines_of_a_claims_jsonl_file_are_refused_each_naming_its_line(world, make_user, tracebacks):
    lines = ['{"claim": ' + "[" * 50_000 + "]" * 50_000 + "}", '{"claim": "Douglas Adams was born in France.", "label": '
             + "9" * 5_000 + "}", '{"claim": "\\ud800 is a character"}']
    curator = _client(make_user, "curator", token=True)
    mark = len(tracebacks.records)
    spoiled = curator.post("/api/claims/import/", {"kg": world["world"].kg.pk,
                                                    "file": SimpleUploadedFile("claims.jsonl", "\n".join(lines).encode())})
    message = judge(spoiled, tracebacks, mark, naming="line 1: arrays and objects nest more than 64 deep")
    assert "no claim that can be taken" in message and not Claim.objects.exists()

    mixed = "\n".join([*lines, '{"claim": "Douglas Adams was a citizen of the United Kingdom."}'])
    taken = curator.post("/api/claims/import/", {"kg": world["world"].kg.pk,
                                                  "file": SimpleUploadedFile("claims.jsonl", mixed.encode())})
    judge(taken, tracebacks, mark, refused=False)
    problems = taken.json()["problems"]
    assert [problem.split(":")[0] for problem in problems] == ["line 1", "line 2", "line 3"]
    assert "too large" in problems[1] and "unpaired surrogate" in problems[2] and Claim.objects.count() == 1


@pytest.mark.parametrize("name, body", [
    ("deep", '{"format": "kgv-memory-bank/1", "entries": ' + "[" * 50_000 + "]" * 50_000 + "}"),
    ("surrogate", '{"format": "kgv-memory-bank/1", "entries": [{"triple_text": "\\ud800", "trajectory": "t", '
                  '"verdict": "correct"}]}'),
    ("5,000 digits", '{"format": "kgv-memory-bank/1", "entries": [], "version": ' + "1" * 5_000 + "}"),
])
def test_memory_bank_import_refuses_a_hostile_file_in_one_line_and_imports_nothing(tracebacks, name, body):
    mark = len(tracebacks.records)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "bank.json"
        path.write_text(body, encoding="utf-8")
        with pytest.raises(CommandError) as refused:
            call_command("memory_bank", "import", str(path), stdout=open("/dev/null", "w"))
    COUNTS["requests_sent"] += 1
    assert "nothing was imported" in str(refused.value) and "\n" not in str(refused.value)
    assert not MemoryEntry.objects.exists() and not tracebacks.since(mark)
    COUNTS["refused_with_a_4xx_and_a_message"] += 1


# ---- websockets ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("path", ["/ws/", "/ws/runs/abc/", "/ws/runs/1/extra/", "/nothing", "/ws/runs/99999999999999999999999/"])
async def test_a_websocket_path_no_route_serves_is_closed_cleanly_for_anonymous_callers(tracebacks, path):
    mark = len(tracebacks.records)
    communicator = WebsocketCommunicator(application, path, headers=[(b"origin", b"http://localhost"), (b"host", b"localhost")])
    connected, code = await communicator.connect()
    await communicator.disconnect()
    COUNTS["requests_sent"] += 1
    assert not connected and code in (4404, 4401) and not tracebacks.since(mark)  # 4401: a run path asks to sign in
    COUNTS["refused_with_a_4xx_and_a_message"] += 1


# ---- webhooks to internal addresses --------------------------------------------------------------------------

INTERNAL_URLS = ["http://169.254.169.254/latest/meta-data/", "http://10.0.0.1/", "http://localhost:5432/",
                 "http://[::1]:8000/api/", "http://0.0.0.0:8000/", "http://user:pass@127.0.0.1:8000/", "http://127.0.0.1:99999/",
                 "http://[::ffff:127.0.0.1]/", "http://192.168.1.20/hook", "http://224.0.0.1/"]


@pytest.mark.parametrize("url", INTERNAL_URLS)
def test_a_webhook_to_an_internal_address_is_refused_at_registration_by_the_api_and_the_page(make_user, tracebacks, url):
    assert settings.KGV_WEBHOOK_ALLOWED_NETWORKS == []  # the default: no internal network allowed
    mark = len(tracebacks.records)
    api = judge(_client(make_user, "admin").post("/api/webhooks/", {"url": url}, content_type="application/json"),
                tracebacks, mark, naming="url")
    assert any(word in api for word in ("internal addresses", "credentials", "port number")), api
    page = judge(_client(make_user, "admin").post("/webhooks/", {"url": url}), tracebacks, mark)
    assert any(word in page for word in ("internal addresses", "credentials", "port number"))
    assert not Webhook.objects.exists()


# ---- smaller -------------------------------------------------------------------------------------------------

def test_the_workbench_status_needs_a_role_like_every_page(make_user, tracebacks):
    mark = len(tracebacks.records)
    judge(_client(make_user, None).get("/health/status/"), tracebacks, mark, naming="viewer role")
    judge(_client(make_user, "viewer").get("/health/status/"), tracebacks, mark, refused=False)


def test_an_import_of_100000_bad_rows_answers_with_the_first_100_and_the_count(world, make_user, tracebacks):
    rows = "".join(f"Q42,P27,Nowhere-{number}\n" for number in range(100_000)).encode()
    kg = world["world"].kg
    mark, tasks = len(tracebacks.records), VerificationTask.objects.count()
    api = _client(make_user, "curator", token=True).post("/api/tasks/import/", {"kg": kg.pk, "file": SimpleUploadedFile("bad.csv", rows)})
    message = judge(api, tracebacks, mark, naming="100000 bad row(s)")
    details = api.json()["error"]["details"]
    assert details["count"] == 100_000 and len(details["rows"]) == 100 and details["rows"][0]["line"] == 1
    assert "The first 100 are listed" in message and len(api.content) < 50_000
    page = _client(make_user, "curator").post("/import/", {"kg": kg.pk, "file": SimpleUploadedFile("bad.csv", rows)})
    html = judge(page, tracebacks, mark, naming="100,000 rows could not be used")
    assert "The first 100 are listed" in html and len(page.content) < 200_000
    skipped = _client(make_user, "curator", token=True).post("/api/tasks/import/", {
        "kg": kg.pk, "skip_invalid": True, "file": SimpleUploadedFile("bad.csv", rows + b"Q42,P19,Q350\n")})
    assert skipped.status_code == 201 and skipped.json()["skipped_count"] == 100_000 and len(skipped.json()["skipped"]) == 100
    assert len(skipped.content) < 50_000 and VerificationTask.objects.count() == tasks + 1


def test_a_nul_byte_in_a_claims_text_file_refuses_its_line_as_in_every_importer(world, make_user, tracebacks):
    text = b"Douglas Adams was born in Cambridge.\nDouglas Adams was born \x00in France.\n"
    mark = len(tracebacks.records)
    taken = _client(make_user, "curator", token=True).post("/api/claims/import/", {
        "kg": world["world"].kg.pk, "file": SimpleUploadedFile("claims.txt", text)})
    assert taken.status_code == 201 and not tracebacks.since(mark), taken.content
    assert taken.json()["problems"] == ["line 2: holds a NUL byte: this is not a text file"]
    assert list(Claim.objects.values_list("text", flat=True)) == ["Douglas Adams was born in Cambridge."]


def test_pages_carry_a_content_security_policy_without_inline_script(world, make_user):
    response = _client(make_user, "admin").get("/")
    policy = response["Content-Security-Policy"]
    assert "script-src 'self';" in policy and "object-src 'none'" in policy and "frame-ancestors 'none'" in policy
    assert _client(make_user, "viewer").get("/api/tasks/").get("Content-Security-Policy") is None  # JSON needs none
    templates = Path(settings.BASE_DIR) / "templates"
    for template in templates.rglob("*.html"):
        text = template.read_text(encoding="utf-8")
        inline = [tag for tag in re.findall(r"<script\b[^>]*>", text) if "src=" not in tag]
        handlers = re.findall(r"\son[a-z]+\s*=\s*[\"']", text)
        assert not inline and not handlers, (template.name, inline, handlers)


def test_a_review_sent_twice_in_a_row_is_recorded_once(world, make_user):
    reviewer = _client(make_user, "reviewer", token=True)
    path = f"/api/runs/{world['run'].pk}/reviews/"
    first, again = (reviewer.post(path, {"decision": "accept"}, content_type="application/json") for _ in range(2))
    assert first.status_code == again.status_code == 201 and first.json()["id"] == again.json()["id"]
    assert Review.objects.filter(run=world["run"]).count() == 1
