"""A second KG as a reference: entities matched by Wikidata id, relations aligned from the data, what the
reference holds about a triple as evidence and features, weighed by the calibration it was fitted with."""

import io
import json
import random

import pytest
from django.core.management import CommandError, call_command

from verifier.kg.loader import load_source
from verifier.kg.sources import EntityRecord, KGSource, RelationRecord, TypeRecord, read_fb15k
from verifier.models import Entity, KnowledgeGraph, StructuralModel
from verifier.selectors import structural_statuses
from verifier.structure import scoring
from verifier.structure.evidence import StructuralEvidence
from verifier.structure.kge import KGEConfig
from verifier.structure.reference import FEATURES, ReferenceIndex, References, wikidata_key
from verifier.structure.training import train
from verifier.tools.kg_plausibility import observation
from verifier.tools.names import Resolved

TINY = KGEConfig(dim=16, learning_rate=0.01, batch_size=64, entity_dropout=0.0, relation_dropout=0.0, max_epochs=80,
                 eval_every=40, patience=3, max_minutes=5)
COUNTRIES = [f"Q{i}" for i in range(1, 7)]
PEOPLE = [f"Q{100 + i}" for i in range(90)]
CONTRADICTED = PEOPLE[0]  # the reference gives this one another nationality


def _citizenship(person: str) -> str:
    return COUNTRIES[int(person[1:]) % len(COUNTRIES)]


def wiki_kg():
    """People (Wikidata ids) citizens of six countries, and a relation no reference relation reads (its values are
    never a person's nationality)."""
    rng = random.Random(3)
    triples = [(p, "P27", _citizenship(p)) for p in PEOPLE]
    triples += [(p, "P1050", rng.choice([c for c in COUNTRIES if c != _citizenship(p)])) for p in PEOPLE[1:31]]
    entities = ([EntityRecord(c, f"Country {c}", "a country", [], ["country"]) for c in COUNTRIES]
                + [EntityRecord(p, f"Person {p}", "a person", [], ["human"]) for p in PEOPLE])
    relations = [RelationRecord("P27", "country of citizenship", ""), RelationRecord("P1050", "medical condition", "")]
    source = KGSource("wiki", "wiki", "", triples=lambda: iter(triples), entities=entities, relations=relations,
                      types=[TypeRecord("country", "country"), TypeRecord("human", "human")])
    return load_source(source, embed=False).kg


def free_kg():
    """The same people under Freebase-like ids, Wikidata ids as ``same_as``: nationality as the wiki KG has it
    (the first person's another), a film link for a few, and one entity the wiki KG lacks."""
    mid = {q: f"/m/{q[1:]}" for q in COUNTRIES + PEOPLE}
    triples = [(mid[p], "/people/person/nationality", mid[_citizenship(p) if p != CONTRADICTED else COUNTRIES[5]])
               for p in PEOPLE]
    triples += [(mid[p], "/film/film/country", mid[_citizenship(p)]) for p in PEOPLE[:5]]
    triples += [("/m/unmatched", "/people/person/nationality", mid[COUNTRIES[0]])]
    entities = [EntityRecord(m, f"Free {q}", same_as=q) for q, m in mid.items()] + [EntityRecord("/m/unmatched", "Nobody")]
    relations = [RelationRecord("/people/person/nationality", "nationality", ""), RelationRecord("/film/film/country", "film country", "")]
    source = KGSource("free", "free", "", triples=lambda: iter(triples), entities=entities, relations=relations)
    return load_source(source, embed=False).kg


@pytest.fixture
def kgs(db):
    return wiki_kg(), free_kg()


def _rows(kg, head, relation, tail):
    return (kg.entities.get(external_id=head).pk, kg.relations.get(external_id=relation).pk, kg.entities.get(external_id=tail).pk)


def test_an_entity_is_matched_by_its_wikidata_id_or_the_one_it_is_the_same_as():
    assert wikidata_key("Q42", "") == "Q42"
    assert wikidata_key("/m/02mjmr", "Q76") == "Q76"
    assert wikidata_key("/m/02mjmr", "") == "" and wikidata_key("http://example.org/x", "") == ""


def test_the_freebase_reader_keeps_each_entitys_wikidata_id(tmp_path):
    (tmp_path / "train.txt").write_text("/m/a\t/r\t/m/b\r\n")
    (tmp_path / "entity2text.txt").write_text("/m/a\tA\n/m/b\tB\n")
    (tmp_path / "relation2text.txt").write_text("/r\tr\n")
    (tmp_path / "entity2wikidata.json").write_text(json.dumps({"/m/a": {"wikidata_id": "Q76", "label": "A"},
                                                               "/m/b": {"wikidata_id": "not an id", "label": "B"}}))
    same_as = {e.external_id: e.same_as for e in read_fb15k(tmp_path).entities}
    assert same_as == {"/m/a": "Q76", "/m/b": ""}


