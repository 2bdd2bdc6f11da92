"""Claims from a file (the good rows queued, each bad row reported with its line), a claim's parts in the queue,
and a reviewer's decision on a whole claim through the page."""

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse
from rest_framework.test import APIClient

from tests.openai_server import ScriptedOpenAIServer
from verifier.agent.llm import OpenAICompatibleLLM
from verifier.claims.importing import ClaimFileError, read_claims_text
from verifier.claims.pipeline import decompose_claim, submit_claim
from verifier.models import AuditEvent, Claim, ClaimReview

pytestmark = pytest.mark.django_db

CSV = ("claim,label,category\n"
       "Douglas Adams was born in Cambridge.,true,one-hop\n"
       ",true,one-hop\n"
       "Paris is in France.,maybe,\n"
       "Cambridge is in the United Kingdom.,,rumour\n"
       "\"Douglas Adams, the writer, is a citizen of France.\",false,negation\n")


def test_each_format_gives_its_rows_and_names_the_lines_it_cannot_take():
    read = read_claims_text("flagged.csv", CSV)
    assert [(r.line, r.label, r.category) for r in read.rows] == [(2, True, "one-hop"), (6, False, "negation")]
    assert read.rows[1].text == "Douglas Adams, the writer, is a citizen of France."
    assert read.problems == ["line 3: the claim is empty", "line 4: label 'maybe' is not true or false",
                             "line 5: unknown category 'rumour': one of one-hop, conjunction, existence, multi-hop, negation"]
    text = read_claims_text("claims.txt", "\ufeffParis is in France.\n\n" + "x" * 1001 + "\nParis is a city.\n")
    assert [r.line for r in text.rows] == [1, 4] and text.problems[0].startswith("line 3: the claim has 1001 characters")
    jsonl = read_claims_text("claims.jsonl", '{"claim": "Paris is in France.", "label": true}\n[1]\n{oops\n')
    assert [r.text for r in jsonl.rows] == ["Paris is in France."]
    assert jsonl.problems[0] == "line 2: not a JSON object" and jsonl.problems[1].startswith("line 3: not JSON")


@pytest.mark.parametrize("name, text, message", [
    ("claims.pdf", "Paris is in France.", "read from .txt, .csv, .jsonl files"),
    ("claims.csv", "sentence,label\nParis is in France.,true\n", "needs a 'claim' or 'text' column"),
    ("claims.txt", "\n\n", "holds no claim"),
    ("claims.jsonl", '{"label": true}\n', "holds no claim that can be taken (line 1: the claim is empty)"),
])
def test_a_file_with_nothing_to_take_is_refused_whole(name, text, message):
    with pytest.raises(ClaimFileError, match=message.replace("(", r"\(").replace(")", r"\)")):
        read_claims_text(name, text)


def test_the_claims_page_imports_a_file_and_reports_the_bad_rows(world_kg, client, make_user, django_capture_on_commit_callbacks):
    client.force_login(make_user("curator"))
    with django_capture_on_commit_callbacks() as queued:
        response = client.post(reverse("claim-list"), {"kg": world_kg.pk, "claims": "",
                                                      "file": SimpleUploadedFile("flagged.csv", CSV.encode())}, follow=True)
    page = response.content.decode()
    assert "2 claims queued from flagged.csv" in page and "3 rows of flagged.csv not taken: line 3: the claim is empty" in page
    assert sorted(Claim.objects.values_list("source", flat=True)) == ["flagged.csv:2", "flagged.csv:6"]
    assert len(queued) == 2
    binary = client.post(reverse("claim-list"), {"kg": world_kg.pk, "file": SimpleUploadedFile("x.txt", b"\xff\xfe\x00")})
    assert binary.status_code == 400 and "x.txt is not UTF-8 text" in binary.content.decode()
    assert client.post(reverse("claim-list"), {"kg": world_kg.pk, "claims": ""}).status_code == 400
    assert Claim.objects.count() == 2  # nothing stored by the refused posts


def test_the_api_imports_a_file(world_kg, make_user):
    client = APIClient()
    client.force_login(make_user("curator"))
    response = client.post(reverse("api:claim-import-file"), {"kg": world_kg.pk, "file": SimpleUploadedFile("flagged.csv", CSV.encode())},
                           format="multipart")
    assert response.status_code == 201, response.content
    assert len(response.json()["claims"]) == 2 and len(response.json()["problems"]) == 3
    refused = client.post(reverse("api:claim-import-file"), {"kg": world_kg.pk, "file": SimpleUploadedFile("c.csv", b"a,b\n1,2\n")},
                          format="multipart")
    assert refused.status_code == 400 and "'claim' or 'text' column" in str(refused.json())


@pytest.fixture
def written_claim(world_kg):
    claim = submit_claim(kg=world_kg, text="Douglas Adams was born in Cambridge and is a citizen of France.")
    with ScriptedOpenAIServer(["Douglas Adams || place of birth || Cambridge\n"
                               "Douglas Adams || country of citizenship || France"]) as server:
        llm = OpenAICompatibleLLM(server.url, "test", "scripted", max_retries=0, supports_grammar=True)
        return decompose_claim(claim, llm)


@pytest.mark.slow
def test_the_queue_shows_and_filters_a_claims_parts(written_claim, client, make_user):
    client.force_login(make_user("viewer"))
    page = client.get(reverse("queue")).content.decode()
    assert page.count(f'data-claim="{written_claim.pk}"') == 2  # both parts link to their claim
    only = client.get(reverse("queue") + f"?claim={written_claim.pk}").content.decode()
    assert only.count('class="triple"') == 2
    assert client.get(reverse("queue") + "?claim=999999").content.decode().count('class="triple"') == 0
    assert client.get(reverse("queue") + "?claim=abc").status_code == 400
    api = APIClient()
    api.force_login(make_user("viewer"))
    listed = api.get(reverse("api:task-list") + "?claim=any").json()
    assert listed["count"] == 2


def test_a_reviewer_overrides_a_claim_on_its_page_and_a_curator_may_only_comment(written_claim, client, make_user):
    url = reverse("claim-review", args=[written_claim.pk])
    client.force_login(make_user("curator"))
    assert client.post(url, {"decision": "override", "verdict": "supported", "reason": "x"}).status_code == 403
    client.post(url, {"decision": "comment", "reason": "Which Cambridge?"})
    client.force_login(make_user("reviewer"))
    page = client.post(url, {"decision": "override", "verdict": "refuted", "reason": "He was never a French citizen."},
                       follow=True).content.decode()
    assert 'data-verdict="refuted"' in page and "overridden by" in page and "He was never a French citizen." in page
    assert list(ClaimReview.objects.values_list("decision", flat=True)) == ["override", "comment"]
    refused = client.post(url, {"decision": "accept"}, follow=True).content.decode()  # the parts give no verdict yet
    assert "the parts give no verdict yet" in refused
    client.post(url, {"decision": "override", "verdict": "refuted", "reason": "He was never a French citizen."})  # again
    assert ClaimReview.objects.filter(decision="override").count() == 1  # the same decision is recorded once
    assert AuditEvent.objects.filter(action="claim.review.override").count() == 1
