"""The KG changes reviewers' decisions make, as TSV and as a SPARQL Update applied by rdflib to a copy of the KG."""

import csv
import io
import re

import pytest
from rdflib import Graph, URIRef
from rdflib.plugins.sparql import prepareUpdate

from tests.verifier.exports.verified_runs import add_review, make_finished_run, make_task
from tests.verifier.web.workbench import client_for
from tests.world import TRIPLES
from verifier import exports
from verifier.exports.records import SelectionError, select
from verifier.kg.ntriples import expand
from verifier.models import Entity, KnowledgeGraph, Relation, VerificationTask

pytestmark = pytest.mark.django_db
BASE = "http://kgv.test/api/"
WD, WDT = "http://www.wikidata.org/entity/", "http://www.wikidata.org/prop/direct/"


@pytest.fixture
def decided(verified, make_user):
    """One task for each way a decision meets the KG. ``verified``'s run (Douglas Adams a citizen of the UK, a KG
    triple) is accepted as Correct; the others are named by what happens to them."""
    kg, reviewer, second = verified["kg"], verified["reviewer"], make_user("reviewer", "rita")

    def decide(head, relation, tail, verdict, *reviews):
        run = make_finished_run(make_task(kg, head, relation, tail), verdict=verdict)
        for who, decision, final in reviews:
            add_review(run, who, decision=decision, verdict=final, reason=f"{who.username}: {decision}")
        return run.task_id

    return {
        "kept": verified["task"].pk,
        "removed": decide("Q42", "P19", "Q350", "correct", (reviewer, "override", "incorrect")),  # in the KG
        "added": decide("Q42", "P19", "Q145", "incorrect", (reviewer, "override", "correct")),  # not in the KG
        "absent": decide("Q90", "P17", "Q145", "incorrect", (reviewer, "accept", "incorrect")),  # not in the KG
        "unreviewed": decide("Q25", "P131", "Q145", "incorrect"),
        "split": decide("Q350", "P17", "Q145", "correct", (reviewer, "accept", "correct"), (second, "override", "incorrect")),
        "unsure": decide("Q145", "P47", "Q142", "incorrect", (reviewer, "not_enough_evidence", "not_enough_evidence")),
        "kg": kg,
    }


def rows_of(content: bytes) -> dict:
    return {int(row["task_id"]): row for row in csv.DictReader(io.StringIO(content.decode()), delimiter="\t")}


def test_every_selected_task_gets_its_change_or_the_reason_it_has_none(decided):
    names = [name for name in decided if name != "kg"]
    file = exports.render(select(task_ids=[decided[name] for name in names]), "changes")
    assert file.content_type.startswith("text/tab-separated-values") and file.filename.startswith("kgv-changes-7-runs-")
    rows = rows_of(file.content)
    assert {name: (rows[decided[name]]["change"], rows[decided[name]]["why"]) for name in names} == {
        "kept": ("", "reviewed Correct; the KG states it already"),
        "removed": ("remove", "reviewed Incorrect"),
        "added": ("add", "reviewed Correct"),
        "absent": ("", "reviewed Incorrect; the KG does not state it"),
        "unreviewed": ("", "not reviewed"),
        "split": ("", "reviewers disagree"),
        "unsure": ("", "reviewed: not enough evidence"),
    }
    removed = rows[decided["removed"]]
    assert (removed["head_id"], removed["relation_id"], removed["tail_id"], removed["in_kg"]) == ("Q42", "P19", "Q350", "true")
    assert (removed["decision"], removed["verdict"], removed["decided_by"], removed["reason"]) == (
        "incorrect", "correct", "rene", "rene: override")
    assert rows[decided["split"]]["decided_by"] == "rene, rita" and rows[decided["added"]]["in_kg"] == "false"


def test_the_sparql_update_applied_to_the_kg_removes_and_adds_exactly_the_settled_changes(decided):
    text = exports.render(select(task_ids=[decided[name] for name in decided if name != "kg"]), "sparql-update",
                          base=BASE).content.decode()
    graph = Graph()
    for head, relation, tail in TRIPLES:
        graph.add((URIRef(WD + head), URIRef(WDT + relation), URIRef(WD + tail)))
    graph.update(prepareUpdate(text))
    after = {(str(h)[len(WD):], str(r)[len(WDT):], str(t)[len(WD):]) for h, r, t in graph}
    assert after == set(TRIPLES) - {("Q42", "P19", "Q350")} | {("Q42", "P19", "Q145")}
    assert "# unchanged: 1 not reviewed; 1 reviewed Correct; the KG states it already; 1 reviewed Incorrect; the KG does " \
           "not state it; 1 reviewed: not enough evidence; 1 reviewers disagree" in text
    assert f"# task {decided['removed']}, run " in text and "Douglas Adams place of birth Cambridge (reviewed Incorrect)" in text


