"""A trained structural model, loaded once per process, answering: how plausible is (h, r, t)?

Every triple is scored by the network of its fold (verifier/structure/folds.py), which never learnt it: a fact the
KG states is scored exactly as a triple the KG lacks. Scores are read as the networks were trained to produce
them: log p(tail | head, relation) from a softmax over every entity, and log p(head | tail, relation⁻¹) through
the reciprocal relation. Ranks are counted
among the *type-compatible* candidates only — entities sharing a declared type with the relation's range
(domain, for heads), or, in a KG without types, entities seen in that role of the relation — so "ranked
3rd of 40 languages" says how the tail fares against its real competitors.

The calibration maps twenty-four features of a triple to a probability (FEATURES). Six are the embedding's:
both log-probabilities; both again among the values the KG does not already hold ("new": the head's other
tails for the relation are taken out of the softmax, so a person with three known citizenships is not held
against a fourth); and the log of both ranks. Five are what the entities' own text says
(verifier/structure/entity_text.py): the votes of the entities described most like the head (the tail) and
whether either text names the other end. Seven are the rule evidence's (verifier/structure/rule_evidence.py):
the rules that predict the triple, those that predict another value, a functional conflict, a type
violation. Six are what the KG's reference KGs hold between the two entities (verifier/structure/reference.py).
The calibration (verifier/structure/calibration.py) weighs them per relation, or jointly by boosted trees,
as the labelled triples say: each kind of feature catches errors the others miss.

A calibration fitted before the rule or the reference features joined (on a prefix of FEATURES) still
applies to that prefix, until ``train_kge <kg> --recalibrate`` refits it on all of them. A calibration
weighs the references it was fitted with (recorded as ``calibration["references"]``): a reference added to
the KG since is weighed from the next calibration on.
"""

from __future__ import annotations

import io
import threading
from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np
import torch

from verifier.models import Entity, FoldNetwork, Relation, StructuralModel, Triple
from verifier.structure import calibration_store, entity_text, kge, reference
from verifier.structure.calibration import CrossFitted
from verifier.structure.dataset import kg_triples
from verifier.structure.folds import fold_of, fold_of_one
from verifier.structure.rule_evidence import RULE_FEATURES, rule_evidence, rule_features

EMBEDDING_FEATURES = ["log_p_tail", "log_p_head", "log_p_new_tail", "log_p_new_head", "log_rank_tail", "log_rank_head"]
FEATURES = EMBEDDING_FEATURES + entity_text.FEATURES + RULE_FEATURES + reference.FEATURES
RULES = slice(len(EMBEDDING_FEATURES) + len(entity_text.FEATURES), len(EMBEDDING_FEATURES) + len(entity_text.FEATURES) + len(RULE_FEATURES))
ALTERNATIVES = 3


def pack(model, entity_rows: np.ndarray, relation_rows: np.ndarray) -> bytes:
    """A network's weights with the row ids their indices stand for, as stored on FoldNetwork.weights."""
    buffer = io.BytesIO()
    torch.save({"state": model.state_dict(), "entity_rows": torch.as_tensor(entity_rows),
                "relation_rows": torch.as_tensor(relation_rows)}, buffer)
    return buffer.getvalue()


@dataclass
class Ranked:
    rank: int  # 1 = the model's first choice among the candidates
    candidates: int
    # (entity row id, probability) best first: p(entity | …) for a value the KG states; for any other, its share of
    # what the KG's stated values leave (a person with a recorded citizenship at 0.999 leaves 0.001, and the
    # model's choice among the rest is read from that, as the new-value features read it)
    alternatives: list[tuple[int, float]] = field(default_factory=list)
    rest: float = 1.0  # the probability the KG's stated values (other than the claimed one) leave


@dataclass
class Plausibility:
    probability: float | None  # calibrated; None when the model has no calibration yet
    features: list[float]
    tail: Ranked
    head: Ranked
    text: entity_text.Described  # what the entities' own text says (verifier/structure/entity_text.py)
    embedding_probability: float | None = None  # the embedding classifier's alone (its own calibration), for comparison
    reference: reference.ReferenceEvidence | None = None  # what the reference KGs hold (verifier/structure/reference.py)
    fold: int = 0  # the network that scored it (trained without this fold)


