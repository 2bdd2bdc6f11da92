"""A small, hand-checkable KG in the local store, with passages (fixtures used across the test tree)."""

import pytest

from verifier.agent.steps import Claim
from verifier.evidence.corpus import PostgresCorpus
from verifier.kg.loader import load_source
from verifier.kg.sources import EntityRecord, KGSource, PassageRecord, RelationRecord, TypeRecord
from verifier.kg.store import PostgresKG
from verifier.models import KnowledgeGraph
from verifier.tools.base import ToolContext

ENTITIES = [
    EntityRecord("Q42", "Douglas Adams", "English writer and humorist", ["Douglas Noel Adams"], ["Q5"]),
    EntityRecord("Q145", "United Kingdom", "country in north-western Europe", ["UK", "Britain"], ["Q6256"]),
    EntityRecord("Q350", "Cambridge", "city in Cambridgeshire, England", [], ["Q515"]),
    EntityRecord("Q691283", "St John's College", "constituent college of the University of Cambridge", [], ["Q2385804"]),
    EntityRecord("Q90", "Paris", "capital of France", [], ["Q515"]),
    EntityRecord("Q830149", "Paris", "city in Texas, United States", [], ["Q515"]),
    EntityRecord("Q142", "France", "country in western Europe", [], ["Q6256"]),
    EntityRecord("Q25", "Wales", "country of the United Kingdom", [], []),
    EntityRecord("Q3107329", "The Hitchhiker's Guide to the Galaxy", "comedy science fiction franchise", [], []),
]
RELATIONS = [
    RelationRecord("P27", "country of citizenship", "the object is a country that recognizes the subject as its citizen"),
    RelationRecord("P19", "place of birth", "most specific known birth location of a person"),
    RelationRecord("P69", "educated at", "educational institution attended by subject"),
    RelationRecord("P17", "country", "sovereign state that this item is in"),
    RelationRecord("P131", "located in the administrative territorial entity", ""),
    RelationRecord("P800", "notable work", "notable scientific, artistic or literary work"),
    RelationRecord("P47", "shares border with", ""),
]
TRIPLES = [
    ("Q42", "P27", "Q145"),  # the query triple in most tests
    ("Q42", "P19", "Q350"),
    ("Q42", "P69", "Q691283"),
    ("Q42", "P800", "Q3107329"),
    ("Q350", "P17", "Q145"),
    ("Q691283", "P131", "Q350"),
    ("Q90", "P17", "Q142"),
    ("Q145", "P47", "Q142"),
    ("Q25", "P131", "Q145"),
]
PASSAGES = [
    PassageRecord("Q42", "Douglas Noel Adams was an English author, humourist, and screenwriter, best known for "
                  "The Hitchhiker's Guide to the Galaxy. Adams was born in Cambridge. He was educated at St John's "
                  "College, Cambridge. He lived in London and later moved to Santa Barbara.", url="https://en.wikipedia.org/wiki/Douglas_Adams"),
    PassageRecord("Q350", "Cambridge is a university city in England, United Kingdom. It lies on the River Cam.",
                  url="https://en.wikipedia.org/wiki/Cambridge"),
    PassageRecord("Q90", "Paris is the capital and largest city of France. It is known for the Eiffel Tower."),
]


@pytest.fixture
def world_kg(db):
    source = KGSource("world", "World", "", triples=lambda: iter(TRIPLES), entities=ENTITIES, relations=RELATIONS,
                      passages=PASSAGES, types=[TypeRecord("Q5", "human"), TypeRecord("Q6256", "country"), TypeRecord("Q515", "city")])
    return load_source(source).kg


@pytest.fixture
def world(world_kg):
    """A tool context on the world KG, verifying (Douglas Adams, country of citizenship, United Kingdom)."""
    query = Claim("Q42", "P27", "Q145", "Douglas Adams", "country of citizenship", "United Kingdom")
    return ToolContext(kg=PostgresKG(world_kg), corpus=PostgresCorpus(world_kg), query=query)


