"""The structural evidence of one local KG, as the tools ask for it (by the KG's external ids).

``StructuralEvidence`` is the port the tools receive in their context: ``plausibility`` answers from the
KG's ready embedding model (each triple by the network that never learnt it), ``rules`` from the rules mined
from the KG. Either may be unavailable — no model yet, the first model still training, an entity newer than the
model — and then says so plainly instead of answering.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Value

from verifier.models import Entity, KnowledgeGraph, MinedRule, Relation, StructuralModel
from verifier.structure import calibration_store, scoring
from verifier.structure.reference import ReferenceEvidence
from verifier.structure.rule_evidence import RuleEvidence, rule_evidence, rule_features

SHOWN_HOLDERS = 3  # the description neighbours named in the observation


@dataclass(frozen=True)
class Unavailable:
    message: str


@dataclass
class Candidate:
    id: str
    label: str
    probability: float  # the model's p(candidate | the other end, relation); if not in the KG, its share of ``rest``
    in_kg: bool  # the KG states this alternative


@dataclass
class SideRanking:
    rank: int
    candidates: int
    alternatives: list[Candidate]
    rest: float = 1.0  # the probability the KG's stated values leave (scoring.Ranked.rest)


@dataclass
class TextEvidence:
    """What the entities' own text says (verifier/structure/entity_text.py), in labels."""

    share: float  # similarity-weighted share of the head's description neighbours that hold the tail
    neighbours: int  # how many neighbours (entities described like the head that have the relation) voted
    holders: list[str]  # labels of the neighbours that hold the tail, most similar first
    tail_named: bool  # the head's text names the tail
    head_named: bool  # the tail's text names the head


@dataclass
class PlausibilityReport:
    model: StructuralModel
    probability: float | None
    features: list[float]
    tail: SideRanking
    head: SideRanking
    text: TextEvidence
    embedding_probability: float | None = None  # the embedding classifier's alone, for the `embedding` baseline
    reference: ReferenceEvidence | None = None  # what the KG's reference KGs hold about it
    fold: int = 0  # the network of the model that scored it (trained without this fold)


class StructuralEvidence:
    def __init__(self, kg: KnowledgeGraph):
        self.kg = kg

    def rows(self, head: str, relation: str, tail: str) -> tuple[int, int, int] | None:
        """The row ids of a triple given by external ids, in one query; None if a part is not in the KG."""
        entities = Entity.objects.filter(kg=self.kg, external_id__in=[head, tail]).values_list(Value("e"), "external_id", "pk")
        relations = Relation.objects.filter(kg=self.kg, external_id=relation).values_list(Value("r"), "external_id", "pk")
        found = {(kind, external): pk for kind, external, pk in entities.union(relations)}
        parts = (found.get(("e", head)), found.get(("r", relation)), found.get(("e", tail)))
        return None if None in parts else parts

    def model(self) -> StructuralModel | Unavailable:
        """The KG's ready model (of an earlier version while a changed KG's model trains), or why there is none."""
        ready = StructuralModel.objects.ready_for(self.kg)
        if ready is not None:
            return ready
        latest = StructuralModel.objects.filter(kg=self.kg).order_by("-id").first()
        retrain = f"an administrator can train it from the status strip or with manage.py train_kge {self.kg.name}"
        if latest is None:
            return Unavailable(f"No structural model has been trained for {self.kg.name} yet ({retrain}).")
        if latest.is_stale:
            return Unavailable(f"Training the structural model of {self.kg.name} stopped without finishing ({retrain}).")
        if latest.status in (StructuralModel.Status.QUEUED, StructuralModel.Status.TRAINING):
            return Unavailable(f"The structural model of {self.kg.name} is still training ({latest.progress:.0%}"
                               f"{': ' + latest.stage if latest.stage else ''}); plausibility is available when it is ready.")
        return Unavailable(f"Training the structural model of {self.kg.name} failed: {latest.error} ({retrain}).")

    def plausibility(self, head: str, relation: str, tail: str) -> PlausibilityReport | Unavailable:
        model = self.model()
        if isinstance(model, Unavailable):
            return model
        loaded = scoring.loaded(model)
        index = loaded.text()
        rows = index.triple_rows(head, relation, tail)
        if rows is None:
            return Unavailable(f"({head}, {relation}, {tail}) is not made of entities and a relation of {self.kg.name}.")
        result = loaded.plausibility(*rows)
        if result is None:
            return Unavailable(f"The structural model of {self.kg.name} does not know one of these entities (added after training).")
        head_row, relation_row, tail_row = rows
        shown = result.text.tail_vote.holding[:SHOWN_HOLDERS]
        named = {pk: (index.external_ids[pk], index.labels[pk] or index.external_ids[pk])
                 for pk in [row for row, _ in result.tail.alternatives + result.head.alternatives] + shown}
        stated = index.tails
        return PlausibilityReport(
            model, result.probability, result.features,
            _side(result.tail, named, lambda alt: alt in stated.get((head_row, relation_row), ())),
            _side(result.head, named, lambda alt: tail_row in stated.get((alt, relation_row), ())),
            TextEvidence(result.text.tail_vote.share, len(result.text.tail_vote.neighbours),
                         [named[pk][1] for pk in shown], result.text.tail_named, result.text.head_named),
            result.embedding_probability,
            result.reference,
            result.fold,
        )

    def rules(self, head: str, relation: str, tail: str, *, limit: int = 5) -> RuleEvidence | Unavailable:
        """What the rules mined from the KG's current version say for and against (head, relation, tail)."""
        if not _mined(self.kg):
            return Unavailable(f"No rules have been mined for {self.kg.name} v{self.kg.version} yet, so there is no rule "
                               "evidence; look for the patterns yourself with KG_Path and KG_Neighbor.")
        rows = self.rows(head, relation, tail)
        if rows is None:
            return Unavailable(f"({head}, {relation}, {tail}) is not made of entities and a relation of {self.kg.name}.")
        return rule_evidence(self.kg, *rows, limit=limit)

    def rule_probability(self, evidence: RuleEvidence) -> float | None:
        """The calibrated probability the rule evidence gives the triple (fitted with the structural model on
        the same labelled triples), or None before a model is ready."""
        model = StructuralModel.objects.ready_for(self.kg)
        calibration = calibration_store.stored_calibration(model, "rules") if model else None
        if calibration is None:
            return None
        fold = calibration_store.fold_of(model).get(tuple(evidence.rows))
        return calibration.probability(rule_features(evidence), str(evidence.rows[1]), fold)


_MINED: set[tuple[int, int]] = set()  # (KG row id, version) known to have mined rules: they stay until a new version


def _mined(kg: KnowledgeGraph) -> bool:
    key = (kg.pk, kg.version)
    if key not in _MINED and MinedRule.objects.filter(kg=kg, kg_version=kg.version).exists():
        _MINED.add(key)
    return key in _MINED


def _side(ranked: scoring.Ranked, named: dict[int, tuple[str, str]], in_kg) -> SideRanking:
    """A ranking in external ids and labels; ``in_kg(row)``: the KG states that alternative."""
    alternatives = [Candidate(*named[row], probability, in_kg(row)) for row, probability in ranked.alternatives]
    return SideRanking(ranked.rank, ranked.candidates, alternatives, ranked.rest)