class LoadedModel:
    """A StructuralModel's networks and index maps in memory (see ``loaded``)."""

    def __init__(self, row: StructuralModel, *, references: list[int] | None = None):
        """``references``: the reference KGs to weigh (row ids); by default those the calibration was fitted with,
        or the KG's own where the model has no calibration yet."""
        self.row_id = row.pk
        self.config = kge.KGEConfig.from_dict(row.config["kge"])
        self.networks, self.one_question = [], []
        for weights in FoldNetwork.objects.filter(model_id=row.pk).order_by("fold").values_list("weights", flat=True):
            data = torch.load(io.BytesIO(bytes(weights)), weights_only=True)
            self.entity_rows, self.relation_rows = data["entity_rows"].numpy(), data["relation_rows"].numpy()
            network = kge.build_model(self.config, len(self.entity_rows), len(self.relation_rows))
            network.load_state_dict(data["state"])
            network.eval()
            self.networks.append(network)
            self.one_question.append(kge.OneQuestion(network))
        if len(self.networks) != row.folds:
            raise ValueError(f"structural model #{row.pk} has {len(self.networks)} of its {row.folds} networks")
        self.calibration = CrossFitted.from_stored(row.calibration or {}, "structural")
        fitted_on = list(self.calibration.full.features) if self.calibration is not None else []
        if fitted_on != FEATURES[:len(fitted_on)]:
            # fitted on another feature set: its probabilities would be wrong; recalibrating is quick
            self.calibration = None
        self.calibrated_features = len(fitted_on)
        embedding = CrossFitted.from_stored(row.calibration or {}, "embedding")
        self.embedding_calibration = embedding if embedding and list(embedding.full.features) == EMBEDDING_FEATURES else None
        self.folds = calibration_store.fold_of(row) if self.calibration is not None else {}
        self._known: dict[str, dict[tuple[int, int], np.ndarray]] | None = None
        self._candidates: dict[tuple[int, str], np.ndarray] | None = None
        self._lock = threading.Lock()
        self._kg_id, self._version = row.kg_id, row.kg_version
        self._kg = row.kg
        self.calibration_stamp = row.calibration_stamp
        if references is None:
            recorded = (row.calibration or {}).get("references")
            references = recorded if recorded is not None else reference.reference_ids(row.kg)
        self.reference_ids = list(references)
        self._references: reference.References | None = None

    def index(self, entity_row: int | None = None, relation_row: int | None = None) -> int | None:
        rows, value = (self.entity_rows, entity_row) if entity_row is not None else (self.relation_rows, relation_row)
        position = int(np.searchsorted(rows, value))
        return position if position < len(rows) and rows[position] == value else None

    def fold(self, head_row: int, relation_row: int, tail_row: int) -> int:
        """The network that scores this triple: the one trained without its fold."""
        return fold_of_one(head_row, relation_row, tail_row, len(self.networks))

    @torch.inference_mode()
    def log_probs(self, anchor: int, relation: int, side: str, fold: int) -> np.ndarray:
        """log p(· | anchor, relation) over all entities by network ``fold``; side "tail": anchor is the head, "head":
        the tail."""
        return torch.log_softmax(self.one_question[fold].scores(anchor, relation, inverse=side == "head"), dim=0).numpy()

    def predicted(self, anchor_row: int, relation_row: int, side: str, k: int) -> list[tuple[int, float]]:
        """The ``k`` likeliest type-compatible entities (row ids) on ``side`` of (anchor, relation) and their
        probabilities, averaged over the networks: link prediction, for an entity a claim describes without naming
        it (no triple to take a fold from)."""
        anchor, relation = self.index(entity_row=anchor_row), self.index(relation_row=relation_row)
        if anchor is None or relation is None:
            return []
        probabilities = np.mean([np.exp(self.log_probs(anchor, relation, side, fold)) for fold in range(len(self.networks))], axis=0)
        log_probs = np.log(np.maximum(probabilities, 1e-30))
        pool = self.candidates(relation_row, side)
        pool = pool[pool != anchor] if len(pool) else np.delete(np.arange(len(log_probs)), anchor)
        best = pool[np.argsort(-log_probs[pool], kind="stable")[:k]]
        return [(int(self.entity_rows[i]), float(np.exp(log_probs[i]))) for i in best]

    def candidates(self, relation_row: int, side: str) -> np.ndarray:
        """Indices of the type-compatible entities for the relation's tail (range) or head (domain)."""
        with self._lock:
            if self._candidates is None:
                self._candidates = self._compatible()
            return self._candidates.get((relation_row, side), np.empty(0, dtype=np.int64))

    def _compatible(self) -> dict[tuple[int, str], np.ndarray]:
        """Every relation's candidates, (relation row, side) → entity indices, computed at once (per relation on
        demand, the first question about each relation waited for its own queries): the entities sharing a
        declared type with the range (domain), else those the KG has in that role of the relation."""
        typed: dict[str, list[int]] = defaultdict(list)
        for pk, types in Entity.objects.filter(kg_id=self._kg_id).exclude(types=[]).values_list("pk", "types"):
            for entity_type in types:
                typed[entity_type].append(pk)
        triples = kg_triples(self._kg_id)
        out: dict[tuple[int, str], np.ndarray] = {}
        for relation_row, domain, range_ in Relation.objects.filter(kg_id=self._kg_id).values_list("pk", "domain", "range"):
            for side, types, column in (("tail", range_, 2), ("head", domain, 0)):
                rows = np.array(sorted({pk for t in types or () for pk in typed.get(t, ())}), dtype=np.int64)
                if not len(rows):
                    rows = np.unique(triples[triples[:, 1] == relation_row, column])
                indices = np.searchsorted(self.entity_rows, rows)
                known = indices < len(self.entity_rows)
                known[known] = self.entity_rows[indices[known]] == rows[known]  # not an entity added after training
                out[(relation_row, side)] = indices[known]
        return out

    def known_values(self, side: str) -> dict[tuple[int, int], np.ndarray]:
        """The KG's values of each relation as indices: side "tail": (head, relation) → its tails; "head":
        (relation, tail) → its heads. Read once per process."""
        with self._lock:
            if self._known is None:
                triples = kg_triples(self._kg_id)
                idx = np.stack([np.searchsorted(self.entity_rows, triples[:, 0]), np.searchsorted(self.relation_rows, triples[:, 1]),
                                np.searchsorted(self.entity_rows, triples[:, 2])], axis=1) if len(triples) else np.empty((0, 3), int)
                self._known = {"tail": _grouped(idx[:, :2], idx[:, 2]), "head": _grouped(idx[:, 1:], idx[:, 0])}
            return self._known[side]

    def text(self) -> entity_text.DescriptionIndex:
        return entity_text.index_for(self._kg_id, self._version)

    def references(self) -> reference.References:
        """The reference KGs indexed for this KG, built on first use (their relations aligned without the triples
        the network was trained without)."""
        with self._lock:
            if self._references is None:
                self._references = reference.References(self._kg, self.reference_ids)
            return self._references

    def _features(self, tail_lp: np.ndarray, head_lp: np.ndarray, h: int, r: int, t: int) -> list[float]:
        """The embedding's features of the triple at indices (h, r, t)."""
        relation_row = int(self.relation_rows[r])
        none = np.empty(0, dtype=np.int64)
        return [float(tail_lp[t]), float(head_lp[h]),
                _new_value_log_p(tail_lp, t, self.known_values("tail").get((h, r), none)),
                _new_value_log_p(head_lp, h, self.known_values("head").get((r, t), none)),
                float(np.log(_rank(tail_lp, t, self.candidates(relation_row, "tail")))),
                float(np.log(_rank(head_lp, h, self.candidates(relation_row, "head"))))]

    def plausibility(self, head_row: int, relation_row: int, tail_row: int) -> Plausibility | None:
        h, r, t = self.index(entity_row=head_row), self.index(relation_row=relation_row), self.index(entity_row=tail_row)
        if h is None or r is None or t is None:
            return None
        fold = self.fold(head_row, relation_row, tail_row)
        tail_lp, head_lp = self.log_probs(h, r, "tail", fold), self.log_probs(t, r, "head", fold)
        text = self.text().described(head_row, relation_row, tail_row)
        held = self.references().evidence(head_row, relation_row, tail_row)
        features = (self._features(tail_lp, head_lp, h, r, t) + text.features() + self._rule_features(head_row, relation_row, tail_row)
                    + held.features())
        fitted = self.folds.get((head_row, relation_row, tail_row))
        probability = None if self.calibration is None else self.calibration.probability(
            features[:self.calibrated_features], str(relation_row), fitted)
        embedding = None if self.embedding_calibration is None else self.embedding_calibration.probability(
            features[:len(EMBEDDING_FEATURES)], str(relation_row), fitted)
        none = np.empty(0, dtype=np.int64)
        tail_side = _ranked(tail_lp, t, self.candidates(relation_row, "tail"), self.known_values("tail").get((h, r), none),
                            self.entity_rows)
        head_side = _ranked(head_lp, h, self.candidates(relation_row, "head"), self.known_values("head").get((r, t), none),
                            self.entity_rows)
        return Plausibility(probability, features, tail_side, head_side, text, embedding, held, fold)

    def features(self, triples: np.ndarray) -> np.ndarray:
        """(n, len(FEATURES)) features of many row-id triples at once (calibration, evaluation), each scored by the
        network of its fold."""
        triples = np.asarray(triples, dtype=np.int64).reshape(-1, 3)
        out = np.zeros((len(triples), len(FEATURES)))
        text, references = self.text(), self.references()
        folds = fold_of(triples, len(self.networks))
        for fold, network in enumerate(self.networks):
            positions = np.flatnonzero(folds == fold)
            for start, tails, heads, idx, rows in self.batched_log_probs(network, triples[positions]):
                for offset, ((h, r, t), row_ids) in enumerate(zip(idx.tolist(), rows.tolist(), strict=True)):
                    out[positions[start + offset]] = (
                        self._features(tails[offset], heads[offset], h, r, t) + text.described(*row_ids).features()
                        + self._rule_features(*row_ids) + references.evidence(*row_ids).features())
        return out

    def batched_log_probs(self, network, triples: np.ndarray, batch: int = 512):
        """(start, tail log-probabilities, head log-probabilities, indices, row ids) per batch of ``triples`` (row ids)
        scored by ``network`` against every entity."""
        with torch.inference_mode():
            for start in range(0, len(triples), batch):
                rows = triples[start:start + batch]
                idx = np.stack([np.searchsorted(self.entity_rows, rows[:, 0]), np.searchsorted(self.relation_rows, rows[:, 1]),
                                np.searchsorted(self.entity_rows, rows[:, 2])], axis=1)
                tensor = torch.as_tensor(idx, dtype=torch.long)
                tails = torch.log_softmax(network.predict_t(tensor[:, :2]), dim=1).numpy()
                heads = torch.log_softmax(network.predict_h(tensor[:, 1:]), dim=1).numpy()
                yield start, tails, heads, idx, rows

    def _rule_features(self, head_row: int, relation_row: int, tail_row: int) -> list[float]:
        """What the rules mined from the KG say about the triple (all 0 where none were mined)."""
        return rule_features(rule_evidence(self._kg, head_row, relation_row, tail_row, limit=1))


