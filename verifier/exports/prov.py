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
  of) the agent's verdict and attributed to the reviewer;
- a claim in plain language is a ``prov:Entity`` (``kgv:PlainLanguageClaim``, its text as ``prov:value``); the
  model's decomposition is an activity that used it and generated its pseudo-subgraph; each part
  (``kgv:ClaimPart``) names its triple (``kgv:triple``), whether the claim denies it and whether it holds as
  claimed; the claim's verification ``prov:wasInformedBy`` each part's run, and the claim's verdict
  ``prov:wasDerivedFrom`` each part's verdict; reviews of the claim as a whole are modelled as a run's are.

Which IRIs resolve, and how (``base`` is the API root when exported over HTTP, ``urn:kgv:`` otherwise):

- a resource the API serves is named by its API URL: a run ``{base}runs/2/``, a flagged triple ``{base}tasks/5/``,
  a memory entry ``{base}memory/9/``, a claim ``{base}claims/3/``;
- what such a document describes is a hash IRI of it, so it resolves to that document: a run's verdict
  ``{base}runs/2/#verdict``, its evidence items ``#evidence-E1`` (the run's ``support_items`` by ``key``), its
  reviews ``#review-7`` and the verdict a review gave ``#review-7-verdict`` (the run's ``reviews`` by ``id``); a
  claim's ``#subgraph`` (``written``), ``#decomposition``, ``#verification``, ``#verdict``, ``#part-1`` (its
  ``parts`` by ``part``; ``#part-unresolved-N`` for the N-th part no KG entity resolves) and ``#review-5``;
- what the API has no endpoint for is named by an IRI that is not a URL, the same in every export: the model
  ``urn:kgv:agent:model:<name>``, a user ``urn:kgv:user:<username>``, a structural model
  ``urn:kgv:structural-model:<id>``. A KG's entity or relation is the IRI its id stands for (a Wikidata id's Wikidata
  IRI, an IRI as it is), else ``urn:kgv:kg:<kg name>:entity:<id>`` (or ``:relation:``), as in the SPARQL Update of
  the KG changes (``verifier.kg.ntriples.term_iri``).
