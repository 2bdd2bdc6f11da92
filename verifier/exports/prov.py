"""PROV-O provenance of verdicts (W3C PROV ontology, via rdflib), as Turtle or JSON-LD.

For each run:

- the run is a ``prov:Activity`` that ``prov:used`` the claim (the flagged triple) and the memory entries
  that guided it, and ``prov:wasAssociatedWith`` the model (a ``prov:SoftwareAgent``, which
  ``prov:actedOnBehalfOf`` the curator who started the run);
- the agent's verdict is a ``prov:Entity`` that ``prov:wasGeneratedBy`` the run, ``prov:wasAttributedTo`` the
  model and ``prov:wasDerivedFrom`` every piece of evidence it cites; it carries its confidence
  (``kgv:confidence``, the calibrated probability that it is right), whether the structural evidence disputes
  it (``kgv:disputed``, ``kgv:disputedReason``), the combined probability that the triple is true
  (``kgv:pTrue``) and the structural model's (``kgv:structuralProbability``);
- the structural model that scored the triple is a ``prov:Entity`` (``kgv:StructuralModel``) the run
  ``prov:used``;
- each evidence item is a ``prov:Entity`` with its text (``prov:value``), kind, SHA-256 content hash and its
  source (``prov:hadPrimarySource`` when it is a URL);
- each review is a ``prov:Activity`` that ``prov:used`` the verdict and ``prov:wasAssociatedWith`` the reviewer
  (a ``prov:Person``); a decision generates the reviewed verdict, derived from (for an override: a revision
  of) the agent's verdict and attributed to the reviewer.

Resource IRIs hang off ``base`` (the API root when exported over HTTP, so a run's IRI is its API URL).
"""

from __future__ import annotations

from urllib.parse import quote

from rdflib import RDF, RDFS, XSD, Graph, Literal, Namespace, URIRef
from rdflib.namespace import DCTERMS, PROV

from verifier.exports.records import EvidenceRecord, ReviewRecord, RunRecord, Selection

VOCAB = Namespace("urn:kgv:vocab#")
DEFAULT_BASE = "urn:kgv:"
JSONLD_CONTEXT = {"prov": str(PROV), "kgv": str(VOCAB), "rdfs": str(RDFS), "dcterms": str(DCTERMS), "xsd": str(XSD)}