def _ranked(log_probs: np.ndarray, target: int, candidates: np.ndarray, stated: np.ndarray, entity_rows: np.ndarray) -> Ranked:
    """The target's rank among the candidates and the model's best alternatives to it (Ranked). ``stated``: the KG's
    values of the question (indices), the claimed one included or not; ``entity_rows``: row id of each index."""
    pool = np.union1d(candidates, [target])
    order = pool[np.argsort(-log_probs[pool], kind="stable")]
    best = order[:ALTERNATIVES + 1]  # the target may be among them
    left = _left(log_probs, target, stated)
    alternatives = [(int(entity_rows[i]), float(np.exp(log_probs[i])) / (1.0 if i in stated else left))
                    for i in best if i != target][:ALTERNATIVES]
    return Ranked(_rank(log_probs, target, candidates), len(pool), alternatives, left)


def _rank(log_probs: np.ndarray, target: int, candidates: np.ndarray) -> int:
    """1 + how many of the candidates the model prefers to ``target``."""
    return int((log_probs[candidates] > log_probs[target]).sum()) + 1


def _left(log_probs: np.ndarray, target: int, known: np.ndarray) -> float:
    """The probability the KG's known values other than ``target`` leave to every other entity."""
    others = known[known != target]
    return max(1.0 - float(np.exp(log_probs[others]).sum()), 1e-12) if len(others) else 1.0