def test_ids_that_are_not_wikidatas_nor_iris_get_urn_names_of_their_kg_in_every_export(light_kg, make_user):
    kg = KnowledgeGraph.objects.create(name="films", version=1)
    film, actor = (Entity.objects.create(kg=kg, external_id=mid, label=label)
                   for mid, label in (("/m/0dr_4", "Titanic"), ("http://example.org/kate", "Kate Winslet")))
    starring = Relation.objects.create(kg=kg, external_id="/film/film/starring", label="starring")
    run = make_finished_run(VerificationTask.objects.create(kg=kg, head=film, relation=starring, tail=actor))
    add_review(run, make_user("reviewer", "rene"), decision="accept")
    text = exports.render(select(run_ids=[run.pk]), "sparql-update", base=BASE).content.decode()
    assert ("<urn:kgv:kg:films:entity:%2Fm%2F0dr_4> <urn:kgv:kg:films:relation:%2Ffilm%2Ffilm%2Fstarring> "
            "<http://example.org/kate> .") in text
    graph = Graph().parse(data=exports.render(select(run_ids=[run.pk]), "ttl", base=BASE).content, format="turtle")
    assert URIRef("urn:kgv:kg:films:entity:%2Fm%2F0dr_4") in set(graph.all_nodes())  # the same name in PROV-O
    prepareUpdate(text)  # a request a SPARQL store accepts
    assert (expand("Q42"), expand("P27", relation=True), expand("P27"), expand("Q42", relation=True)) == (
        WD + "Q42", WDT + "P27", WD + "P27", None)
    assert expand("urn:isbn:0451450523") == "urn:isbn:0451450523" and expand("/m/0dr_4") is None


def test_a_remote_kg_is_not_looked_up_so_each_settled_decision_is_its_change(light_kg, make_user):
    remote = KnowledgeGraph.objects.create(name="wikidata", kind=KnowledgeGraph.Kind.SPARQL, version=1,
                                           endpoint_url="http://sparql.test/")
    head, tail = (Entity.objects.create(kg=remote, external_id=qid, label=label)
                  for qid, label in (("Q42", "Douglas Adams"), ("Q30", "United States")))
    relation = Relation.objects.create(kg=remote, external_id="P27", label="country of citizenship")
    run = make_finished_run(VerificationTask.objects.create(kg=remote, head=head, relation=relation, tail=tail))
    add_review(run, make_user("reviewer", "rene"), decision="override", verdict="incorrect")
    (row,) = rows_of(exports.render(select(run_ids=[run.pk]), "changes").content).values()
    assert (row["change"], row["why"], row["in_kg"]) == ("remove", "reviewed Incorrect; the remote KG was not looked up", "")
    assert f"DELETE DATA {{\n  # task {run.task_id}" in exports.render(select(run_ids=[run.pk]), "sparql-update").content.decode()


def test_a_sparql_update_changes_one_kg_and_says_so_for_a_selection_of_several(decided, make_user):
    other = KnowledgeGraph.objects.create(name="other-kg", version=1)
    earth = Entity.objects.create(kg=other, external_id="Q2", label="Earth")
    run = make_finished_run(VerificationTask.objects.create(
        kg=other, head=earth, relation=Relation.objects.create(kg=other, external_id="P31", label="instance of"), tail=earth))
    selection = select(task_ids=[decided["removed"], run.task_id])
    with pytest.raises(SelectionError, match=r"a SPARQL Update changes one KG, and these tasks are of 2 \(other-kg, world\)"):
        exports.render(selection, "sparql-update")
    assert {row["kg"] for row in rows_of(exports.render(selection, "changes").content).values()} == {"world", "other-kg"}


def test_a_reason_a_spreadsheet_would_run_stays_text_and_on_one_line(verified):
    add_review(verified["run"], verified["reviewer"], decision="override", verdict="incorrect",
               reason='=HYPERLINK("http://x")\tsee\nthe article')
    (row,) = rows_of(exports.render(select(run_ids=[verified["run"].pk]), "changes").content).values()
    assert row["reason"] == '\'=HYPERLINK("http://x") see the article' and row["change"] == "remove"


