"""Every export format built from real rows, parsed back with the library a consumer would use."""

import csv
import io
import json

import pytest
from rdflib import RDF, Graph, Literal, URIRef
from rdflib.namespace import PROV
from rest_framework.test import APIClient

from tests.verifier.exports.verified_runs import (
    API_BASE,
    EVIDENCE,
    add_review,
    assert_prov_iris_resolve,
    make_finished_run,
    make_task,
)
from tests.verifier.web.structure_rows import ready
from verifier import exports
from verifier.exports.prov import VOCAB
from verifier.exports.records import Selection, SelectionError, select
from verifier.models import Run

pytestmark = pytest.mark.django_db
BASE = "http://kgv.test/api/"


def test_json_export_carries_the_verdict_steps_evidence_review_and_memories(verified):
    document = json.loads(exports.render(select(run_ids=[verified["run"].pk]), "json").content)
    assert document["format"] == "kgv-export/1" and document["skipped_tasks"] == []
    (run,) = document["runs"]
    assert run["run_id"] == verified["run"].pk and run["verdict"] == "correct" and run["final_verdict"] == "correct"
    assert run["head"] == {"id": "Q42", "label": "Douglas Adams"}
    assert run["triple_text"] == "Douglas Adams country of citizenship United Kingdom"
    assert [step["kind"] for step in run["steps"]] == ["plan", "thought", "action", "observation", "verdict"]
    assert [(e["key"], e["cited"]) for e in run["evidence"]] == [("E1", True), ("E2", True), ("E3", False)]
    assert all(len(e["content_hash"]) == 64 for e in run["evidence"])
    assert run["reviews"][0]["reviewer"] == "rene" and run["reviews"][0]["decision"] == "accept"
    assert run["memories"][0]["similarity"] == pytest.approx(0.83)


def test_csv_export_has_one_row_per_run_with_cited_sources_and_hashes(verified):
    other = make_finished_run(make_task(verified["kg"], "Q42", "P19", "Q350"), verdict="incorrect", confidence=0.4)
    add_review(other, verified["reviewer"], decision="override", verdict="correct", reason="The passage says Cambridge.")
    text = exports.render(select(run_ids=[verified["run"].pk, other.pk]), "csv").content.decode()
    rows = list(csv.DictReader(io.StringIO(text)))
    assert [int(r["run_id"]) for r in rows] == [verified["run"].pk, other.pk]
    first, second = rows
    assert first["cited_evidence"] == "E1 | E2" and first["cited_sources"].startswith("https://en.wikipedia.org/wiki/Douglas_Adams")
    assert first["cited_hashes"].split(" | ")[0] == verified["run"].support_items.get(key="E1").content_hash
    assert (second["verdict"], second["final_verdict"], second["review_decision"]) == ("incorrect", "correct", "override")
    assert second["review_reason"] == "The passage says Cambridge." and second["relation"] == "place of birth"


def test_csv_cells_a_spreadsheet_would_run_as_formulas_are_quoted(verified):
    add_review(verified["run"], verified["reviewer"], decision="accept", reason='=HYPERLINK("http://x","y")')
    text = exports.render(select(run_ids=[verified["run"].pk]), "csv").content.decode()
    (row,) = csv.DictReader(io.StringIO(text))
    assert row["review_reason"] == '\'=HYPERLINK("http://x","y")'
    assert row["head"] == "Douglas Adams" and row["review_decision"] == "accept"  # other cells as they were


def test_a_task_exports_its_latest_finished_run_and_tasks_without_one_are_reported(verified):
    task = verified["task"]
    verified["run"].reviews.all().delete()  # a reviewed run would stand for the task (next test)
    later = make_finished_run(task, verdict="incorrect")
    Run.objects.create(task=task, status=Run.Status.RUNNING)  # newer, but not finished
    pending = make_task(verified["kg"], "Q90", "P17", "Q142")
    selection = select(task_ids=[task.pk, pending.pk])
    assert [r.run_id for r in selection.records] == [later.pk]
    assert selection.skipped_tasks == [pending.pk]


def test_selecting_unknown_ids_names_them(verified):
    with pytest.raises(SelectionError, match="task 999999, run 888888"):
        select(task_ids=[verified["task"].pk, 999999], run_ids=[888888])
    with pytest.raises(SelectionError, match="name the tasks, runs or claims"):
        select()