"""

from __future__ import annotations

from urllib.parse import quote

from rdflib import RDF, RDFS, XSD, Graph, Literal, Namespace, URIRef
from rdflib.namespace import DCTERMS, PROV

from verifier.exports.records import ClaimPartRecord, ClaimRecord, EvidenceRecord, ReviewRecord, RunRecord, Selection
from verifier.kg.ntriples import kgv_urn, term_iri

VOCAB = Namespace("urn:kgv:vocab#")
URN = "urn:kgv:"
DEFAULT_BASE = URN  # exported off HTTP: documents are named under urn:kgv: too
JSONLD_CONTEXT = {"prov": str(PROV), "kgv": str(VOCAB), "rdfs": str(RDFS), "dcterms": str(DCTERMS), "xsd": str(XSD)}


class ProvGraph:
    """Builds the PROV-O graph of a selection of runs."""

    def __init__(self, base: str = DEFAULT_BASE):
        self.base = base
        self.graph = Graph()
        for prefix, namespace in JSONLD_CONTEXT.items():
            self.graph.bind(prefix, namespace)

    def document(self, *parts: object) -> URIRef:
        """The IRI of a resource the API serves: its URL (with the router's trailing slash) under ``base``."""
        return URIRef(self.base + "".join(f"{quote(str(part), safe='')}/" for part in parts))

    @staticmethod
    def described(document: URIRef, *names: object) -> URIRef:
        """What ``document`` describes (a run's verdict, a claim's part): a hash IRI that resolves to the document."""
        return URIRef(f"{document}#" + "-".join(quote(str(name), safe="") for name in names))

    @staticmethod
    def name(*parts: object) -> URIRef:
        """A resource the API has no endpoint for: an IRI that is not a URL, stable across exports."""
        return URIRef(kgv_urn(*parts))

    def add(self, subject, predicate, value) -> None:
        if value is None or value == "":
            return
        self.graph.add((subject, predicate, value if isinstance(value, URIRef) else Literal(value)))

    # -------------------------------------------------------------------------------------------- agents
    def model_agent(self, model: str) -> URIRef:
        agent = self.name("agent", "model", model or "unknown")
        self.graph.add((agent, RDF.type, PROV.SoftwareAgent))
        self.add(agent, RDFS.label, f"LLM {model or 'unknown model'} in the KGV verification agent")
        return agent

    def person(self, username: str) -> URIRef:
        person = self.name("user", username)
        self.graph.add((person, RDF.type, PROV.Person))
        self.add(person, RDFS.label, username)
        return person

    # ---------------------------------------------------------------------------------------------- runs
    def add_run(self, record: RunRecord) -> URIRef:
        run, verdict, claim = self.run_iri(record.run_id), self.verdict_iri(record.run_id), self.document("tasks", record.task_id)
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
            entry = self.document("memory", memory.entry_id)
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
        node = self.name("structural-model", record.structural_model_id)
        self.graph.add((node, RDF.type, PROV.Entity))
        self.graph.add((node, RDF.type, VOCAB.StructuralModel))
        self.add(node, RDFS.label, record.structural_model)
        return node

    def run_iri(self, run_id: int) -> URIRef:
        return self.document("runs", run_id)

    def verdict_iri(self, run_id: int) -> URIRef:
        return self.described(self.run_iri(run_id), "verdict")

    def add_claim(self, claim: URIRef, record: RunRecord) -> None:
        self.graph.add((claim, RDF.type, PROV.Entity))
        self.graph.add((claim, RDF.type, VOCAB.Claim))
        self.add(claim, RDFS.label, f"({record.head.label}, {record.relation.label}, {record.tail.label})")
        for predicate, term in ((VOCAB.head, record.head), (VOCAB.relation, record.relation), (VOCAB.tail, record.tail)):
            node = URIRef(term_iri(record.kg, term.id, relation=predicate == VOCAB.relation))
            self.graph.add((claim, predicate, node))
            self.add(node, RDFS.label, term.label)
            self.add(node, DCTERMS.identifier, term.id)

    def add_evidence(self, record: RunRecord, item: EvidenceRecord, run: URIRef) -> URIRef:
        evidence = self.described(run, "evidence", item.key)
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

    # -------------------------------------------------------------------------------------------- claims
    def add_claim_record(self, claim: ClaimRecord) -> URIRef:
        node = self.document("claims", claim.claim_id)
        subgraph = self.described(node, "subgraph")
        self.graph.add((node, RDF.type, PROV.Entity))
        self.graph.add((node, RDF.type, VOCAB.PlainLanguageClaim))
        self.add(node, PROV.value, claim.text)
        self.add(node, VOCAB.category, claim.category)
        self.add(node, DCTERMS.source, claim.source)
        decomposition = self.described(node, "decomposition")
        self.graph.add((decomposition, RDF.type, PROV.Activity))
        self.graph.add((decomposition, RDF.type, VOCAB.Decomposition))
        self.graph.add((decomposition, PROV.used, node))
        self.graph.add((decomposition, PROV.wasAssociatedWith, self.model_agent(claim.model)))
        self.graph.add((subgraph, RDF.type, PROV.Entity))
        self.graph.add((subgraph, RDF.type, VOCAB.PseudoSubgraph))
        self.add(subgraph, PROV.value, claim.written)
        self.graph.add((subgraph, PROV.wasGeneratedBy, decomposition))
        self.graph.add((subgraph, PROV.wasDerivedFrom, node))

        verification, verdict = self.described(node, "verification"), self.described(node, "verdict")
        self.graph.add((verification, RDF.type, PROV.Activity))
        self.graph.add((verification, RDF.type, VOCAB.ClaimVerification))
        self.graph.add((verification, PROV.used, subgraph))
        self.graph.add((verdict, RDF.type, PROV.Entity))
        self.graph.add((verdict, RDF.type, VOCAB.ClaimVerdict))
        self.graph.add((verdict, VOCAB.about, node))
        self.add(verdict, VOCAB.verdict, claim.verdict_from_parts)
        self.add(verdict, RDFS.comment, claim.justification)
        if claim.confidence is not None and not claim.decided_by:
            self.add(verdict, VOCAB.confidence, Literal(claim.confidence, datatype=XSD.double))
        self.graph.add((verdict, PROV.wasGeneratedBy, verification))
        for position, part in enumerate(claim.parts, start=1):
            name = ("part", part.seq) if part.seq is not None else ("part", "unresolved", position)
            self.add_claim_part(self.described(node, *name), node, part, verification, verdict)
        for review in claim.reviews:
            self.add_review_activity(node, review, verdict, claim.verdict_from_parts)
        return node

    def add_claim_part(self, node: URIRef, claim: URIRef, part: ClaimPartRecord, verification: URIRef,
                       verdict: URIRef) -> None:
        self.graph.add((node, RDF.type, PROV.Entity))
        self.graph.add((node, RDF.type, VOCAB.ClaimPart))
        self.add(node, RDFS.label, part.text)
        self.add(node, VOCAB.negated, Literal(part.negated))
        self.add(node, VOCAB.state, part.state)
        self.graph.add((node, PROV.wasDerivedFrom, self.described(claim, "subgraph")))
        self.graph.add((claim, VOCAB.hasPart, node))
        if part.task_id is not None:
            self.graph.add((node, VOCAB.triple, self.document("tasks", part.task_id)))
        if part.run_id is not None:
            self.graph.add((verification, PROV.wasInformedBy, self.run_iri(part.run_id)))
            self.graph.add((verdict, PROV.wasDerivedFrom, self.verdict_iri(part.run_id)))

    def add_review(self, record: RunRecord, review: ReviewRecord, verdict: URIRef) -> None:
        self.add_review_activity(self.run_iri(record.run_id), review, verdict, record.verdict)

    def add_review_activity(self, document: URIRef, review: ReviewRecord, verdict: URIRef, reviewed_verdict: str) -> None:
        """A reviewer's decision on a verdict (a run's or a claim's, whose ``document`` lists its reviews): an
        activity that used it and, unless it is a comment, generated the reviewed verdict, a revision of the one
        reviewed when it differs."""
        activity, reviewer = self.described(document, "review", review.id), self.person(review.reviewer)
        self.graph.add((activity, RDF.type, PROV.Activity))
        self.graph.add((activity, RDF.type, VOCAB.Review))
        self.add(activity, VOCAB.decision, review.decision)
        self.add(activity, RDFS.comment, review.reason)
        self.add(activity, PROV.endedAtTime, review.created_at)
        self.graph.add((activity, PROV.used, verdict))
        self.graph.add((activity, PROV.wasAssociatedWith, reviewer))
        if not review.verdict:  # a comment: no new verdict
            return
        reviewed = self.described(document, "review", review.id, "verdict")
        self.graph.add((reviewed, RDF.type, PROV.Entity))
        self.graph.add((reviewed, RDF.type, VOCAB.Verdict))
        self.add(reviewed, VOCAB.verdict, review.verdict)
        self.graph.add((reviewed, PROV.wasGeneratedBy, activity))
        self.graph.add((reviewed, PROV.wasAttributedTo, reviewer))
        relation = PROV.wasRevisionOf if review.verdict != reviewed_verdict else PROV.wasDerivedFrom
        self.graph.add((reviewed, relation, verdict))


def build_graph(selection: Selection, base: str = DEFAULT_BASE) -> Graph:
    prov = ProvGraph(base)
    for record in selection.records:
        prov.add_run(record)
    for claim in selection.claims:
        prov.add_claim_record(claim)
    return prov.graph


def to_turtle(selection: Selection, base: str = DEFAULT_BASE) -> str:
    return build_graph(selection, base).serialize(format="turtle")


def to_jsonld(selection: Selection, base: str = DEFAULT_BASE) -> str:
    return build_graph(selection, base).serialize(format="json-ld", context=JSONLD_CONTEXT, indent=2)
