"""What a triple's two ends are called: the embedding of each entity's "label, description", for the audit's
name features. The ends of a real fact are nearly always about related things (a breed and its species, a film and
its director's country), where a random or replaced triple joins two unrelated ones (``name_similarity``); and an
end resembles the others that play its part (``NameContext``): a genus filed under "dicot genus" reads like the
other genera filed there, a noun given a verb's relation reads like none of that relation's subjects.

Entities are embedded once (all-MiniLM-L6-v2, the encoder the memory bank uses) and kept on the row; the loader
resets a vector when its entity's label or description changes. An entity whose label is only its id and which has
no description has no name to compare, and a KG with more named entities than ``MAX_NAMED`` is audited without
names (embedding them would take longer than the rest of the audit).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from django.db.models import F, Q
from scipy import sparse

from verifier.memory import encoder
from verifier.models import Entity, KnowledgeGraph

MAX_NAMED = 250_000
BATCH = 2048


def named(kg: KnowledgeGraph):
    """The KG's entities that have a name: a description, or a label other than the id."""
    return Entity.objects.filter(kg=kg).filter(Q(description__gt="") | (Q(label__gt="") & ~Q(label=F("external_id"))))


def text_of(label: str, description: str) -> str:
    return f"{label}, {description}" if description else label


def embed_names(kg: KnowledgeGraph, *, report: Callable[[int, int], None] | None = None) -> int:
    """Embed the named entities that have no vector yet (none when the KG has more than MAX_NAMED named ones);
    ``report(done, total)`` after each batch. Returns how many were embedded."""
    if named(kg).count() > MAX_NAMED:
        return 0
    missing = list(named(kg).filter(embedding__isnull=True).only("pk", "label", "description"))
    for start in range(0, len(missing), BATCH):
        batch = missing[start:start + BATCH]
        for entity, vector in zip(batch, encoder.encode([text_of(e.label, e.description) for e in batch]), strict=True):
            entity.embedding = vector
        Entity.objects.bulk_update(batch, ["embedding"], batch_size=1000)
        if report:
            report(start + len(batch), len(missing))
    return len(missing)


def name_vectors(kg: KnowledgeGraph, entity_rows: np.ndarray) -> np.ndarray | None:
    """Unit vectors (float16) of the entities ``entity_rows`` (ascending row ids), a row of NaN for an entity without
    one; None when no entity of the KG has one."""
    stored = Entity.objects.filter(kg=kg, embedding__isnull=False).values_list("pk", "embedding")
    out = None
    for pk, vector in stored.iterator(chunk_size=5000):
        if out is None:
            out = np.full((len(entity_rows), encoder.DIMENSIONS), np.nan, dtype=np.float16)
        at = np.searchsorted(entity_rows, pk)
        if at < len(entity_rows) and entity_rows[at] == pk:
            out[at] = np.asarray(vector, dtype=np.float16)
    return out


