"""Finished, reviewed runs as real database rows (what the runner and the review service leave behind),
for tests of the API and the exports."""

from __future__ import annotations

import hashlib
from functools import cache

import pytest
from django.urls import reverse
from django.utils import timezone
from rdflib import Graph, URIRef
from rdflib.namespace import DCTERMS, PROV, RDF, RDFS, XSD

from tests.world import ENTITIES, RELATIONS, TRIPLES
from verifier.exports.prov import VOCAB
from verifier.kg.loader import load_source
from verifier.kg.sources import KGSource
from verifier.memory import encoder
from verifier.models import MemoryEntry, Review, Run, RunMemory, Step, SupportItem, VerificationTask

EVIDENCE = [
    # key, kind, text, source, cited
    ("E1", "passage", "Douglas Noel Adams was an English author. Adams was born in Cambridge.",
     "https://en.wikipedia.org/wiki/Douglas_Adams", True),
    ("E2", "path", "(Douglas Adams) -[place of birth]-> (Cambridge) -[country]-> (United Kingdom)", "kg:world", True),
    ("E3", "triple", "(Douglas Adams) -[educated at]-> (St John's College)", "kg:world", False),
]


def content_hash(kind: str, text: str, source: str) -> str:
    return hashlib.sha256(f"{kind}\n{text}\n{source}".encode()).hexdigest()


def make_task(kg, head="Q42", relation="P27", tail="Q145", **fields) -> VerificationTask:
    return VerificationTask.objects.create(kg=kg, head=kg.entities.get(external_id=head), relation=kg.relations.get(external_id=relation),
                                           tail=kg.entities.get(external_id=tail), **fields)


def make_finished_run(task, *, verdict="correct", confidence=0.9, model="scripted-model", created_by=None) -> Run:
    """A succeeded run with plan → thought → action → observation → verdict and three support items (two cited)."""
    now = timezone.now()
    run = Run.objects.create(task=task, status=Run.Status.SUCCEEDED, verdict=verdict, confidence=confidence, model=model,
                             explanation="Born in Cambridge, United Kingdom [E1] [E2].", prompt_tokens=1200,
                             completion_tokens=80, created_by=created_by, started_at=now, finished_at=now,
                             config={"t_max": 10, "memory_k": 3})
    contents = [
        ("plan", "=== Initial Impression ===\n[Correct]\n=== Strategic Plan ===\n[Step 1] KG_Path(Douglas Adams, United Kingdom)", ""),
        ("thought", "Check where he was born.", ""),
        ("action", "KG_Path(Douglas Adams, United Kingdom)", "KG_Path"),
        ("observation", "Paths between Douglas Adams and United Kingdom:\n[E2] (Douglas Adams) -[place of birth]-> (Cambridge)", ""),
        ("verdict", f"[{verdict.title()}] Because he was born in Cambridge [E1] [E2].", ""),
    ]
    steps = [Step.objects.create(run=run, seq=seq, kind=kind, content=content, tool=tool)
             for seq, (kind, content, tool) in enumerate(contents, start=1)]
    for key, kind, text, source, cited in EVIDENCE:
        SupportItem.objects.create(run=run, step=steps[3], key=key, kind=kind, text=text, source=source,
                                   content_hash=content_hash(kind, text, source), cited=cited)
    task.status = VerificationTask.Status.VERIFIED
    task.save(update_fields=["status"])
    return run


def add_review(run, reviewer, decision="accept", verdict=None, reason="") -> Review:
    final = verdict if verdict is not None else (run.verdict if decision == "accept" else "")
    return Review.objects.create(run=run, reviewer=reviewer, decision=decision, verdict=final, reason=reason)


@cache
def embedding_of(text: str):
    """The real all-MiniLM-L6-v2 embedding, computed once per test session for each text."""
    return encoder.encode_one(text)


def add_memory(run=None, text="Douglas Adams place of birth Cambridge", verdict="correct"):
    entry = MemoryEntry.objects.create(triple_text=text, trajectory="Thought: check the birthplace.\nFinal Answer: [Correct]",
                                       verdict=verdict, relation_label="place of birth", embedding=embedding_of(text),
                                       provenance="test")
    if run is not None:
        RunMemory.objects.create(run=run, entry=entry, similarity=0.83, rank=1)
    return entry