CLAIM_ENTITIES = [
    *ENTITIES,
    EntityRecord("Q2599", "Paul McCartney", "English musician", ["James Paul McCartney"], ["Q5"]),
    EntityRecord("Q177220", "singer", "person who sings", [], ["Q28640"]),
    EntityRecord("Q6625963", "novelist", "writer of novels", [], ["Q28640"]),
    EntityRecord("Q463303", "American Academy of Arts and Sciences", "learned society", [], ["Q955824"]),
    EntityRecord("Q16", "Canada", "country in North America", [], ["Q6256"]),
    EntityRecord("Q24826", "Liverpool", "city in Merseyside, England", [], ["Q515"]),
    EntityRecord("Q1299", "The Beatles", "English rock band", ["Beatles"], ["Q215380"]),
]
CLAIM_RELATIONS = [
    *RELATIONS,
    RelationRecord("P106", "occupation", "occupation of a person"),
    RelationRecord("P463", "member of", "organization, musical group, or club to which the subject belongs"),
    RelationRecord("P54", "member of sports team", "sports teams or clubs that the subject represents"),
    RelationRecord("P102", "member of political party", "the political party of which this politician is a member"),
    RelationRecord("P495", "country of origin", "country of origin of this item (creative work, food, product)"),
]
CLAIM_TRIPLES = [
    *TRIPLES,
    ("Q2599", "P106", "Q177220"),
    ("Q42", "P106", "Q6625963"),
    ("Q2599", "P19", "Q24826"),
    ("Q2599", "P27", "Q145"),
    ("Q2599", "P463", "Q1299"),
    ("Q24826", "P17", "Q145"),
    ("Q3107329", "P495", "Q145"),
]
CLAIM_TYPES = [TypeRecord("Q5", "human"), TypeRecord("Q6256", "country"), TypeRecord("Q515", "city"),
               TypeRecord("Q28640", "profession"), TypeRecord("Q955824", "learned society"), TypeRecord("Q215380", "band")]


@pytest.fixture
def claims_kg(db):
    """The world KG with what claims about people and their occupations need: Paul McCartney, singer, occupation,
    and the relations and entities a small model reached for when it invented triples (country of origin, member of
    sports team, member of political party, the American Academy of Arts and Sciences, Canada)."""
    source = KGSource("claims-world", "Claims world", "", triples=lambda: iter(CLAIM_TRIPLES), entities=CLAIM_ENTITIES,
                      relations=CLAIM_RELATIONS, passages=PASSAGES, types=CLAIM_TYPES)
    return load_source(source).kg


CODEX_POSITIVES = "Q830149\tP17\tQ145\nQ350\tP131\tQ145\n"
CODEX_NEGATIVES = "Q90\tP17\tQ145\nQ25\tP131\tQ350\n"


@pytest.fixture
def codex_like(world_kg, settings, tmp_path):
    """The world KG under the name of a dataset whose validation files are in the data folder."""
    KnowledgeGraph.objects.filter(pk=world_kg.pk).update(name="codex-s")
    triples = tmp_path / "codex-s" / "triples"
    triples.mkdir(parents=True)
    (triples / "valid.txt").write_text(CODEX_POSITIVES)
    (triples / "valid_negatives.txt").write_text(CODEX_NEGATIVES)
    settings.KGV_DATA_DIR = tmp_path
    return world_kg


@pytest.fixture
def shipped_weighing(db):
    """The shipped confidence model for every KG in force, as ``make demo`` leaves it: what the evidence and
    reading modes need before a run of them is accepted."""
    from verifier import confidence

    return confidence.seed_shipped_models()


@pytest.fixture
def weighed_by_every_kg(monkeypatch):
    """A generated KG whose structural model is trained and calibrated, weighed by the shipped confidence model for
    every KG (fitted on CoDEx-S): its own weighing by the structural calibration, which the training put in force,
    stood down as a curator can. (kg, structural model, the model for every KG). Transactional tests only (the worker
    that verifies its calibration triples sees committed rows)."""
    from tests.verifier.structure.test_training import TINY, generated_kg
    from verifier import confidence
    from verifier.models import ConfidenceModel
    from verifier.structure import fitting
    from verifier.structure.training import train

    monkeypatch.setattr(fitting, "FACTS_SAMPLED", 40)  # the calibration's facts, each verified by the worker: a few
    kg, _ = generated_kg("towns-weighed")
    model = train(kg, config=TINY, folds=2)
    for own in ConfidenceModel.objects.filter(kg=kg, active=True):
        confidence.stand_down(own)
    [shipped] = confidence.seed_shipped_models()
    return kg, model, shipped
