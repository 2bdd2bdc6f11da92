"""The KG audit end to end on a small generated KG with errors planted in it: the errors rank first, with reasons
that are true of the KG; an interrupted audit resumes where it stopped; suspects become flagged triples."""

import io
import math

import numpy as np
import pytest
from django.core.management import call_command

from tests.verifier.structure.test_training import TINY, generated_kg
from tests.workers import wait_for
from verifier.kg.amend import amend
from verifier.kg.loader import load_source
from verifier.kg.sources import EntityRecord, KGSource
from verifier.kg_audit import exports
from verifier.kg_audit.features import FEATURES
from verifier.kg_audit.graph import GRAPH_FEATURES, GraphIndex
from verifier.kg_audit.names import NameContext, embed_names, named
from verifier.kg_audit.pipeline import AuditError, prepare, queue_suspects, run_here, score_chunk, scores, start_audit
from verifier.kg_audit.reasons import reasons
from verifier.models import AuditChunk, AuditEvent, KGAudit, KnowledgeGraph, StructuralModel, Suspect, VerificationTask
from verifier.structure.training import train

# A town given as a country, a country born in a town, and a person who is a citizen of a person.
PLANTED = [("P5", "citizen_of", "T3"), ("C2", "born_in", "T9"), ("P8", "citizen_of", "P9")]


def _rows(kg, triple):
    return (kg.entities.get(external_id=triple[0]).pk, kg.relations.get(external_id=triple[1]).pk,
            kg.entities.get(external_id=triple[2]).pk)


@pytest.fixture
def noisy(db):
    kg, _ = generated_kg("noisy")
    amend(kg, remove=[], add=[_rows(kg, t) for t in PLANTED])
    kg.refresh_from_db()
    return kg


def _ranks(audit, kg) -> dict:
    ranked = {(s.head_id, s.relation_id, s.tail_id): s.rank for s in Suspect.objects.filter(audit=audit)}
    return {t: ranked.get(_rows(kg, t)) for t in PLANTED}


@pytest.mark.slow
def test_planted_errors_rank_first_with_reasons_true_of_the_kg(noisy):
    kg = noisy
    train(kg, config=TINY, folds=2)
    audit = run_here(start_audit(kg=kg, queue=False, chunk_size=100))
    assert audit.status == KGAudit.Status.FINISHED and audit.structural_model_id is not None
    assert audit.scored == audit.triples == kg.triples.count() == 283 and audit.chunks.filter(done=True).count() == 3
    ranks = _ranks(audit, kg)
    assert all(rank is not None and rank <= 10 for rank in ranks.values()), ranks  # of 283 triples
    town_as_country = Suspect.objects.get(audit=audit, head__external_id="P5", tail__external_id="T3")
    codes = {r["code"] for r in town_as_country.reasons}
    assert "range" in codes  # no value of citizen of is a town: the statement is true of the KG
    assert "functional" in codes  # P5 already has a citizenship, and a person has one
    # Every triple is scored, the distribution and the suspects per relation are summarised.
    rows, suspicion = scores(audit)
    assert len(rows) == audit.triples and ((0 <= suspicion) & (suspicion <= 1)).all()
    assert sum(audit.summary["histogram"]["counts"]) == audit.triples
    assert audit.metrics["auc"]["all"] > 0.8 and "tail_log_p" in audit.metrics["features"]


def test_an_interrupted_audit_resumes_from_the_chunks_still_to_score(noisy):
    kg = noisy
    audit = start_audit(kg=kg, queue=False, chunk_size=100)
    prepare(audit.pk, send_chunks=False)
    assert score_chunk(audit.pk, 0) and not score_chunk(audit.pk, 0)  # a chunk is scored once
    assert KGAudit.objects.get(pk=audit.pk).scored == 100
    # Another audit of the same KG waits for this one.
    with pytest.raises(AuditError, match=f"audit #{audit.pk} of noisy is still running"):
        start_audit(kg=kg, queue=False)
    out = io.StringIO()
    call_command("audit", "noisy", "--resume", "--no-progress", stdout=out)
    audit.refresh_from_db()
    assert audit.status == KGAudit.Status.FINISHED and audit.scored == audit.triples
    assert AuditChunk.objects.filter(audit=audit, done=True).count() == 3
    assert f"Audit #{audit.pk} of noisy: {audit.triples:,} triples scored" in out.getvalue()
    assert audit.structural_model_id is None and "tail_log_p" not in audit.metrics["features"]  # no model: statistics


