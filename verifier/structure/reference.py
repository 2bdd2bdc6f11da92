"""What a reference KG says about a triple: another loaded KG, its entities matched by Wikidata id.

A fact-checker holds a claim against a second source. A KG's references (``KnowledgeGraph.references``) are
such sources: other KGs loaded in KGV — FB15k-237 (Freebase) beside CoDEx-S (Wikidata) — whose entities are
matched with the KG's by Wikidata id (the id itself where it is one, ``Entity.same_as`` where it is a Freebase
mid). What the reference holds between the matched entities becomes evidence and features of the
plausibility calibration (verifier/structure/scoring.py), which weighs it as the labelled triples say.

**Relations are aligned from the data**, not by name: a relation of the KG reads in the reference as the
reference relations, in either direction, that link at least ALIGNED_SHARE of its matched (head, tail) pairs
among the KG's triples, at most ALIGNED_MAX of them (CoDEx-S's *country of citizenship* → Freebase's
*nationality*): one triple among hundreds moves an alignment by nothing, so a fact the KG
states is read through an alignment it took part in, as the rules read it.

The FEATURES, per triple (0 where no reference matches both entities):

- ``reference_covered``: a reference knows both entities;
- ``reference_states``: an aligned relation links them — the reference states the claim;
- ``reference_head_valued``: the reference gives the head a value of an aligned relation (with the claim
  unstated, another value: a reference that records one citizenship and not the claimed one);
- ``reference_tail_valued``: the tail is the value of an aligned relation for some entity of the reference;
- ``reference_linked`` and ``reference_links``: whether any reference relation links the two, and how many.

A calibration weighs the references it was fitted with; after a change, ``manage.py references`` refits it.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field

import numpy as np

from verifier.kg.sparql import ITEM_ID
from verifier.models import Entity, KnowledgeGraph, Relation
from verifier.structure.dataset import kg_triples

FEATURES = ["reference_covered", "reference_states", "reference_head_valued", "reference_tail_valued",
            "reference_linked", "reference_links"]
ALIGNED_SHARE = 0.2
ALIGNED_MAX = 3
SHOWN_VALUES = 3

# A reference relation read in one direction: (relation row id, True where the reference triple runs tail → head).
Reading = tuple[int, bool]


def wikidata_key(external_id: str, same_as: str) -> str:
    """The Wikidata id an entity is matched by across KGs ("" where it has none)."""
    return same_as or (external_id if ITEM_ID.fullmatch(external_id) else "")


@dataclass
class ReferenceFinding:
    """What one reference KG holds about a triple."""

    reference: str
    covered: bool = False
    stated: list[str] = field(default_factory=list)  # the aligned relations linking head to tail, by label
    head_values: list[str] = field(default_factory=list)  # "nationality: Canada", the head's aligned values
    tail_valued: bool = False
    links: list[str] = field(default_factory=list)  # every reference relation linking the two, by label

    def text(self, head: str, relation: str, tail: str) -> str:
        if not self.covered:
            return f"The reference KG {self.reference} does not know both {head} and {tail}"
        if self.stated:
            return f"The reference KG {self.reference} states it: {head} · {' / '.join(self.stated)} · {tail}"
        said = (f"gives {head} {', '.join(self.head_values)} instead" if self.head_values
                else f"gives {head} no {relation}")
        linked = f"; it links the two by {', '.join(self.links)}" if self.links else ""
        return f"The reference KG {self.reference} does not state it: it {said}{linked}"


@dataclass
class ReferenceEvidence:
    """What every reference KG of the calibration holds about a triple."""

    findings: list[ReferenceFinding]

    def features(self) -> list[float]:
        covered = [f for f in self.findings if f.covered]
        links = {link for f in covered for link in f.links}
        return [float(bool(covered)), float(any(f.stated for f in covered)), float(any(f.head_values or f.stated for f in covered)),
                float(any(f.tail_valued for f in covered)), float(bool(links)), float(len(links))]


class ReferenceIndex:
    """One reference KG's triples between entities matched with a KG's, and the KG's relations aligned to its."""

    def __init__(self, kg: KnowledgeGraph, reference: KnowledgeGraph):
        self.name = reference.name
        keys = {key: pk for pk, key in ((pk, wikidata_key(e, s)) for pk, e, s in
                                        Entity.objects.filter(kg=reference).values_list("pk", "external_id", "same_as")) if key}
        self.matched: dict[int, int] = {}
        for pk, external_id, same_as in Entity.objects.filter(kg=kg).values_list("pk", "external_id", "same_as"):
            other = keys.get(wikidata_key(external_id, same_as))
            if other is not None:
                self.matched[pk] = other
        self.labels = dict(Entity.objects.filter(kg=reference, pk__in=set(self.matched.values())).values_list("pk", "label"))
        self.relation_labels = dict(Relation.objects.filter(kg=reference).values_list("pk", "label"))
        self.links: dict[tuple[int, int], set[Reading]] = defaultdict(set)
        self.values: dict[tuple[int, Reading], list[int]] = defaultdict(list)
        self.valued: set[tuple[int, Reading]] = set()  # (entity, reading): the entity is a value of the reading
        ours = set(self.matched.values())
        for head, relation, tail in kg_triples(reference).tolist():
            if head in ours or tail in ours:
                self.links[(head, tail)].add((relation, False))
                self.links[(tail, head)].add((relation, True))
                self.values[(head, (relation, False))].append(tail)
                self.values[(tail, (relation, True))].append(head)
                self.valued.add((tail, (relation, False)))
                self.valued.add((head, (relation, True)))
        self.aligned = self._align(kg_triples(kg))

    def _align(self, triples: np.ndarray) -> dict[int, list[Reading]]:
        pairs: Counter[int] = Counter()
        linking: dict[int, Counter[Reading]] = defaultdict(Counter)
        for head, relation, tail in triples.tolist():
            if head not in self.matched or tail not in self.matched:
                continue
            pairs[relation] += 1
            linking[relation].update(self.links.get((self.matched[head], self.matched[tail]), ()))
        return {relation: [reading for reading, count in linking[relation].most_common(ALIGNED_MAX)
                           if count >= ALIGNED_SHARE * n]
                for relation, n in pairs.items()}

    def _label(self, reading: Reading) -> str:
        label = self.relation_labels.get(reading[0], str(reading[0]))
        return f"{label} (reversed)" if reading[1] else label

    def finding(self, head: int, relation: int, tail: int) -> ReferenceFinding:
        finding = ReferenceFinding(self.name)
        a, b = self.matched.get(head), self.matched.get(tail)
        if a is None or b is None:
            return finding
        finding.covered = True
        linking = self.links.get((a, b), set())
        aligned = self.aligned.get(relation, [])
        finding.stated = [self._label(r) for r in aligned if r in linking]
        finding.head_values = [f"{self._label(r)}: {', '.join(self.labels.get(v, str(v)) for v in self.values[(a, r)][:SHOWN_VALUES])}"
                               for r in aligned if self.values.get((a, r)) and r not in linking]
        finding.tail_valued = any((b, r) in self.valued for r in aligned)
        finding.links = sorted(self._label(r) for r in linking)
        return finding


def reference_ids(kg: KnowledgeGraph) -> list[int]:
    """The KG's reference KGs, by row id (what a calibration fitted now weighs)."""
    return sorted(kg.references.filter(kind=KnowledgeGraph.Kind.LOCAL).values_list("pk", flat=True))


class References:
    """The reference KGs a calibration weighs, indexed for one KG (those since deleted are left out)."""

    def __init__(self, kg: KnowledgeGraph, ids: list[int]):
        self.indexes = [ReferenceIndex(kg, reference)
                        for reference in KnowledgeGraph.objects.filter(pk__in=ids).order_by("name")]

    def evidence(self, head: int, relation: int, tail: int) -> ReferenceEvidence:
        return ReferenceEvidence([index.finding(head, relation, tail) for index in self.indexes])
