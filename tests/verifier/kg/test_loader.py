import io
import json

import numpy as np
import pytest
from django.core.management import CommandError, call_command
from pgvector.django import CosineDistance

from verifier.kg.loader import ImportRejected, load_source
from verifier.kg.sources import RelationRecord, detect_source, read_tsv_triples
from verifier.memory import encoder
from verifier.models import (
    Entity,
    EntityType,
    KnowledgeGraph,
    MemoryEntry,
    MinedRule,
    Passage,
    Relation,
    StructuralModel,
    Triple,
)
from verifier.models.kg import EMBEDDING_DIMENSIONS

pytestmark = pytest.mark.django_db


def _write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_tsv_triples_load_with_ids_as_labels(tmp_path):
    path = _write(tmp_path, "small.tsv", "alice\tknows\tbob\nbob\tknows\tcarol\nalice\tlikes\tcarol\n")
    report = load_source(read_tsv_triples(path, name="small"), embed=False)
    kg = KnowledgeGraph.objects.get(name="small")
    assert report.counts["triples"] == 3 and report.counts["entities"] == 3 and report.counts["relations"] == 2
    assert kg.version == 1 and kg.loaded_at is not None
    assert Entity.objects.get(kg=kg, external_id="alice").label == "alice"
    bob = Entity.objects.get(kg=kg, external_id="bob")
    assert Triple.objects.filter(head=bob, relation__external_id="knows", tail__external_id="carol").exists()


def test_loading_twice_changes_nothing_but_the_version(tmp_path):
    path = _write(tmp_path, "small.tsv", "a\tr\tb\nb\tr\tc\n")
    first = load_source(read_tsv_triples(path, name="twice"), embed=False)
    second = load_source(read_tsv_triples(path, name="twice"), embed=False)
    assert first.counts == second.counts
    assert set(second.added.values()) == {0}
    assert KnowledgeGraph.objects.get(name="twice").version == 2


def test_a_malformed_line_rejects_the_whole_file_and_keeps_what_was_stored(tmp_path):
    good = _write(tmp_path, "graph.tsv", "a\tr\tb\n")
    load_source(read_tsv_triples(good, name="keep"), embed=False)
    bad = _write(tmp_path, "graph2.tsv", "x\tr\ty\nbroken line\ny\tr\tz\n")
    with pytest.raises(ImportRejected) as rejected:
        load_source(read_tsv_triples(bad, name="keep"), embed=False)
    assert "graph2.tsv:2" in str(rejected.value) and "nothing was imported" in str(rejected.value)
    kg = KnowledgeGraph.objects.get(name="keep")
    assert kg.version == 1
    assert list(Triple.objects.filter(kg=kg).values_list("head__external_id", "tail__external_id")) == [("a", "b")]
    assert not Entity.objects.filter(kg=kg, external_id="x").exists()


def test_a_renamed_relation_keeps_its_memories(tmp_path):
    path = _write(tmp_path, "graph.tsv", "a\tr\tb\n")
    load_source(read_tsv_triples(path, name="renamed"), embed=False)
    load_source(read_tsv_triples(path, name="other"), embed=False)
    memories = {name: MemoryEntry.objects.create(kg=KnowledgeGraph.objects.get(name=name), triple_text="a r b",
                                                 relation_label="r", trajectory="…", verdict="correct",
                                                 embedding=[0.0] * EMBEDDING_DIMENSIONS)
                for name in ("renamed", "other")}
    source = read_tsv_triples(path, name="renamed")
    source.relations = [RelationRecord("r", "relates to")]
    load_source(source, embed=False)
    assert Relation.objects.get(kg__name="renamed", external_id="r").label == "relates to"
    memories = {name: MemoryEntry.objects.get(pk=m.pk).relation_label for name, m in memories.items()}
    assert memories == {"renamed": "relates to", "other": "r"}, "another KG's memories keep their label"


def test_a_reload_that_changes_no_triple_keeps_the_structural_model_and_rules(tmp_path):
    facts = "a\tr\tb\nb\tr\tc\na\ts\tb\nb\ts\tc\n"  # r and s imply each other: two rules
    path = _write(tmp_path, "graph.tsv", facts)
    call_command("load_kg", str(path), "--name", "kept", "--no-kge", "--no-embed", "--no-progress", stdout=io.StringIO())
    kg = KnowledgeGraph.objects.get(name="kept")
    model = StructuralModel.objects.create(kg=kg, kg_version=kg.version, status=StructuralModel.Status.READY)
    rules = MinedRule.objects.filter(kg=kg).count()
    assert rules > 0

    out = io.StringIO()
    call_command("load_kg", str(path), "--name", "kept", "--replace", "--no-embed", "--no-progress", stdout=out)
    kg.refresh_from_db()
    assert kg.version == 2 and StructuralModel.objects.ready_for(kg) == model
    assert MinedRule.objects.filter(kg=kg, kg_version=2).count() == rules
    assert f"structural model #{model.pk} carry over to v2" in out.getvalue()
    assert StructuralModel.objects.filter(kg=kg).count() == 1, "no retraining was queued"

    grown = load_source(read_tsv_triples(_write(tmp_path, "more.tsv", facts + "c\tr\ta\n"), name="kept"), embed=False)
    kg.refresh_from_db()
    serving = StructuralModel.objects.ready_for(kg)
    assert grown.facts_changed and serving == model and serving.kg_version < kg.version, \
        "the previous version's model keeps scoring while the changed KG's model would train"
    swapped = load_source(read_tsv_triples(_write(tmp_path, "swap.tsv", facts + "c\ts\ta\n"), name="kept"),
                          replace=True, embed=False)
    assert swapped.facts_changed and swapped.added["triples"] == 0, "as many triples, but not the same ones"