def test_suspects_are_queued_as_flagged_triples_and_exported(noisy, tmp_path):
    kg = noisy
    audit = run_here(start_audit(kg=kg, queue=False))
    assert queue_suspects(audit=audit, top=5) == 5
    tasks = VerificationTask.objects.filter(kg=kg, source__startswith=f"audit:{audit.pk}")
    assert tasks.count() == 5 and set(Suspect.objects.filter(audit=audit, rank__lte=5).values_list("task", flat=True)) == \
        set(tasks.values_list("pk", flat=True))
    assert queue_suspects(audit=audit, top=5) == 0  # already queued
    assert AuditEvent.objects.filter(action="kg_audit.queue").exists()
    text = exports.to_csv(audit)
    assert text.splitlines()[0].startswith("rank,suspicion,head_id,head")
    assert len(text.splitlines()) == Suspect.objects.filter(audit=audit).count() + 1
    assert "Suspects per relation" in exports.to_html(audit)


def test_a_reaudit_says_what_moved(noisy):
    kg = noisy
    first = run_here(start_audit(kg=kg, queue=False))
    fixed = _rows(kg, PLANTED[0])
    amend(kg, remove=[fixed], add=[])
    kg.refresh_from_db()
    second = run_here(start_audit(kg=kg, queue=False))
    assert second.previous_id == first.pk
    moved = second.summary["compared"]
    assert moved["gone"] >= 1 and moved["kept"] >= 1
    assert not Suspect.objects.filter(audit=second, head_id=fixed[0], relation_id=fixed[1], tail_id=fixed[2]).exists()


@pytest.mark.django_db(transaction=True)
def test_the_audit_workers_score_the_chunks_and_finish_it(celery_worker_process):
    kg, _ = generated_kg("noisy")
    audit = start_audit(kg=kg, chunk_size=100)
    finished = wait_for(lambda: KGAudit.objects.filter(pk=audit.pk, status__in=["finished", "failed"]).first(), timeout=180,
                        what="the audit workers to finish the audit")
    assert finished.status == KGAudit.Status.FINISHED, finished.error
    assert AuditChunk.objects.filter(audit=audit, done=True).count() == 3 and finished.scored == kg.triples.count()
    assert not StructuralModel.objects.filter(kg=kg).exists()


def test_the_audit_refuses_a_kg_with_nothing_to_audit(db):
    empty = KnowledgeGraph.objects.create(name="empty")
    with pytest.raises(AuditError, match="no triples of its own"):
        start_audit(kg=empty, queue=False)


def test_the_ends_names_are_compared_embedded_once_and_again_when_they_change(noisy):
    kg = noisy
    audit = run_here(start_audit(kg=kg, queue=False))
    assert audit.metrics["names"] and "name_similarity" in audit.metrics["features"]
    assert named(kg).count() == kg.entities.count() and not named(kg).filter(embedding__isnull=True).exists()
    assert embed_names(kg) == 0  # kept: the next audit reads them back
    # A new description resets that entity's vector, and only that one; an unchanged reload keeps every vector.
    triples = [(h.external_id, r.external_id, t.external_id) for h, r, t in
               ((x.head, x.relation, x.tail) for x in kg.triples.select_related("head", "relation", "tail"))]
    renamed = EntityRecord("C0", "Country C0", "a republic on the coast", [], ["country"])
    load_source(KGSource(kg.name, kg.name, "", triples=lambda: iter(triples), entities=[renamed]), embed=False)
    assert list(named(kg).filter(embedding__isnull=True).values_list("external_id", flat=True)) == ["C0"]
    assert embed_names(kg) == 1