def _prov_graph(verified, fmt):
    data = exports.render(select(run_ids=[verified["run"].pk]), fmt, base=BASE).content.decode()
    graph = Graph()
    graph.parse(data=data, format="turtle" if fmt == "ttl" else "json-ld")
    return graph


@pytest.mark.parametrize("fmt", ["ttl", "jsonld"])
def test_prov_export_links_verdict_to_evidence_run_model_and_reviewer(verified, fmt):
    graph = _prov_graph(verified, fmt)
    run_id, review_id = verified["run"].pk, verified["review"].pk
    run = URIRef(f"{BASE}runs/{run_id}/")
    verdict = URIRef(f"{run}#verdict")  # described by the run's API document
    model, reviewer = URIRef("urn:kgv:agent:model:scripted-model"), URIRef("urn:kgv:user:rene")  # no endpoint: not URLs
    review = URIRef(f"{run}#review-{review_id}")
    assert (run, RDF.type, PROV.Activity) in graph and (verdict, RDF.type, PROV.Entity) in graph
    assert (verdict, PROV.wasGeneratedBy, run) in graph
    derived = set(graph.objects(verdict, PROV.wasDerivedFrom))
    assert derived == {URIRef(f"{run}#evidence-E1"), URIRef(f"{run}#evidence-E2")}  # E3 is not cited
    assert (run, PROV.wasAssociatedWith, model) in graph and (model, RDF.type, PROV.SoftwareAgent) in graph
    assert (verdict, PROV.wasAttributedTo, model) in graph
    assert (review, PROV.wasAssociatedWith, reviewer) in graph and (reviewer, RDF.type, PROV.Person) in graph
    assert (review, PROV.used, verdict) in graph
    assert (model, PROV.actedOnBehalfOf, URIRef("urn:kgv:user:carla")) in graph
    e1 = URIRef(f"{run}#evidence-E1")
    assert (e1, PROV.hadPrimarySource, URIRef(EVIDENCE[0][3])) in graph
    assert (e1, VOCAB.contentHash, Literal(verified["run"].support_items.get(key="E1").content_hash)) in graph
    reviewed = URIRef(f"{run}#review-{review_id}-verdict")
    assert (reviewed, PROV.wasGeneratedBy, review) in graph and (reviewed, PROV.wasDerivedFrom, verdict) in graph
    memory = URIRef(f"{BASE}memory/{verified['memory'].pk}/")
    assert (memory, RDF.type, PROV.Entity) in graph and (run, PROV.used, memory) in graph
    assert (run, PROV.used, URIRef(f"{BASE}tasks/{verified['task'].pk}/")) in graph
    assert (URIRef(f"{BASE}tasks/{verified['task'].pk}/"), VOCAB.head, URIRef("http://www.wikidata.org/entity/Q42")) in graph


def test_prov_iris_of_resources_without_an_endpoint_are_the_same_in_every_export(verified):
    other = make_finished_run(make_task(verified["kg"], "Q42", "P19", "Q350"))
    first, second = _prov_graph(verified, "ttl"), Graph().parse(
        data=exports.render(select(run_ids=[other.pk]), "ttl", base="http://elsewhere.test/api/").content, format="turtle")
    names = {str(node) for graph in (first, second) for node in graph.all_nodes() if str(node).startswith("urn:kgv:")}
    assert "urn:kgv:agent:model:scripted-model" in names
    shared = {str(n) for n in first.all_nodes()} & {str(n) for n in second.all_nodes()}
    # whatever the API base: the model's name, and a KG term's own IRI (a Wikidata id's Wikidata IRI)
    assert {"urn:kgv:agent:model:scripted-model", "http://www.wikidata.org/entity/Q42"} <= shared


def test_an_override_is_a_revision_of_the_agent_verdict(verified):
    override = add_review(verified["run"], verified["reviewer"], decision="override", verdict="incorrect", reason="Wrong country.")
    graph = _prov_graph(verified, "ttl")
    run = f"{BASE}runs/{verified['run'].pk}/"
    reviewed = URIRef(f"{run}#review-{override.pk}-verdict")
    assert (reviewed, PROV.wasRevisionOf, URIRef(f"{run}#verdict")) in graph
    assert (reviewed, VOCAB.verdict, Literal("incorrect")) in graph