def load_light_kg():
    """The world KG of tests/world.py without passages or embeddings: what the API and exports need, quickly."""
    source = KGSource("world", "World", "", triples=lambda: iter(TRIPLES), entities=ENTITIES, relations=RELATIONS)
    return load_source(source, embed=False).kg


@pytest.fixture
def light_kg(db):
    return load_light_kg()


@pytest.fixture
def verified(light_kg, make_user):
    """A task with a finished run (two cited evidence items), accepted by a reviewer, guided by one memory."""
    curator, reviewer = make_user("curator", "carla"), make_user("reviewer", "rene")
    task = make_task(light_kg, expected_label=True)
    run = make_finished_run(task, created_by=curator)
    review = add_review(run, reviewer, reason="Matches the Wikipedia article.")
    memory = add_memory(run)
    return {"kg": light_kg, "task": task, "run": run, "review": review, "memory": memory, "curator": curator,
            "reviewer": reviewer}


def use_fast_password_hashing(settings) -> None:
    """Users are made per test here; the production hasher's deliberate slowness only costs test time."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


API_BASE = "http://testserver/api/"  # what the Django test client's requests build as the API root
VOCABULARIES = tuple(str(namespace) for namespace in (RDF, RDFS, XSD, PROV, DCTERMS, VOCAB))


def _describes(document: dict, fragment: str) -> bool:
    """Whether an API document describes the thing its hash IRI ``#fragment`` names (prov.py's module docstring)."""
    kind, _, rest = fragment.partition("-")
    if kind == "evidence":
        return rest in {item["key"] for item in document["support_items"]}
    if kind == "review":
        return int(rest.removesuffix("-verdict")) in {review["id"] for review in document["reviews"]}
    if kind == "part":
        seqs = [part["part"] for part in document["parts"]]
        if rest.startswith("unresolved-"):
            return seqs[int(rest.removeprefix("unresolved-")) - 1] is None
        return int(rest) in seqs
    if kind == "subgraph":
        return bool(document["written"])
    return kind in ("verdict", "decomposition", "verification") and bool(document["verdict"])


def assert_prov_iris_resolve(client, query: str) -> Graph:
    """Export ``query`` (``?runs=1,2``) as PROV-O over the API, then GET every IRI under the API root with the same
    client: each answers 200, and a hash IRI names something its document describes. Every other IRI is a
    vocabulary term, an evidence item's primary source, a KG term's own IRI (Wikidata's) or a ``urn:kgv:`` name, never a
    URL that answers 404."""
    response = client.get(reverse("api:export", kwargs={"fmt": "ttl"}) + query, HTTP_ACCEPT="text/turtle, */*")
    assert response.status_code == 200, response.content[:300]
    graph = Graph().parse(data=response.content.decode(), format="turtle")
    iris = {str(node) for node in graph.all_nodes() if isinstance(node, URIRef)}
    documents: dict[str, dict] = {}
    for iri in sorted(i for i in iris if i.startswith(API_BASE)):
        url, _, fragment = iri.partition("#")
        if url not in documents:
            answer = client.get(url, HTTP_ACCEPT="application/json")
            assert answer.status_code == 200, f"{iri} answers {answer.status_code}"
            documents[url] = answer.json()
        assert not fragment or _describes(documents[url], fragment), f"{url} does not describe #{fragment}"
    sources = {str(source) for source in graph.objects(None, PROV.hadPrimarySource)}
    terms = {str(term) for role in (VOCAB.head, VOCAB.relation, VOCAB.tail) for term in graph.objects(None, role)}
    assert all(term.startswith(("urn:kgv:kg:", "http://www.wikidata.org/")) for term in terms), terms
    others = {i for i in iris - sources - terms if not i.startswith((API_BASE, "urn:kgv:", *VOCABULARIES))}
    assert not others, f"IRIs that neither resolve nor say they are names: {sorted(others)}"
    return graph
