"""The triples a structural model's networks learn from, one KG version read once.

A KG's triples are read by row ids and indexed densely (entity and relation indices for PyKEEN); each triple
has its fold (verifier/structure/folds.py), and network k learns every triple outside fold k. Nothing else is
held out: a flagged triple, a calibration triple or a benchmark's is scored by the network of its fold.

Early stopping ranks triples the network never learns: half of the dataset's own validation split (at most
STOPPING_CAP) where the KG is a known dataset (CoDEx-S, FB15k-237) — the other half then reports an MRR that
no choice of epoch was made on — and otherwise a seeded sample of the network's own fold.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import numpy as np
from django.db import connection

from verifier.benchmarks.datasets import dataset_validation
from verifier.models import Entity, KnowledgeGraph, Relation
from verifier.structure.folds import fold_of

RowTriple = tuple[int, int, int]  # (head, relation, tail) row ids of the local store

STOPPING_CAP = 2000  # the triples early stopping ranks at each check (its cost grows with them)


def _no_triples() -> np.ndarray:
    return np.empty((0, 3), dtype=np.int64)


@dataclass
class TrainingData:
    """A KG version as dense indices, its triples' folds and the dataset validation split, if any."""

    entity_rows: np.ndarray  # entity row id of each entity index, ascending
    relation_rows: np.ndarray  # relation row id of each relation index, ascending
    triples: np.ndarray  # (n, 3) int64 indices of every KG triple
    folds: np.ndarray  # the fold of each triple
    fold_count: int
    validation: np.ndarray = field(default_factory=_no_triples)  # the dataset's validation triples (indices), if any
    seed: int = 0

    @property
    def num_entities(self) -> int:
        return len(self.entity_rows)

    @property
    def num_relations(self) -> int:
        return len(self.relation_rows)

    @property
    def known(self) -> np.ndarray:
        """Every true triple known (filtered out of the rankings): the KG's and the validation split's."""
        return np.concatenate([self.triples, self.validation]) if len(self.validation) else self.triples

    def train(self, fold: int) -> np.ndarray:
        """What network ``fold`` learns: every triple outside its fold."""
        return self.triples[self.folds != fold]

    def left_out(self, fold: int) -> np.ndarray:
        return self.triples[self.folds == fold]

    def stopping(self, fold: int) -> np.ndarray:
        """What early stopping of network ``fold`` ranks (see the module docstring)."""
        if len(self.validation):
            return self.validation[self._ranked()]
        own = self.left_out(fold)
        if len(own) <= STOPPING_CAP:
            return own
        return own[np.sort(np.random.default_rng(self.seed + fold).choice(len(own), STOPPING_CAP, replace=False))]

    def unranked(self) -> np.ndarray:
        """The validation triples early stopping never ranks (empty without a validation split)."""
        if not len(self.validation):
            return _no_triples()
        return np.delete(self.validation, self._ranked(), axis=0)

    def _ranked(self) -> np.ndarray:
        order = np.random.default_rng(self.seed).permutation(len(self.validation))
        return np.sort(order[:min(len(order) // 2, STOPPING_CAP)])

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
        """Identifies the KG's triples: the same triples give the same digest (a reload that changes nothing)."""
        rows = self.to_rows(self.triples)
        order = np.lexsort((rows[:, 2], rows[:, 1], rows[:, 0]))
        return hashlib.sha256(np.ascontiguousarray(rows[order]).tobytes()).hexdigest()


def kg_triples(kg: KnowledgeGraph | int) -> np.ndarray:
    """All triples of the KG (or the KG of this row id) as (n, 3) row ids."""
    kg_id = kg if isinstance(kg, int) else kg.pk
    with connection.cursor() as cursor:
        cursor.execute("SELECT head_id, relation_id, tail_id FROM verifier_triple WHERE kg_id = %s", [kg_id])
        rows = cursor.fetchall()
    return np.array(rows, dtype=np.int64).reshape(-1, 3)


def training_data(kg: KnowledgeGraph, *, folds: int, seed: int = 0) -> TrainingData:
    """The KG's current triples, indexed, with their folds and the dataset's validation split."""
    entity_rows = np.array(sorted(Entity.objects.filter(kg=kg).values_list("pk", flat=True)), dtype=np.int64)
    relation_rows = np.array(sorted(Relation.objects.filter(kg=kg).values_list("pk", flat=True)), dtype=np.int64)
    rows = kg_triples(kg)
    data = TrainingData(entity_rows, relation_rows, _no_triples(), fold_of(rows, folds), folds, seed=seed)
    data.triples = data.to_indices(rows)
    validation = dataset_validation(kg)
    if validation is not None and len(validation):
        data.validation = data.to_indices(validation)
    return data