def test_html_report_shows_verdict_explanation_steps_hashes_sources_and_review(verified):
    html = exports.render(select(run_ids=[verified["run"].pk]), "html").content.decode()
    run = verified["run"]
    for item in run.support_items.filter(cited=True):
        assert item.content_hash in html and f"[{item.key}]" in html
    assert "https://en.wikipedia.org/wiki/Douglas_Adams" in html
    assert "Born in Cambridge, United Kingdom [E1] [E2]." in html
    assert "Check where he was born." in html and "KG_Path(Douglas Adams, United Kingdom)" in html
    assert "Matches the Wikipedia article." in html and "rene" in html
    assert "@page" in html and "@media print" in html


def test_pdf_report_is_a_pdf_with_the_hashes_in_its_text(verified):
    from pypdf import PdfReader

    pdf = exports.render(select(run_ids=[verified["run"].pk]), "pdf").content
    assert pdf.startswith(b"%PDF")
    text = "".join(page.extract_text() for page in PdfReader(io.BytesIO(pdf)).pages)
    assert "Douglas Adams" in text and "Matches the Wikipedia article." in text
    assert verified["run"].support_items.get(key="E2").content_hash[:24] in text.replace("\n", "")


def test_reports_refuse_more_runs_than_a_person_reads_but_data_formats_do_not(verified):
    (record,) = select(run_ids=[verified["run"].pk]).records
    many = Selection(records=[record] * (exports.MAX_REPORT_RUNS + 1), skipped_tasks=[])
    for fmt in ("html", "pdf"):
        with pytest.raises(SelectionError, match="at most 100 runs"):
            exports.render(many, fmt)
    assert len(json.loads(exports.render(many, "json").content)["runs"]) == exports.MAX_REPORT_RUNS + 1


def test_every_prov_iri_under_the_api_root_resolves_to_the_document_that_describes_it(assessed, make_user):
    run = assessed["run"]
    override = add_review(run, assessed["reviewer"], decision="override", verdict="incorrect", reason="Wrong country.")
    add_review(run, assessed["reviewer"], decision="comment", reason="Asked the editor.")
    other = make_finished_run(make_task(assessed["kg"], "Q42", "P19", "Q350"))
    client = APIClient()
    client.force_login(make_user("viewer"))
    graph = assert_prov_iris_resolve(client, f"?runs={run.pk},{other.pk}")
    documents = {str(node).partition("#")[0] for node in graph.all_nodes() if str(node).startswith(API_BASE)}
    assert documents == {f"{API_BASE}runs/{run.pk}/", f"{API_BASE}runs/{other.pk}/", f"{API_BASE}tasks/{run.task_id}/",
                         f"{API_BASE}tasks/{other.task_id}/", f"{API_BASE}memory/{assessed['memory'].pk}/"}
    assert (URIRef(f"{API_BASE}runs/{run.pk}/#review-{override.pk}-verdict"), PROV.wasRevisionOf, None) in graph
    assert (None, RDF.type, VOCAB.StructuralModel) in graph  # named, though no endpoint serves it


# ---- confidence, dispute and the structural evidence ---------------------------------------------------

ASSESSMENT = {"p_true": 0.12, "agent_verdict": "correct", "structural_probability": 0.05, "rule_probability": 0.3,
              "reading": {"supports": 1, "contradicts": 0, "silent": 1}, "confidence_model": 2,
              "disputed_reason": "The structural model gives the triple 0.05 while the agent says Correct."}


@pytest.fixture
def assessed(verified):
    """The verified run as the confidence model leaves it: disputed, with its assessment and scoring model."""
    model = ready(verified["kg"])
    Run.objects.filter(pk=verified["run"].pk).update(confidence=0.64, disputed=True, assessment=ASSESSMENT, structural_model=model)
    return {**verified, "model": model}


def test_json_export_carries_confidence_dispute_p_true_and_the_structural_probability(assessed):
    older = make_finished_run(make_task(assessed["kg"], "Q42", "P19", "Q350"), confidence=None)
    document = json.loads(exports.render(select(run_ids=[assessed["run"].pk, older.pk]), "json").content)
    run, plain = document["runs"]
    assert (run["confidence"], run["disputed"], run["p_true"], run["structural_probability"]) == (0.64, True, 0.12, 0.05)
    assert run["assessment"] == ASSESSMENT and run["structural_model_id"] == assessed["model"].pk
    assert run["structural_model"] == f"ComplEx model #{assessed['model'].pk} of {assessed['kg'].name} v1"
    assert (plain["confidence"], plain["disputed"], plain["p_true"], plain["structural_probability"]) == (None, False, None, None)
    assert plain["assessment"] == {} and plain["structural_model"] == ""


