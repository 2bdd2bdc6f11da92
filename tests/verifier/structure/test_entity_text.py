"""What the entities' own text says about a triple: description neighbours vote, mentions are found, and the
triple under test is never its own evidence."""

import pytest

from verifier.kg.loader import load_source
from verifier.kg.sources import EntityRecord, KGSource, PassageRecord, RelationRecord
from verifier.structure import entity_text
from verifier.structure.entity_text import DescriptionIndex, entity_names


def _people_kg():
    """Two countries whose citizens are described with their demonym; one person's passage names a country."""
    entities = [EntityRecord("F", "Freedonia", "a country", ["Republic of Freedonia"], []),
                EntityRecord("S", "Sylvania", "a country", [], [])]
    triples = []
    for i in range(6):
        entities.append(EntityRecord(f"f{i}", f"Person f{i}", f"Freedonian painter and sculptor number {i}", [], []))
        entities.append(EntityRecord(f"s{i}", f"Person s{i}", f"Sylvanian banker and economist number {i}", [], []))
        triples += [(f"f{i}", "citizen", "F"), (f"s{i}", "citizen", "S")]
    entities += [EntityRecord("new", "Newcomer", "Freedonian painter", [], []),
                 EntityRecord("rock", "rock music", "a genre", [], [])]
    passages = [PassageRecord("new", "Newcomer paints landscapes of the Republic of Freedonia and plays rock songs.")]
    source = KGSource("people", "people", "", triples=lambda: iter(triples), entities=entities,
                      relations=[RelationRecord("citizen", "country of citizenship", ""), RelationRecord("genre", "genre", "")],
                      passages=passages)
    return load_source(source, embed=False).kg


def _rows(kg, *external_ids):
    return [kg.entities.get(external_id=e).pk for e in external_ids]


@pytest.fixture
def people(db):
    return _people_kg()


def test_entities_described_like_the_head_vote_for_their_own_value(people):
    index = DescriptionIndex(people.pk)
    citizen = people.relations.get(external_id="citizen").pk
    new, freedonia, sylvania = _rows(people, "new", "F", "S")
    for_freedonia = index.described(new, citizen, freedonia)
    for_sylvania = index.described(new, citizen, sylvania)
    assert for_freedonia.tail_vote.share > 0.9 > 0.1 > for_sylvania.tail_vote.share
    assert set(for_freedonia.tail_vote.holding) == set(_rows(people, *[f"f{i}" for i in range(6)]))
    assert for_freedonia.features()[0] > for_sylvania.features()[0]


def test_the_head_is_never_its_own_neighbour_so_the_triple_under_test_never_votes(people):
    index = DescriptionIndex(people.pk)
    citizen = people.relations.get(external_id="citizen").pk
    f0, freedonia = _rows(people, "f0", "F")
    vote = index.described(f0, citizen, freedonia).tail_vote
    assert f0 not in [row for row, _, _ in vote.neighbours]
    assert len(vote.neighbours) == entity_text.NEIGHBOURS  # 11 other citizens, the 10 most alike vote


def test_mentions_by_label_or_alias_and_the_tail_label_words(people):
    index = DescriptionIndex(people.pk)
    citizen, genre = people.relations.get(external_id="citizen").pk, people.relations.get(external_id="genre").pk
    new, freedonia, sylvania, rock = _rows(people, "new", "F", "S", "rock")
    assert index.described(new, citizen, freedonia).tail_named  # "Republic of Freedonia" is an alias
    assert not index.described(new, citizen, sylvania).tail_named
    assert index.described(new, genre, rock).tail_words == 1.0  # "rock" (of "rock music") is in the passage
    assert entity_names("Paris, Texas", ["P."]) == ["Paris, Texas", "Paris"]


def test_a_kg_without_text_gives_empty_votes(db):
    source = KGSource("bare", "bare", "", triples=lambda: iter([("a", "r", "b"), ("c", "r", "b")]),
                      entities=[EntityRecord(e, "", "", [], []) for e in "abc"], relations=[RelationRecord("r", "r", "")])
    kg = load_source(source, embed=False).kg
    a, b = _rows(kg, "a", "b")
    text = DescriptionIndex(kg.pk).described(a, kg.relations.get().pk, b)
    assert text.tail_vote.share == 0.0 and not text.tail_vote.neighbours and not text.tail_named