def test_replace_drops_triples_missing_from_the_new_file(tmp_path):
    load_source(read_tsv_triples(_write(tmp_path, "v1.tsv", "a\tr\tb\nb\tr\tc\n"), name="rep"), embed=False)
    load_source(read_tsv_triples(_write(tmp_path, "v2.tsv", "a\tr\tb\n"), name="rep"), replace=True, embed=False)
    assert Triple.objects.filter(kg__name="rep").count() == 1


@pytest.mark.slow
def test_codex_subset_loads_passages_embeddings_types_and_derived_schema(codex_subset):
    report = load_source(detect_source(codex_subset, name="codex-mini"))
    kg = report.kg
    assert report.counts["triples"] == 200
    assert report.counts["passages"] == report.counts["entities"] == report.counts["embedded passages"]
    assert EntityType.objects.filter(kg=kg).exists()
    # Relation labels are embedded, and domain/range are derived from the observed heads and tails.
    relation = Relation.objects.filter(kg=kg).order_by("external_id").first()
    assert relation.embedding is not None and relation.schema_source == "derived"
    assert Relation.objects.filter(kg=kg).exclude(domain=[]).exists()

    # Passage embeddings rank the passage about an entity first for a query about that entity.
    target = Passage.objects.filter(kg=kg).select_related("entity").first()
    query = encoder.encode_one(target.text[:200])
    nearest = Passage.objects.filter(kg=kg).order_by(CosineDistance("embedding", query)).first()
    assert nearest.pk == target.pk
    assert np.isclose(np.linalg.norm(np.array(target.embedding)), 1.0, atol=1e-3)

    # Full-text search works on the generated search vector.
    word = target.entity.label.split()[0]
    assert Passage.objects.filter(kg=kg, search_vector=word).exists()

    # A reload re-embeds nothing whose text is unchanged.
    again = load_source(detect_source(codex_subset, name="codex-mini"))
    assert again.embedded_passages == 0 and again.counts == report.counts


def test_load_kg_command_reports_errors_in_one_line(tmp_path):
    with pytest.raises(CommandError, match="does not exist"):
        call_command("load_kg", str(tmp_path / "nope.tsv"))
    bad = _write(tmp_path, "bad.tsv", "only\ttwo\n")
    with pytest.raises(CommandError, match="bad.tsv:1"):
        call_command("load_kg", str(bad), "--no-embed", "--no-progress")


def test_load_kg_activates_the_confidence_model_shipped_for_that_kg(tmp_path, monkeypatch):
    from verifier import confidence
    from verifier.agent.weighing import FEATURES
    from verifier.models import ConfidenceModel

    shipped = tmp_path / "data"
    shipped.mkdir()
    (shipped / "confidence_model.small.json").write_text(json.dumps(
        {"format": confidence.FORMAT, "kg": "small", "features": FEATURES, "coefficients": [0.5] * len(FEATURES), "intercept": 0.2}))
    monkeypatch.setattr(confidence, "SEED_MODEL", shipped / "confidence_model.json")
    path = _write(tmp_path, "small.tsv", "alice\tknows\tbob\nbob\tknows\tcarol\n")
    call_command("load_kg", str(path), "--no-kge", "--no-embed", "--no-progress", stdout=open("/dev/null", "w"))
    kg = KnowledgeGraph.objects.get(name="small")
    model = ConfidenceModel.objects.get(kg=kg)
    assert model.active and model.intercept == 0.2 and "confidence_model.small.json" in model.source
    call_command("load_kg", str(path), "--replace", "--no-kge", "--no-embed", "--no-progress", stdout=open("/dev/null", "w"))
    assert ConfidenceModel.objects.filter(kg=kg).count() == 1  # a reload keeps the KG's model, imported once
    # The demo's seeding afterwards adds the model for every KG as the fallback: the KG keeps its own.
    (shipped / "confidence_model.json").write_text(json.dumps(
        {"format": confidence.FORMAT, "features": FEATURES, "coefficients": [1.0] * len(FEATURES), "intercept": 0.0}))
    [everyone] = confidence.seed_shipped_models()
    assert everyone.kg is None and everyone.active and confidence.active_model(kg.pk) == model