def test_csv_export_has_columns_for_confidence_dispute_and_probabilities(assessed):
    older = make_finished_run(make_task(assessed["kg"], "Q42", "P19", "Q350"), confidence=None)
    text = exports.render(select(run_ids=[assessed["run"].pk, older.pk]), "csv").content.decode()
    first, second = csv.DictReader(io.StringIO(text))
    assert {key: first[key] for key in ("confidence", "disputed", "p_true", "structural_probability")} == {
        "confidence": "0.64", "disputed": "true", "p_true": "0.12", "structural_probability": "0.05"}
    assert first["disputed_reason"] == ASSESSMENT["disputed_reason"] and first["structural_model"].startswith("ComplEx model #")
    assert {key: second[key] for key in ("confidence", "disputed", "p_true", "structural_probability", "structural_model")} == {
        "confidence": "", "disputed": "false", "p_true": "", "structural_probability": "", "structural_model": ""}


@pytest.mark.parametrize("fmt", ["ttl", "jsonld"])
def test_prov_export_states_the_confidence_the_dispute_and_the_model_that_scored_the_triple(assessed, fmt):
    graph = _prov_graph(assessed, fmt)
    run_id = assessed["run"].pk
    verdict, run = URIRef(f"{BASE}runs/{run_id}/#verdict"), URIRef(f"{BASE}runs/{run_id}/")
    assert graph.value(verdict, VOCAB.confidence).toPython() == pytest.approx(0.64)
    assert graph.value(verdict, VOCAB.pTrue).toPython() == pytest.approx(0.12)
    assert graph.value(verdict, VOCAB.structuralProbability).toPython() == pytest.approx(0.05)
    assert graph.value(verdict, VOCAB.disputed).toPython() is True
    assert str(graph.value(verdict, VOCAB.disputedReason)) == ASSESSMENT["disputed_reason"]
    model = URIRef(f"urn:kgv:structural-model:{assessed['model'].pk}")  # no endpoint serves a structural model
    assert (run, PROV.used, model) in graph and (model, RDF.type, VOCAB.StructuralModel) in graph


def test_prov_export_of_an_undisputed_run_says_so(verified):
    graph = _prov_graph(verified, "ttl")
    assert graph.value(URIRef(f"{BASE}runs/{verified['run'].pk}/#verdict"), VOCAB.disputed).toPython() is False
    assert not list(graph.subjects(RDF.type, VOCAB.StructuralModel))


def test_the_report_shows_the_confidence_and_marks_a_disputed_verdict(assessed):
    html = exports.render(select(run_ids=[assessed["run"].pk]), "html").content.decode()
    assert "(confidence 0.64 that the verdict is right)" in html
    assert '<span class="disputed">DISPUTED</span> The structural model gives the triple 0.05 while the agent says Correct.' in html
    assert "combined P(true) 0.12" in html and "structural P(true) 0.05" in html and "rule P(true) 0.30" in html
    from pypdf import PdfReader

    pdf = exports.render(select(run_ids=[assessed["run"].pk]), "pdf").content
    text = "".join(page.extract_text() for page in PdfReader(io.BytesIO(pdf)).pages)
    assert "DISPUTED" in text and "0.64" in text


def test_the_report_names_plausibility_and_rule_evidence_readably(verified):
    verified["run"].support_items.filter(key="E3").update(kind="plausibility")
    html = exports.render(select(run_ids=[verified["run"].pk]), "html").content.decode()
    assert "<td>Structural plausibility</td>" in html and "<td>plausibility</td>" not in html


def test_a_reviewed_run_stands_for_its_task_over_later_runs(verified):
    later = make_finished_run(verified["task"], verdict="incorrect")
    assert [r.run_id for r in select(task_ids=[verified["task"].pk]).records] == [verified["run"].pk]
    add_review(later, verified["reviewer"], decision="accept", reason="Checked again.")
    assert [r.run_id for r in select(task_ids=[verified["task"].pk]).records] == [later.pk]
