"""The triples a structural model learns from, and the ones it must never see.

A KG's triples are read by row ids and indexed densely (entity and relation indices for PyKEEN). Two
kinds of KG triples are held out of training:

- every triple queued for verification (a flagged triple is usually already in the KG, and a model
  that learnt it would simply recognise it);
- a calibration slice: a few percent of each relation's triples, seeded, that the model never sees.
  They are real positives with the score distribution of unseen true triples: the validation set for
  early stopping and, with type-constrained corruptions as negatives, calibration data for KGs without
  labelled negatives.

A KG that is a known dataset with its own validation split (CoDEx-S, FB15k-237) needs little of a slice:
its calibration is fitted on that split, and early stopping ranks a seeded half of it (at most STOPPING_CAP
triples), the other half reporting an MRR that no choice of epoch was made on. Its slice shrinks to
DATASET_FRACTION, the unseen true triples the memory bootstrap draws (verifier/memory/bootstrap.py), and the
network learns nearly every KG triple: on CoDEx-S that and the stopping lift the validation MRR by about
0.006 (docs/structure.md, "Every KG triple learnt").
"""

from __future__ import annotations

import hashlib
import random
from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np
from django.db import connection

from verifier.evaluation.datasets import dataset_validation
from verifier.models import Entity, KnowledgeGraph, Relation, VerificationTask

RowTriple = tuple[int, int, int]  # (head, relation, tail) row ids of the local store

CALIBRATION_FRACTION = 0.03
CALIBRATION_CAP = 2000
DATASET_FRACTION = 0.005  # the slice of a KG with its own validation split
STOPPING_CAP = 2000  # the validation triples early stopping ranks at each check (its cost grows with them)
MIN_RELATION_TRIPLES = 20  # relations with fewer triples give none to the slice: the model needs them all


def _no_triples() -> np.ndarray:
    return np.empty((0, 3), dtype=np.int64)


@dataclass
class TrainingData:
    """A KG version as dense indices: what to train on and what was held out (row-id triples)."""

    entity_rows: np.ndarray  # entity row id of each entity index, ascending
    relation_rows: np.ndarray  # relation row id of each relation index, ascending
    train: np.ndarray  # (n, 3) int64 indices
    calibration: np.ndarray  # (m, 3) indices: the calibration slice
    held_out: dict[RowTriple, str] = field(default_factory=dict)  # row triple → reason ("queued" / "calibration")
    known: np.ndarray = field(default_factory=_no_triples)  # every true triple known: the KG's and the validation split's
    validation: np.ndarray = field(default_factory=_no_triples)  # the dataset's validation triples, if any
    stopping: np.ndarray = field(default_factory=_no_triples)  # what early stopping ranks: the slice, or part of validation
    unranked: np.ndarray = field(default_factory=_no_triples)  # the validation triples early stopping never ranks

    @property
    def num_entities(self) -> int:
        return len(self.entity_rows)

    @property
    def num_relations(self) -> int:
        return len(self.relation_rows)

    def to_indices(self, rows: np.ndarray) -> np.ndarray:
        """(n, 3) row-id triples → indices (every id must belong to the KG)."""
        rows = np.asarray(rows, dtype=np.int64).reshape(-1, 3)
        return np.stack([np.searchsorted(self.entity_rows, rows[:, 0]), np.searchsorted(self.relation_rows, rows[:, 1]),
                         np.searchsorted(self.entity_rows, rows[:, 2])], axis=1)

    def to_rows(self, indices: np.ndarray) -> np.ndarray:
        indices = np.asarray(indices, dtype=np.int64).reshape(-1, 3)
        return np.stack([self.entity_rows[indices[:, 0]], self.relation_rows[indices[:, 1]], self.entity_rows[indices[:, 2]]], axis=1)

    @property
    def digest(self) -> str:
        """Identifies the training set: the same KG triples minus the same held-out ones give the same digest."""
        rows = self.to_rows(self.train)
        order = np.lexsort((rows[:, 2], rows[:, 1], rows[:, 0]))
        return hashlib.sha256(np.ascontiguousarray(rows[order]).tobytes()).hexdigest()