def test_a_triple_whose_ends_are_about_unrelated_things_says_so():
    row = np.zeros(len(FEATURES), dtype=np.float32)
    at = FEATURES.index("name_similarity")
    labels = ("stool", "hypernym", "Saxony")
    row[at] = 0.03
    unrelated = [r for r in reasons(row, labels) if r["code"] == "unrelated-names"]
    assert unrelated and "stool and Saxony have almost nothing in common (similarity 0.03 of 1)" in unrelated[0]["text"]
    row[at] = 0.45
    assert "unrelated-names" not in {r["code"] for r in reasons(row, labels)}
    row[at] = math.nan  # an end without a name: nothing to say
    assert "unrelated-names" not in {r["code"] for r in reasons(row, labels)}


def test_an_end_unlike_its_peers_says_so():
    row = np.zeros(len(FEATURES), dtype=np.float32)
    labels = ("stool", "hypernym", "Saxony")
    row[FEATURES.index("head_like_co_subjects")], row[FEATURES.index("tail_like_co_values")] = 0.04, 0.6
    said = {r["code"]: r["text"] for r in reasons(row, labels)}
    assert said["unlike-subjects"] == ("stool reads like none of the other subjects of “hypernym” with the value Saxony "
                                       "(similarity 0.04 of 1 with their names)")
    assert "unlike-values" not in said
    row[FEATURES.index("head_like_co_subjects")] = math.nan  # no other subject, or no name: nothing to say
    assert "unlike-subjects" not in {r["code"] for r in reasons(row, labels)}


def test_a_fact_and_a_corruption_with_the_same_types_get_the_same_type_shares():
    """Type shares count the triple alike whether the KG holds it or not: a fact one count below every corruption of
    its types would tell a classifier which triples the KG holds, and rank the KG's own errors with its facts."""
    # Entities 0-3 people (type 0), 4-5 towns (type 1), 6 a ship (type 2); relation 0 "built or born in".
    triples = np.array([[0, 0, 4], [1, 0, 4], [2, 0, 5], [6, 0, 5]])
    index = GraphIndex(triples, num_entities=7, num_relations=1, types=np.array([0, 0, 0, 0, 1, 1, 2]))
    fact, corruption = [0, 0, 4], [3, 0, 4]  # a person of the same type in place of the head
    described = index.describe(np.array([fact, corruption]))
    assert described.in_kg.tolist() == [True, False]
    shares = {name: described.features[:, GRAPH_FEATURES.index(name)].tolist() for name in ("head_type_share", "tail_type_share")}
    assert shares == {"head_type_share": [0.75, 0.75], "tail_type_share": [1.0, 1.0]}


def test_an_end_is_compared_with_the_names_of_its_peers_the_triple_itself_left_out():
    """Each end against the mean name of those playing its part: a fact is described as the KG without it would
    describe it, as a triple the KG lacks is."""
    # Names on two axes: genera (x) and verbs (y). Genera 0-2 are filed under "plant genus" (3); verb 4 is not.
    vectors = np.array([[1, 0], [1, 0], [0.8, 0.6], [1, 0], [0, 1], [np.nan, np.nan]], dtype=np.float16)
    triples = np.array([[0, 0, 3], [1, 0, 3], [2, 0, 3], [5, 0, 3]])  # relation 0: hypernym; 5 has no name
    context = NameContext(triples, vectors, num_relations=1)
    at = {name: i for i, name in enumerate(NameContext.FEATURES)}
    described = context.describe(np.array([[2, 0, 3], [4, 0, 3]]), np.array([True, False]))
    # Genus 2 reads fairly like the other genera filed under 3 (0 and 1, itself left out); verb 4 little like them.
    assert described[0, at["head_like_co_subjects"]] == pytest.approx(0.8, abs=1e-3)
    assert described[0, at["head_like_subjects"]] == pytest.approx(0.8, abs=1e-3)
    assert described[1, at["head_like_co_subjects"]] < 0.25
    # The fact described as the KG without it describes it.
    without = NameContext(triples[[0, 1, 3]], vectors, num_relations=1).describe(np.array([[2, 0, 3]]), np.array([False]))
    assert described[0].tolist() == pytest.approx(without[0].tolist(), nan_ok=True, abs=1e-3)
    # 3 is no subject's other value, and 5 has no name: nothing to compare.
    assert math.isnan(described[0, at["tail_like_co_values"]])
    assert math.isnan(context.describe(np.array([[5, 0, 3]]), np.array([True]))[0, at["head_like_subjects"]])
