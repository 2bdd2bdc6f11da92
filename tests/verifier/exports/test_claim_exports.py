"""A claim in plain language in every export: its record (text, parts, verdict, reviews), its parts' runs beside it,
and in PROV-O the links from the claim through its decomposition and verification to its parts' runs."""

import csv
import io
import json

import pytest
from rdflib import RDF, Graph, URIRef
from rdflib.namespace import PROV
from rest_framework.test import APIClient

from tests.openai_server import ScriptedOpenAIServer
from tests.verifier.exports.verified_runs import API_BASE, assert_prov_iris_resolve
from verifier import exports
from verifier.agent.llm import OpenAICompatibleLLM
from verifier.claims.pipeline import decompose_claim, review_claim, start_part_runs, submit_claim
from verifier.exports.prov import VOCAB
from verifier.exports.records import SelectionError, select
from verifier.runner import execute_run
from verifier.wiring import settle_config

pytestmark = pytest.mark.django_db
BASE = "http://kgv.test/api/"
PLAN = "=== Initial Impression ===\n[Correct] Stated.\n=== Strategic Plan ===\n[Step 1] KG_Neighbor(Douglas Adams)"


def _llm(server, grammar=True):
    return OpenAICompatibleLLM(server.url, "test", "scripted", max_retries=1, backoff=0.01, supports_grammar=grammar)


@pytest.fixture
def verified_claim(world_kg, make_user):
    """A two-part claim: one part verified Correct, the other Incorrect (so the claim is refuted), and a reviewer who
    overrode the claim as a whole."""
    claim = submit_claim(kg=world_kg, text="Douglas Adams was born in Cambridge and is a citizen of France.")
    with ScriptedOpenAIServer(["Douglas Adams || place of birth || Cambridge\n"
                               "Douglas Adams || country of citizenship || France"]) as server:
        claim = decompose_claim(claim, _llm(server))
        settled = settle_config({}, _llm(server, grammar=False))  # for a scripted model such as the one answering
    answers = {"Cambridge": "Correct", "France": "Incorrect"}
    for run in start_part_runs(claim, config=settled, queue=False):
        reply = f"Thought: enough.\nFinal Answer: [{answers[run.task.tail.label]}] The KG says so."
        with ScriptedOpenAIServer([PLAN, reply]) as server:
            execute_run(run.pk, llm=_llm(server, grammar=False))
    review_claim(claim=claim, reviewer=make_user("reviewer"), decision="override",
                 reason="He lived in France; the claim's source meant residence.")
    return claim


def test_json_and_csv_carry_the_claim_and_its_parts_runs(verified_claim):
    selection = select(claim_ids=[verified_claim.pk])
    assert len(selection.records) == 2 and selection.skipped_tasks == []
    document = json.loads(exports.render(selection, "json").content)
    (claim,) = document["claims"]
    assert claim["text"].startswith("Douglas Adams was born") and claim["verdict"] == "supported"
    assert claim["verdict_from_parts"] == "refuted" and claim["decided_by"] and claim["reviews"][0]["decision"] == "override"
    assert [(p["seq"], p["tail"]["label"], p["state"]) for p in claim["parts"]] == [(1, "Cambridge", "supported"),
                                                                                 (2, "France", "refuted")]
    assert {p["run_id"] for p in claim["parts"]} == {run["run_id"] for run in document["runs"]}
    assert all(run["claims"] == [verified_claim.pk] for run in document["runs"])

    rows = list(csv.DictReader(io.StringIO(exports.render(selection, "csv").content.decode())))
    assert [(row["tail"], row["claims"], row["claim_verdicts"]) for row in rows] == [
        ("Cambridge", str(verified_claim.pk), "supported"), ("France", str(verified_claim.pk), "supported")]
    assert exports.render(selection, "csv").filename == f"kgv-claim-{verified_claim.pk}.csv"


def test_prov_links_the_claim_to_its_parts_activities(verified_claim):
    graph = Graph().parse(data=exports.render(select(claim_ids=[verified_claim.pk]), "ttl", base=BASE).content, format="turtle")
    claim = URIRef(f"{BASE}claims/{verified_claim.pk}/")
    assert (claim, RDF.type, VOCAB.PlainLanguageClaim) in graph
    verification = URIRef(f"{claim}#verification")
    part_runs = set(graph.objects(verification, PROV.wasInformedBy))
    assert part_runs == {URIRef(f"{BASE}runs/{p.task.runs.get().pk}/") for p in verified_claim.parts.all()}
    assert all((run, RDF.type, PROV.Activity) in graph for run in part_runs)  # the parts' runs are in the export too
    verdict = URIRef(f"{claim}#verdict")
    assert {str(v) for v in graph.objects(verdict, PROV.wasDerivedFrom)} == {f"{run}#verdict" for run in part_runs}
    subgraph = URIRef(f"{claim}#subgraph")
    assert (subgraph, PROV.wasGeneratedBy, URIRef(f"{claim}#decomposition")) in graph
    parts = set(graph.objects(claim, VOCAB.hasPart))
    assert parts == {URIRef(f"{claim}#part-1"), URIRef(f"{claim}#part-2")}
    assert {str(graph.value(part, VOCAB.state)) for part in parts} == {"supported", "refuted"}
    (review,) = graph.subjects(PROV.used, verdict)
    assert review == URIRef(f"{claim}#review-{verified_claim.reviews.get().pk}")
    reviewed = URIRef(f"{review}-verdict")
    assert (reviewed, PROV.wasRevisionOf, verdict) in graph and str(graph.value(reviewed, VOCAB.verdict)) == "supported"


def test_every_prov_iri_of_a_claim_under_the_api_root_resolves(verified_claim, make_user):
    client = APIClient()
    client.force_login(make_user("viewer"))
    graph = assert_prov_iris_resolve(client, f"?claims={verified_claim.pk}")
    claim = f"{API_BASE}claims/{verified_claim.pk}/"
    assert {URIRef(f"{claim}#{name}") for name in ("subgraph", "decomposition", "verification", "verdict", "part-1")} <= set(
        graph.all_nodes())


def test_the_report_has_a_section_per_claim_before_its_runs(verified_claim):
    html = exports.render(select(claim_ids=[verified_claim.pk]), "html").content.decode()
    assert f"Claim {verified_claim.pk}: Douglas Adams was born in Cambridge" in html
    assert html.index("Holds as claimed") < html.index("Cited evidence")
    summary = html[html.index("<h2>Summary</h2>"):html.index('id="claim-')]  # the summary opens the report
    assert f'<a href="#claim-{verified_claim.pk}">Claim {verified_claim.pk}: Douglas Adams was born' in summary
    assert "refuted" in summary and "overridden to supported by" in summary
    assert summary.count('<a href="#run-') == 2 and f'<a name="claim-{verified_claim.pk}"></a>' in html
    assert "residence" in html and "from its parts: refuted" in html


def test_an_unknown_claim_is_named(world_kg):
    with pytest.raises(SelectionError, match="claim 999999"):
        select(claim_ids=[999999])


def test_the_api_exports_a_claim_and_refuses_bad_ids(verified_claim, make_user):
    client = APIClient()
    client.force_login(make_user("viewer"))
    response = client.get(f"/api/export/json/?claims={verified_claim.pk}")
    assert response.status_code == 200 and json.loads(response.content)["claims"][0]["claim_id"] == verified_claim.pk
    assert client.get("/api/export/json/?claims=one").status_code == 400
    page = client.get(f"/claims/{verified_claim.pk}/").content.decode()
    assert f"/api/export/pdf/?claims={verified_claim.pk}" in page
