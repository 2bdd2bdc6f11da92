"""Resolving a pseudo-subgraph's unknowns to KG entities (ClaimPKG's retrieval).

An unknown is tied to named entities by the claim's triples ("Marie Curie || place of birth || unknown_1",
"unknown_1 || country || Poland"). Every KG neighbour of those entities, in the right direction, is a candidate;
its score is the sum, over the ties, of the best similarity between the claimed relation and a KG relation that
links the candidate to that entity (label embeddings, cosine; at least MIN_RELATION_SIMILARITY). A KG misses
facts, so the structural model's PREDICTED likeliest entities for each tie (link prediction) are candidates too,
scored by their probability where no KG edge ties them: a city the KG does not give as her birthplace, but which
lies in Poland and which the model finds likely, beats every other Polish city. The best candidate resolves the unknown; an
unknown tied only to other unknowns is resolved once they are. Denied triples ("NOT …") do not resolve anything:
they are what is checked afterwards.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

from verifier.claims.decompose import Decomposition
from verifier.claims.subgraph import Named, is_unknown
from verifier.models import Entity, KnowledgeGraph, Relation, StructuralModel, Triple
from verifier.structure import scoring

CANDIDATES_KEPT = 3
PREDICTED = 10
# A KG relation this far from the claimed one (cosine of label embeddings) does not tie a candidate: "member of
# sports team" must not resolve through "occupation".
MIN_RELATION_SIMILARITY = 0.6


@dataclass
class Resolution:
    entity: Named | None  # None: no KG entity is tied to the unknown's named neighbours
    score: float = 0.0
    ties: int = 0  # how many of the unknown's triples constrained it
    candidates: list[tuple[Named, float]] = field(default_factory=list)  # best first

    def as_dict(self) -> dict:
        return {"entity": self.entity.external_id if self.entity else None,
                "label": self.entity.label if self.entity else "", "score": round(self.score, 4), "ties": self.ties,
                "candidates": [[n.external_id, n.label, round(s, 4)] for n, s in self.candidates]}


def relation_similarity(kg: KnowledgeGraph) -> dict[int, dict[int, float]]:
    """relation pk → relation pk → cosine similarity of their label embeddings (1 on the diagonal; 0 where a
    relation has no embedding)."""
    rows = list(Relation.objects.filter(kg=kg).values_list("id", "embedding"))
    ids = [pk for pk, _ in rows]
    similarity = {a: {b: float(a == b) for b in ids} for a in ids}
    embedded = [(pk, np.asarray(v, dtype=float)) for pk, v in rows if v is not None]
    if embedded:
        matrix = np.stack([v / (np.linalg.norm(v) or 1.0) for _, v in embedded])
        cosine = matrix @ matrix.T
        for i, (a, _) in enumerate(embedded):
            for j, (b, _) in enumerate(embedded):
                similarity[a][b] = max(float(cosine[i, j]), 0.0) if a != b else 1.0
    return similarity


def _neighbours(entity: int, outgoing: bool) -> list[tuple[int, int]]:
    """(relation pk, neighbour pk) of the entity's edges where it is the head (outgoing) or the tail."""
    if outgoing:
        return list(Triple.objects.filter(head_id=entity).values_list("relation_id", "tail_id"))
    return list(Triple.objects.filter(tail_id=entity).values_list("relation_id", "head_id"))


def _predictor(kg: KnowledgeGraph):
    """(anchor pk, relation pk, side) → [(entity pk, probability)] from the KG's ready structural model, or None."""
    model = StructuralModel.objects.ready_for(kg)
    if model is None:
        return None
    network = scoring.loaded(model)
    return lambda anchor, relation, side: network.predicted(anchor, relation, side, PREDICTED)


def resolve(kg: KnowledgeGraph, decomposition: Decomposition) -> dict[str, Resolution]:
    """unknown_i → its Resolution, for every unknown of the pseudo-subgraph."""
    similarity = relation_similarity(kg)
    predict = _predictor(kg)
    known: dict[str, Named] = dict(decomposition.entities)
    unknowns = list(dict.fromkeys(n for t in decomposition.triples for n in (t.head, t.tail) if is_unknown(n)))
    resolved: dict[str, Resolution] = {}
    progress = True
    while progress:
        progress = False
        for unknown in unknowns:
            if unknown in resolved:
                continue
            ties = [(t, t.head == unknown) for t in decomposition.triples
                    if not t.negated and unknown in (t.head, t.tail) and (t.tail if t.head == unknown else t.head) in known]
            if not ties:
                continue
            scores: dict[int, float] = defaultdict(float)
            for triple, unknown_is_head in ties:
                anchor = known[triple.tail if unknown_is_head else triple.head]
                claimed = decomposition.relations[triple.relation].pk
                best: dict[int, float] = {}
                for relation, neighbour in _neighbours(anchor.pk, outgoing=not unknown_is_head):
                    value = similarity.get(claimed, {}).get(relation, 0.0)
                    if neighbour != anchor.pk and value >= MIN_RELATION_SIMILARITY:
                        best[neighbour] = max(best.get(neighbour, 0.0), value)
                if predict is not None:
                    for entity, probability in predict(anchor.pk, claimed, "head" if unknown_is_head else "tail"):
                        if entity != anchor.pk:
                            best[entity] = max(best.get(entity, 0.0), probability)
                for neighbour, value in best.items():
                    scores[neighbour] += value
            resolved[unknown] = _ranked(scores, len(ties))
            if resolved[unknown].entity is not None:
                known[unknown] = resolved[unknown].entity
            progress = True
    for unknown in unknowns:
        resolved.setdefault(unknown, Resolution(None))
    return resolved


def _ranked(scores: dict[int, float], ties: int) -> Resolution:
    if not scores:
        return Resolution(None, ties=ties)
    degree = dict(Entity.objects.filter(pk__in=list(scores)).values_list("id", "degree"))
    order = sorted((pk for pk, s in scores.items() if s > 0), key=lambda pk: (-scores[pk], -degree.get(pk, 0), pk))
    top = order[:CANDIDATES_KEPT]
    rows = {pk: Named(pk, ext, label or ext) for pk, ext, label in
            Entity.objects.filter(pk__in=top).values_list("id", "external_id", "label")}
    candidates = [(rows[pk], scores[pk]) for pk in top]
    if not candidates:
        return Resolution(None, ties=ties)
    return Resolution(candidates[0][0], candidates[0][1], ties, candidates)