def kg_triples(kg: KnowledgeGraph | int) -> np.ndarray:
    """All triples of the KG (or the KG of this row id) as (n, 3) row ids."""
    kg_id = kg if isinstance(kg, int) else kg.pk
    with connection.cursor() as cursor:
        cursor.execute("SELECT head_id, relation_id, tail_id FROM verifier_triple WHERE kg_id = %s", [kg_id])
        rows = cursor.fetchall()
    return np.array(rows, dtype=np.int64).reshape(-1, 3)


def queued_triples(kg: KnowledgeGraph) -> set[RowTriple]:
    return set(VerificationTask.objects.filter(kg=kg).values_list("head_id", "relation_id", "tail_id"))


def calibration_slice(triples: np.ndarray, *, seed: int, fraction: float = CALIBRATION_FRACTION,
                      cap: int = CALIBRATION_CAP) -> np.ndarray:
    """Row indices into ``triples`` of the calibration slice: about ``fraction`` of each relation's triples
    (relations with fewer than MIN_RELATION_TRIPLES give none), at most ``cap`` in all, never a head's or
    a tail's last triple (the model must still learn every entity)."""
    rng = random.Random(seed)
    by_relation: dict[int, list[int]] = defaultdict(list)
    for index, relation in enumerate(triples[:, 1].tolist()):
        by_relation[relation].append(index)
    total = len(triples)
    share = min(fraction, cap / total) if total else 0.0
    degree = np.bincount(np.concatenate([triples[:, 0], triples[:, 2]]), minlength=int(triples[:, [0, 2]].max(initial=0)) + 1)
    chosen: list[int] = []
    for relation in sorted(by_relation):
        members = by_relation[relation]
        if len(members) < MIN_RELATION_TRIPLES:
            continue
        wanted = max(1, round(len(members) * share))
        for index in rng.sample(members, len(members)):
            if wanted == 0:
                break
            head, _, tail = triples[index]
            if degree[head] > 1 and degree[tail] > 1:
                degree[head] -= 1
                degree[tail] -= 1
                chosen.append(index)
                wanted -= 1
    return np.array(sorted(chosen), dtype=np.int64)


def training_data(kg: KnowledgeGraph, *, seed: int = 0) -> TrainingData:
    """The KG's current triples split into training triples and held-out ones, and what early stopping ranks
    (see the module docstring)."""
    entity_rows = np.array(sorted(Entity.objects.filter(kg=kg).values_list("pk", flat=True)), dtype=np.int64)
    relation_rows = np.array(sorted(Relation.objects.filter(kg=kg).values_list("pk", flat=True)), dtype=np.int64)
    triples = kg_triples(kg)
    queued = queued_triples(kg)
    held_out: dict[RowTriple, str] = {}
    keep = np.ones(len(triples), dtype=bool)
    if queued:
        for index, triple in enumerate(map(tuple, triples.tolist())):
            if triple in queued:
                keep[index] = False
                held_out[triple] = "queued"
    validation = dataset_validation(kg)
    candidates = np.flatnonzero(keep)
    has_validation = validation is not None and len(validation) > 0
    fraction = DATASET_FRACTION if has_validation else CALIBRATION_FRACTION
    sliced = candidates[calibration_slice(triples[candidates], seed=seed, fraction=fraction)] if len(candidates) else candidates
    keep[sliced] = False
    for triple in map(tuple, triples[sliced].tolist()):
        held_out[triple] = "calibration"
    data = TrainingData(entity_rows, relation_rows, _no_triples(), _no_triples(), held_out)
    data.train = data.to_indices(triples[keep])
    data.calibration = data.stopping = data.to_indices(triples[sliced])
    data.known = data.to_indices(triples)
    if has_validation:
        data.validation = data.to_indices(validation)
        order = np.random.default_rng(seed).permutation(len(validation))
        ranked = order[:min(len(order) // 2, STOPPING_CAP)]
        data.stopping, data.unranked = data.validation[np.sort(ranked)], np.delete(data.validation, ranked, axis=0)
        data.known = np.concatenate([data.known, data.validation])
    return data