def test_relations_align_from_the_data_and_the_reference_states_contradicts_or_does_not_know(kgs):
    wiki, free = kgs
    assert Entity.objects.get(kg=free, external_id="/m/101").same_as == "Q101"  # the loader stores it
    index = ReferenceIndex(wiki, free)
    assert len(index.matched) == len(COUNTRIES) + len(PEOPLE)
    citizenship, condition = (wiki.relations.get(external_id=r).pk for r in ("P27", "P1050"))
    nationality = free.relations.get(external_id="/people/person/nationality").pk
    assert index.aligned[citizenship] == [(nationality, False)]  # the film link joins 5 of 90 pairs: not aligned
    assert index.aligned[condition] == []

    stated = index.finding(*_rows(wiki, PEOPLE[1], "P27", _citizenship(PEOPLE[1])))
    assert stated.covered and stated.stated == ["nationality"]
    assert "states it: Person Q101 · nationality · Country" in stated.text("Person Q101", "country of citizenship", "Country")

    contradicted = index.finding(*_rows(wiki, CONTRADICTED, "P27", _citizenship(CONTRADICTED)))
    assert not contradicted.stated and contradicted.head_values == [f"nationality: Free {COUNTRIES[5]}"]
    assert "does not state it: it gives" in contradicted.text("h", "country of citizenship", "t")

    evidence = References(wiki, [free.pk]).evidence(*_rows(wiki, PEOPLE[1], "P27", _citizenship(PEOPLE[1])))
    assert dict(zip(FEATURES, evidence.features(), strict=True)) == {
        "reference_covered": 1.0, "reference_states": 1.0, "reference_head_valued": 1.0, "reference_tail_valued": 1.0,
        "reference_linked": 1.0, "reference_links": 2.0}  # nationality and the film link
    assert References(wiki, []).evidence(*_rows(wiki, PEOPLE[1], "P27", COUNTRIES[0])).features() == [0.0] * len(FEATURES)


def test_the_references_command_refuses_what_cannot_be_a_reference(kgs):
    wiki, _ = kgs
    with pytest.raises(CommandError, match="its own reference"):
        call_command("references", "wiki", "--add", "wiki")
    with pytest.raises(CommandError, match="'atlas' is not loaded"):
        call_command("references", "wiki", "--add", "atlas")


@pytest.mark.slow
def test_a_reference_added_is_weighed_from_the_next_calibration_and_shown_by_kg_plausibility(kgs, capsys):
    wiki, free = kgs
    model = train(wiki, config=TINY, folds=2)
    assert model.calibration["references"] == []
    call_command("references", "wiki", "--add", "free")
    out = capsys.readouterr().out
    assert f"free: matches {len(COUNTRIES) + len(PEOPLE)} of {len(COUNTRIES) + len(PEOPLE)} entities" in out
    assert "Recalibrated: calibrated on" in out
    model = StructuralModel.objects.get(pk=model.pk)
    assert model.calibration["references"] == [free.pk]
    loaded = scoring.loaded(StructuralModel.objects.ready_for(wiki))
    assert loaded.reference_ids == [free.pk] and list(loaded.calibration.full.features) == scoring.FEATURES

    # The reference removed from the KG: the calibration still weighs the one it was fitted with until refitted.
    call_command("references", "wiki", "--remove", "free", "--no-recalibrate")
    assert "train_kge wiki --recalibrate" in capsys.readouterr().out
    assert scoring.LoadedModel(StructuralModel.objects.get(pk=model.pk)).reference_ids == [free.pk]

    person = PEOPLE[1]
    other = next(c for c in COUNTRIES if c != _citizenship(person))  # not a KG triple: scored, not refused as learnt
    report = StructuralEvidence(wiki).plausibility(person, "P27", other)
    assert [f.reference for f in report.reference.findings] == ["free"]
    parts = [Resolved(e, label) for e, label in [(person, "Person Q101"), ("P27", "country of citizenship"), (other, "Other")]]
    text = observation(report, *parts, "wiki").text
    assert f"The reference KG free does not state it: it gives Person Q101 nationality: Free {_citizenship(person)} instead" in text


@pytest.mark.slow
def test_loading_codex_s_loads_its_reference_kg_beside_it(codex_subset, tmp_path, settings, db):
    data = tmp_path / "data"
    data.mkdir()
    (data / "codex-s").symlink_to(codex_subset)
    heads_and_tails = [line.split("\t") for line in (codex_subset / "triples" / "train.txt").read_text().splitlines()[:2]]
    fb = data / "fb15k-237"
    fb.mkdir()
    (fb / "train.txt").write_text("".join(f"/m/{h}\t/people/person/nationality\t/m/{t}\r\n" for h, _, t in heads_and_tails))
    ids = sorted({e for h, _, t in heads_and_tails for e in (h, t)})
    (fb / "entity2text.txt").write_text("".join(f"/m/{q}\tFree {q}\n" for q in ids))
    (fb / "relation2text.txt").write_text("/people/person/nationality\tnationality\n")
    (fb / "entity2wikidata.json").write_text(json.dumps({f"/m/{q}": {"wikidata_id": q, "label": q} for q in ids}))
    settings.KGV_DATA_DIR = data
    out = io.StringIO()
    call_command("load_kg", "codex-s", "--no-kge", "--no-embed", "--no-progress", stdout=out)
    codex = KnowledgeGraph.objects.get(name="codex-s")
    assert list(codex.references.values_list("name", flat=True)) == ["fb15k-237"]
    assert "fb15k-237 is the reference KG of codex-s" in out.getvalue()
    assert len(ReferenceIndex(codex, codex.references.get()).matched) == len(ids)
    status = {s.kg: s.text for s in structural_statuses()}["fb15k-237"]  # the workbench's strip
    assert status == "none needed: fb15k-237 is the reference KG of codex-s"
    version = KnowledgeGraph.objects.get(name="fb15k-237").version
    call_command("load_kg", "codex-s", "--no-kge", "--no-embed", "--no-progress", stdout=io.StringIO())
    assert KnowledgeGraph.objects.get(name="fb15k-237").version == version  # loaded once
    call_command("load_kg", str(codex_subset), "--name", "plain", "--no-kge", "--no-embed", "--no-progress", stdout=io.StringIO())
    assert not KnowledgeGraph.objects.get(name="plain").references.exists()  # a folder, not the named dataset