def test_the_queue_and_the_api_export_the_changes(decided, make_user):
    client = client_for(make_user, "viewer")
    ids = f"{decided['removed']},{decided['added']}"
    response = client.get(f"/api/export/changes/?tasks={ids}")
    assert response.status_code == 200 and response["Content-Disposition"].endswith('.tsv"')
    assert {row["change"] for row in rows_of(response.content).values()} == {"remove", "add"}
    queue = client.get("/").content.decode()
    assert '<option value="changes">KG changes (TSV)</option>' in queue
    assert '<option value="sparql-update">KG changes (SPARQL Update)</option>' in queue
    response = client.post("/queue/bulk/", {"action": "export", "fmt": "sparql-update", "tasks": [decided["removed"]]})
    assert response.status_code == 200 and response["Content-Type"].startswith("application/sparql-update")
    assert "DELETE DATA" in response.content.decode() and "INSERT DATA" not in response.content.decode()


def test_the_run_page_says_whether_the_kg_states_the_triple(decided, make_user):
    client = client_for(make_user, "viewer")

    def note(task_id):
        page = client.get(f"/tasks/{task_id}/", follow=True).content.decode()
        found = re.search(r'<span id="in-kg" title="([^"]+)">([^<]+)</span>', page)
        return found and found.groups()

    assert note(decided["removed"]) == ("A reviewer's Incorrect makes it a removal in the KG changes export", "stated by the KG")
    assert note(decided["added"]) == ("A reviewer's Correct makes it an addition in the KG changes export", "not in the KG")
    KnowledgeGraph.objects.filter(pk=decided["kg"].pk).update(kind=KnowledgeGraph.Kind.SPARQL)
    assert note(decided["removed"]) is None  # a remote KG is not looked up


@pytest.mark.slow
def test_an_export_takes_as_many_tasks_as_a_bulk_action(verified, make_user):
    """The queue exports every task of a view, up to a bulk action's 1,000: an export takes that many."""
    from verifier.models import Run
    from verifier.services import MAX_BULK

    task = verified["task"]
    heads = Entity.objects.bulk_create([Entity(kg=task.kg, external_id=f"Q{n}", label=f"person {n}")
                                        for n in range(900_000, 900_000 + MAX_BULK - 1)])
    tasks = VerificationTask.objects.bulk_create(
        [VerificationTask(kg=task.kg, head=head, relation=task.relation, tail=task.tail) for head in heads])
    Run.objects.bulk_create([Run(task=t, status=Run.Status.SUCCEEDED, verdict="correct") for t in tasks])
    ids = [task.pk, *(t.pk for t in tasks)]
    response = client_for(make_user, "viewer").get(f"/api/export/changes/?tasks={','.join(map(str, ids))}")
    assert response.status_code == 200 and len(rows_of(response.content)) == MAX_BULK
    with pytest.raises(SelectionError, match="at most 1000 tasks, runs and claims per export"):
        select(task_ids=ids, run_ids=[verified["run"].pk])