class ProvGraph:
    """Builds the PROV-O graph of a selection of runs."""

    def __init__(self, base: str = DEFAULT_BASE):
        self.base = base
        self.graph = Graph()
        for prefix, namespace in JSONLD_CONTEXT.items():
            self.graph.bind(prefix, namespace)

    def iri(self, *parts: object) -> URIRef:
        return URIRef(self.base + "/".join(quote(str(part), safe="") for part in parts))

    def add(self, subject, predicate, value) -> None:
        if value is None or value == "":
            return
        self.graph.add((subject, predicate, value if isinstance(value, URIRef) else Literal(value)))

    # -------------------------------------------------------------------------------------------- agents
    def model_agent(self, model: str) -> URIRef:
        agent = self.iri("agents", "models", model or "unknown")
        self.graph.add((agent, RDF.type, PROV.SoftwareAgent))
        self.add(agent, RDFS.label, f"LLM {model or 'unknown model'} in the KGV verification agent")
        return agent

    def person(self, username: str) -> URIRef:
        person = self.iri("users", username)
        self.graph.add((person, RDF.type, PROV.Person))
        self.add(person, RDFS.label, username)
        return person

    # ---------------------------------------------------------------------------------------------- runs
    def add_run(self, record: RunRecord) -> URIRef:
        run, verdict, claim = self.iri("runs", record.run_id), self.verdict_iri(record), self.iri("tasks", record.task_id)
        self.graph.add((run, RDF.type, PROV.Activity))
        self.graph.add((run, RDF.type, VOCAB.Verification))
        self.add(run, RDFS.label, f"verification run {record.run_id}")
        self.add(run, PROV.startedAtTime, record.started_at)
        self.add(run, PROV.endedAtTime, record.finished_at)
        self.add(run, VOCAB.status, record.status)
        self.add_claim(claim, record)
        self.graph.add((run, PROV.used, claim))
        model = self.model_agent(record.model)
        self.graph.add((run, PROV.wasAssociatedWith, model))
        if record.created_by:
            self.graph.add((model, PROV.actedOnBehalfOf, self.person(record.created_by)))
        for memory in record.memories:
            entry = self.iri("memory", memory.entry_id)
            self.graph.add((entry, RDF.type, PROV.Entity))
            self.add(entry, RDFS.label, memory.triple_text)
            self.graph.add((run, PROV.used, entry))

        self.graph.add((verdict, RDF.type, PROV.Entity))
        self.graph.add((verdict, RDF.type, VOCAB.Verdict))
        self.add(verdict, VOCAB.verdict, record.verdict)
        self.add(verdict, RDFS.comment, record.explanation)
        self.add_assessment(verdict, record)
        if record.structural_model_id is not None:
            self.graph.add((run, PROV.used, self.structural_model(record)))
        self.graph.add((verdict, VOCAB.about, claim))
        self.graph.add((verdict, PROV.wasGeneratedBy, run))
        self.graph.add((verdict, PROV.wasAttributedTo, model))
        for item in record.evidence:
            evidence = self.add_evidence(record, item, run)
            if item.cited:
                self.graph.add((verdict, PROV.wasDerivedFrom, evidence))
        for review in record.reviews:
            self.add_review(record, review, verdict)
        return run

    def add_assessment(self, verdict: URIRef, record: RunRecord) -> None:
        """How sure the verdict is, and whether the structural evidence disputes it."""
        for predicate, number in ((VOCAB.confidence, record.confidence), (VOCAB.pTrue, record.p_true),
                                  (VOCAB.structuralProbability, record.structural_probability)):
            if number is not None:
                self.add(verdict, predicate, Literal(number, datatype=XSD.double))
        self.add(verdict, VOCAB.disputed, Literal(record.disputed))
        self.add(verdict, VOCAB.disputedReason, record.disputed_reason)

    def structural_model(self, record: RunRecord) -> URIRef:
        node = self.iri("structural-models", record.structural_model_id)
        self.graph.add((node, RDF.type, PROV.Entity))
        self.graph.add((node, RDF.type, VOCAB.StructuralModel))
        self.add(node, RDFS.label, record.structural_model)
        return node

    def verdict_iri(self, record: RunRecord) -> URIRef:
        return self.iri("runs", record.run_id, "verdict")

    def add_claim(self, claim: URIRef, record: RunRecord) -> None:
        self.graph.add((claim, RDF.type, PROV.Entity))
        self.graph.add((claim, RDF.type, VOCAB.Claim))
        self.add(claim, RDFS.label, f"({record.head.label}, {record.relation.label}, {record.tail.label})")
        for predicate, term in ((VOCAB.head, record.head), (VOCAB.relation, record.relation), (VOCAB.tail, record.tail)):
            node = self.iri("kg", record.kg, "terms", term.id)
            self.graph.add((claim, predicate, node))
            self.add(node, RDFS.label, term.label)
            self.add(node, DCTERMS.identifier, term.id)

    def add_evidence(self, record: RunRecord, item: EvidenceRecord, run: URIRef) -> URIRef:
        evidence = self.iri("runs", record.run_id, "evidence", item.key)
        self.graph.add((evidence, RDF.type, PROV.Entity))
        self.graph.add((evidence, RDF.type, VOCAB.Evidence))
        self.add(evidence, RDFS.label, f"[{item.key}] {item.kind}")
        self.add(evidence, PROV.value, item.text)
        self.add(evidence, VOCAB.kind, item.kind)
        self.add(evidence, VOCAB.contentHash, item.content_hash)
        self.add(evidence, VOCAB.cited, Literal(item.cited))
        if item.source.startswith(("http://", "https://")):
            self.graph.add((evidence, PROV.hadPrimarySource, URIRef(item.source)))
        else:
            self.add(evidence, DCTERMS.source, item.source)
        self.graph.add((evidence, PROV.wasGeneratedBy, run))  # found by a tool call during the run
        return evidence

    def add_review(self, record: RunRecord, review: ReviewRecord, verdict: URIRef) -> None:
        activity = self.iri("runs", record.run_id, "reviews", review.id)
        reviewer = self.person(review.reviewer)
        self.graph.add((activity, RDF.type, PROV.Activity))
        self.graph.add((activity, RDF.type, VOCAB.Review))
        self.add(activity, VOCAB.decision, review.decision)
        self.add(activity, RDFS.comment, review.reason)
        self.add(activity, PROV.endedAtTime, review.created_at)
        self.graph.add((activity, PROV.used, verdict))
        self.graph.add((activity, PROV.wasAssociatedWith, reviewer))
        if not review.verdict:  # a comment: no new verdict
            return
        reviewed = self.iri("runs", record.run_id, "reviews", review.id, "verdict")
        self.graph.add((reviewed, RDF.type, PROV.Entity))
        self.graph.add((reviewed, RDF.type, VOCAB.Verdict))
        self.add(reviewed, VOCAB.verdict, review.verdict)
        self.graph.add((reviewed, PROV.wasGeneratedBy, activity))
        self.graph.add((reviewed, PROV.wasAttributedTo, reviewer))
        relation = PROV.wasRevisionOf if review.verdict != record.verdict else PROV.wasDerivedFrom
        self.graph.add((reviewed, relation, verdict))


def build_graph(selection: Selection, base: str = DEFAULT_BASE) -> Graph:
    prov = ProvGraph(base)
    for record in selection.records:
        prov.add_run(record)
    return prov.graph


def to_turtle(selection: Selection, base: str = DEFAULT_BASE) -> str:
    return build_graph(selection, base).serialize(format="turtle")


def to_jsonld(selection: Selection, base: str = DEFAULT_BASE) -> str:
    return build_graph(selection, base).serialize(format="json-ld", context=JSONLD_CONTEXT, indent=2)