def _new_value_log_p(log_probs: np.ndarray, target: int, known: np.ndarray) -> float:
    """log p(target) in the softmax without the KG's other known values (they are not competitors)."""
    return float(log_probs[target] - np.log(_left(log_probs, target, known)))


def _grouped(keys: np.ndarray, values: np.ndarray) -> dict[tuple[int, int], np.ndarray]:
    groups: dict[tuple[int, int], list[int]] = {}
    for key, value in zip(map(tuple, keys.tolist()), values.tolist(), strict=True):
        groups.setdefault(key, []).append(value)
    return {key: np.array(members, dtype=np.int64) for key, members in groups.items()}


_LOADED: dict[int, LoadedModel] = {}  # KG row id → its model in memory
_LOADING = threading.Lock()


def loaded(row: StructuralModel) -> LoadedModel:
    """The model of ``row`` in memory: loaded once per process, again only when it was recalibrated; a
    KG's newer model replaces its older one."""
    with _LOADING:
        model = _LOADED.get(row.kg_id)
        if model is None or model.row_id != row.pk or model.calibration_stamp != row.calibration_stamp:
            model = LoadedModel(StructuralModel.objects.get(pk=row.pk))
            _LOADED[row.kg_id] = model
        return model


def trained_on(row: StructuralModel, head_row: int, relation_row: int, tail_row: int, fold: int) -> bool:
    """True when network ``fold`` of the model, which scored the triple, learnt it: a KG triple of another fold (every
    network learns the KG's triples outside its own fold). For the evaluation's anti-leakage proof."""
    if fold == fold_of_one(head_row, relation_row, tail_row, row.folds):
        return False
    return Triple.objects.filter(kg_id=row.kg_id, head_id=head_row, relation_id=relation_row, tail_id=tail_row).exists()