def test_applying_the_changes_makes_the_kg_state_what_reviewers_settled_once(decided, make_user):
    from django.core.management import call_command

    from verifier.models import AuditEvent, StructuralModel, Triple
    from verifier.settled_changes import apply_changes

    kg = decided["kg"]
    benchmark = make_finished_run(make_task(kg, "Q42", "P69", "Q691283", source="evaluation:codex-kge-100 (valid)"))
    add_review(benchmark, make_user("reviewer", "bea"), decision="override", verdict="incorrect", reason="benchmark")

    def stated():
        return set(Triple.objects.filter(kg=kg).values_list("head__external_id", "relation__external_id", "tail__external_id"))

    def degree(qid):
        return Entity.objects.get(kg=kg, external_id=qid).degree

    version, cambridge, uk = kg.version, degree("Q350"), degree("Q145")
    out = io.StringIO()
    call_command("apply_changes", kg.name, "--dry-run", stdout=out)
    assert "remove  Q42 P19 Q350  (Douglas Adams place of birth Cambridge; task" in out.getvalue()
    assert "2 change(s) to make (dry run: nothing changed)." in out.getvalue() and stated() == set(TRIPLES)

    admin = make_user("admin", "ada")
    applied = apply_changes(kg=kg, actor=admin)
    assert stated() == set(TRIPLES) - {("Q42", "P19", "Q350")} | {("Q42", "P19", "Q145")}  # the benchmark's triple stays
    assert (applied.amended.removed, applied.amended.added, applied.amended.version) == (1, 1, version + 1)
    assert (degree("Q350"), degree("Q145")) == (cambridge - 1, uk + 1)
    assert applied.training.status == StructuralModel.Status.QUEUED and applied.training.kg_version == version + 1
    event = AuditEvent.objects.get(action="kg.changes_applied")
    assert event.actor == admin and event.after["removed"] == 1 and event.after["tasks"] == [decided["removed"], decided["added"]]
    assert (event.after["triples_removed"], event.after["triples_added"]) == (["Q42 P19 Q350"], ["Q42 P19 Q145"])
    rows = rows_of(exports.render(select(task_ids=[decided["removed"], decided["added"]]), "changes").content)
    assert {row["why"] for row in rows.values()} == {"reviewed Incorrect; the KG does not state it",
                                                     "reviewed Correct; the KG states it already"}
    out = io.StringIO()
    call_command("apply_changes", kg.name, stdout=out)
    assert "Nothing to change" in out.getvalue() and KnowledgeGraph.objects.get(pk=kg.pk).version == version + 1


def test_a_remote_kg_is_changed_in_its_own_store_not_here(light_kg):
    from django.core.management import CommandError, call_command

    KnowledgeGraph.objects.create(name="wikidata", kind=KnowledgeGraph.Kind.SPARQL, version=1)
    from verifier.kg.amend import NotLocal, amend

    with pytest.raises(NotLocal, match="wikidata is a remote KG: change it in its own store"):
        amend(KnowledgeGraph.objects.get(name="wikidata"), remove=[(1, 2, 3)])
    with pytest.raises(CommandError, match="the KG 'nowhere' is not loaded"):
        call_command("apply_changes", "nowhere")


def test_the_changes_page_lists_what_to_change_and_an_admin_applies_it(decided, make_user):
    from verifier.models import Triple

    kg = decided["kg"]
    page = client_for(make_user, "viewer").get("/changes/").content.decode()
    rows = re.findall(r'<tr data-change="(\w+)" data-task="(\d+)">', page)
    assert sorted(rows) == sorted([("remove", str(decided["removed"])), ("add", str(decided["added"]))])
    assert f'/api/export/sparql-update/?tasks={decided["removed"]},{decided["added"]}"' in page
    assert "Apply to KGV" not in page  # a viewer reads and downloads
    assert 'id="kg-changes-link"' in client_for(make_user, "viewer").get("/").content.decode()
    admin = client_for(make_user, "admin")
    assert client_for(make_user, "reviewer").post(f"/changes/{kg.pk}/apply/").status_code == 403
    page = admin.post(f"/changes/{kg.pk}/apply/", follow=True).content.decode()
    assert "KGV&#x27;s copy of world: 1 triple(s) removed and 1 added (version" in page and "is queued to train on it" in page
    assert "Nothing to change: world follows every settled decision." in page
    assert not Triple.objects.filter(kg=kg, head__external_id="Q42", relation__external_id="P19", tail__external_id="Q350").exists()
    page = admin.post(f"/changes/{kg.pk}/apply/", follow=True).content.decode()
    assert "Nothing to change: world already follows every settled decision." in page


def test_the_changes_of_a_kg_are_read_in_a_few_queries_however_many_tasks_nobody_decided(decided, django_assert_max_num_queries):
    from verifier.models import Run
    from verifier.settled_changes import settled_changes

    kg = decided["kg"]
    heads = Entity.objects.bulk_create([Entity(kg=kg, external_id=f"Q{n}", label=f"person {n}") for n in range(800_000, 800_300)])
    relation, tail = kg.relations.get(external_id="P27"), kg.entities.get(external_id="Q145")
    tasks = VerificationTask.objects.bulk_create([VerificationTask(kg=kg, head=h, relation=relation, tail=tail) for h in heads])
    Run.objects.bulk_create([Run(task=t, status=Run.Status.SUCCEEDED, verdict="correct") for t in tasks])
    with django_assert_max_num_queries(12):
        found = settled_changes(kg)
    assert sorted(change.record.task_id for change in found) == sorted([decided["removed"], decided["added"]])