class NameContext:
    """How much each end of a triple reads like the entities that play its part in the KG, by the cosine of its name
    vector with the mean vector of: the relation's other subjects (values), and the other subjects of the relation
    with the same value (the other values for the same subject). The triple itself is left out of every mean, so a
    fact and a triple the KG lacks are described alike. NaN where an end is unnamed or has no such peers."""

    FEATURES = ["head_like_subjects", "tail_like_values", "head_like_co_subjects", "tail_like_co_values"]
    SLICE = 8192

    def __init__(self, triples: np.ndarray, vectors: np.ndarray, num_relations: int):
        self.vectors = np.nan_to_num(vectors.astype(np.float32))
        self.is_named = ~np.isnan(vectors[:, 0])
        self._named = self.is_named.astype(np.float32)  # 1 per named entity: counts the named by a product
        h, r, t = np.asarray(triples, dtype=np.int64).reshape(-1, 3).T
        entities = len(vectors)
        self.relations = num_relations
        # Per relation: the sum of its subjects' (values') vectors over its facts, and how many were named.
        self._subjects = self._grouped(r, h, num_relations, entities)
        self._values = self._grouped(r, t, num_relations, entities)
        # Per (value, relation): its subjects; per (subject, relation): its values.
        self._by_value_keys, self._co_subjects = self._keyed(t * num_relations + r, h, entities)
        self._by_subject_keys, self._co_values = self._keyed(h * num_relations + r, t, entities)

    def _grouped(self, group: np.ndarray, member: np.ndarray, groups: int, entities: int) -> tuple[np.ndarray, np.ndarray]:
        matrix = sparse.csr_matrix((np.ones(len(group), dtype=np.float32), (group, member)), shape=(groups, entities))
        return np.asarray(matrix @ self.vectors), np.asarray(matrix @ self._named).ravel()

    @staticmethod
    def _keyed(keys: np.ndarray, member: np.ndarray, entities: int) -> tuple[np.ndarray, sparse.csr_matrix]:
        unique, row = np.unique(keys, return_inverse=True)
        matrix = sparse.csr_matrix((np.ones(len(keys), dtype=np.float32), (row, member)), shape=(len(unique), entities))
        matrix.data[:] = 1.0
        return unique, matrix

    def _lookup(self, unique: np.ndarray, matrix: sparse.csr_matrix, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        at = np.clip(np.searchsorted(unique, keys), 0, max(len(unique) - 1, 0))
        found = (unique[at] == keys) if len(unique) else np.zeros(len(keys), dtype=bool)
        rows = matrix[at[found]] if found.any() else None
        sums = np.zeros((len(keys), self.vectors.shape[1]), dtype=np.float32)
        counts = np.zeros(len(keys), dtype=np.float32)
        if rows is not None:
            sums[found] = rows @ self.vectors
            counts[found] = np.asarray(rows @ self._named).ravel()
        return sums, counts

    def _cosine(self, end: np.ndarray, sums: np.ndarray, counts: np.ndarray) -> np.ndarray:
        norms = np.linalg.norm(sums, axis=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            out = np.einsum("ij,ij->i", self.vectors[end], sums) / norms
        return np.where((counts > 0) & (norms > 0) & self.is_named[end], out, np.nan).astype(np.float32)

    def describe(self, triples: np.ndarray, own: np.ndarray) -> np.ndarray:
        """(n, 4) FEATURES of index triples; ``own``: whether each is a triple of the KG (left out of its peers). In
        slices of ``SLICE`` triples, so memory stays a few name vectors per triple of one slice."""
        triples = np.asarray(triples, dtype=np.int64).reshape(-1, 3)
        out = np.full((len(triples), len(self.FEATURES)), np.nan, dtype=np.float32)
        for start in range(0, len(triples), self.SLICE):
            out[start:start + self.SLICE] = self._describe(triples[start:start + self.SLICE], own[start:start + self.SLICE])
        return out

    def _describe(self, triples: np.ndarray, own: np.ndarray) -> np.ndarray:
        h, r, t = triples.T
        own = own.astype(np.float32)
        head_own = (own * self.is_named[h])[:, None]
        tail_own = (own * self.is_named[t])[:, None]
        columns = [
            self._cosine(h, self._subjects[0][r] - head_own * self.vectors[h], self._subjects[1][r] - head_own[:, 0]),
            self._cosine(t, self._values[0][r] - tail_own * self.vectors[t], self._values[1][r] - tail_own[:, 0]),
        ]
        sums, counts = self._lookup(self._by_value_keys, self._co_subjects, t * self.relations + r)
        columns.append(self._cosine(h, sums - head_own * self.vectors[h], counts - head_own[:, 0]))
        sums, counts = self._lookup(self._by_subject_keys, self._co_values, h * self.relations + r)
        columns.append(self._cosine(t, sums - tail_own * self.vectors[t], counts - tail_own[:, 0]))
        return np.column_stack(columns)
