"""What the graph's own statistics say about any triple, for every triple of a KG at once (numpy, no per-triple
Python): how many other values its head has for the relation, whether its ends play that role elsewhere, how
many other edges link them, how functional the relation is, how common the ends' types are in its roles.

Every count about the triple's own ends leaves the triple itself out: a triple the KG states is described as if the KG
lacked it, exactly as a triple it lacks (a corruption, a flagged triple) is, so the two compare fairly. The type
shares, a relation's constants, count it alike for both (``_type_shares``). Memory is a few arrays the size of
the KG (a 5-million-triple KG: about 1 GB at the peak of indexing).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import sparse

GRAPH_FEATURES = [
    "other_tails",  # log(1 + the head's other values of the relation)
    "other_heads",  # log(1 + the tail's other subjects for the relation)
    "head_as_tail",  # log(1 + times the head is a value of the relation)
    "tail_as_head",  # log(1 + times the tail is a subject of the relation)
    "head_degree",  # log(1 + the head's other edges)
    "tail_degree",  # log(1 + the tail's other edges)
    "pair_links",  # log(1 + other edges between the two ends, any relation, either way)
    "functionality",  # distinct subjects / facts of the relation
    "inverse_functionality",  # distinct values / facts
    "relation_share",  # log of the relation's share of the KG's triples
    "head_type_share",  # share of the relation's subjects with the head's type (-1: untyped)
    "tail_type_share",  # share of the relation's values with the tail's type (-1: untyped)
    "head_role_fit",  # how often entities playing the head's other roles are subjects of the relation
    "tail_role_fit",  # how often entities playing the tail's other roles are values of the relation
    "shared_neighbours",  # log(1 + entities linked to both ends)
]


def _keys(*columns: np.ndarray, sizes: tuple[int, ...]) -> np.ndarray:
    """One int64 key per row from columns of small non-negative ints (mixed radix)."""
    key = np.zeros(len(columns[0]), dtype=np.int64)
    for column, size in zip(columns, sizes, strict=True):
        key = key * np.int64(size) + column.astype(np.int64)
    return key


class _Counter:
    """Counts of keys, looked up in bulk by binary search."""

    def __init__(self, keys: np.ndarray):
        self.keys, self.counts = np.unique(keys, return_counts=True)

    def __call__(self, keys: np.ndarray) -> np.ndarray:
        if not len(self.keys):
            return np.zeros(len(keys), dtype=np.int64)
        at = np.clip(np.searchsorted(self.keys, keys), 0, len(self.keys) - 1)
        return np.where(self.keys[at] == keys, self.counts[at], 0)


@dataclass
class Described:
    """Features of a batch of triples (rows as GRAPH_FEATURES) and whether each is a triple of the KG."""

    features: np.ndarray
    in_kg: np.ndarray


class GraphIndex:
    """A KG's triples as dense indices and the counts the features read. ``types``: each entity index's type key (an
    int, -1 for an entity without declared types), or None for a KG without types."""

    def __init__(self, triples: np.ndarray, num_entities: int, num_relations: int, types: np.ndarray | None = None):
        self.triples = np.asarray(triples, dtype=np.int64).reshape(-1, 3)
        self.num_entities, self.num_relations = num_entities, num_relations
        h, r, t = self.triples.T
        E, R = num_entities, num_relations  # noqa: N806 — the sizes of the mixed-radix keys
        self._triple = np.unique(_keys(h, r, t, sizes=(E, R, E)))
        self._hr = _Counter(_keys(h, r, sizes=(E, R)))
        self._rt = _Counter(_keys(t, r, sizes=(E, R)))
        self._degree = np.bincount(np.concatenate([h, t]), minlength=E)
        low, high = np.minimum(h, t), np.maximum(h, t)
        self._pair = _Counter(_keys(low, high, sizes=(E, E)))
        facts = np.bincount(r, minlength=R).astype(float)
        distinct_heads = np.bincount(np.unique(_keys(r, h, sizes=(R, E))) // E, minlength=R)
        distinct_tails = np.bincount(np.unique(_keys(r, t, sizes=(R, E))) // E, minlength=R)
        with np.errstate(divide="ignore", invalid="ignore"):
            self._functionality = np.where(facts > 0, distinct_heads / facts, 0.0)
            self._inverse = np.where(facts > 0, distinct_tails / facts, 0.0)
            self._share = np.log(np.maximum(facts, 1.0) / max(len(self.triples), 1))
        # Roles: (relation, side) of each entity, as counts (E × 2R), and how often a role goes with another over entities.
        roles = sparse.csr_matrix((np.ones(2 * len(h)), (np.concatenate([h, t]), np.concatenate([2 * r, 2 * r + 1]))),
                                  shape=(E, 2 * R))
        roles.sum_duplicates()
        self._roles = roles.astype(np.float32).tocsr()
        present = (self._roles > 0).astype(np.float32)
        together = (present.T @ present).toarray()
        self._given = together / np.maximum(np.diag(together), 1.0)[:, None]  # [b, a]: P(an entity plays a | it plays b)
        adjacency = sparse.csr_matrix((np.ones(2 * len(h), dtype=np.float32), (np.concatenate([h, t]), np.concatenate([t, h]))),
                                      shape=(E, E))
        adjacency.data[:] = 1.0
        self._adjacency = (adjacency > 0).astype(np.float32).tocsr()
        self.types = types
        if types is not None:
            n_types = int(types.max(initial=-1)) + 2
            self._n_types = n_types
            self._head_type = _Counter(_keys(r, types[h] + 1, sizes=(R, n_types)))
            self._tail_type = _Counter(_keys(r, types[t] + 1, sizes=(R, n_types)))
            self._facts = facts

    def in_kg(self, triples: np.ndarray) -> np.ndarray:
        h, r, t = np.asarray(triples, dtype=np.int64).reshape(-1, 3).T
        keys = _keys(h, r, t, sizes=(self.num_entities, self.num_relations, self.num_entities))
        if not len(self._triple):
            return np.zeros(len(keys), dtype=bool)
        at = np.clip(np.searchsorted(self._triple, keys), 0, len(self._triple) - 1)
        return self._triple[at] == keys

    def describe(self, triples: np.ndarray) -> Described:
        """GRAPH_FEATURES of each (head, relation, tail) index triple, itself left out of every count."""
        triples = np.asarray(triples, dtype=np.int64).reshape(-1, 3)
        h, r, t = triples.T
        E, R = self.num_entities, self.num_relations  # noqa: N806
        own = self.in_kg(triples).astype(np.int64)
        loop = (h == t).astype(np.int64)
        columns = [
            np.log1p(self._hr(_keys(h, r, sizes=(E, R))) - own),
            np.log1p(self._rt(_keys(t, r, sizes=(E, R))) - own),
            np.log1p(self._rt(_keys(h, r, sizes=(E, R))) - own * loop),
            np.log1p(self._hr(_keys(t, r, sizes=(E, R))) - own * loop),
            np.log1p(np.maximum(self._degree[h] - own * (1 + loop), 0)),
            np.log1p(np.maximum(self._degree[t] - own * (1 + loop), 0)),
            np.log1p(self._pair(_keys(np.minimum(h, t), np.maximum(h, t), sizes=(E, E))) - own),
            self._functionality[r],
            self._inverse[r],
            self._share[r],
            *self._type_shares(h, r, t),
            self._role_fit(h, 2 * r, own),
            self._role_fit(t, 2 * r + 1, own),
            np.log1p(self._shared(h, t)),
        ]
        return Described(np.column_stack(columns).astype(np.float32), own.astype(bool))

    def _role_fit(self, entities: np.ndarray, role: np.ndarray, own: np.ndarray) -> np.ndarray:
        """For each entity, the share of its other roles' players that also play ``role`` (the triple's own role
        taken out of its counts): an entity whose other roles never go with this one stands out."""
        counts = self._roles[entities].toarray()
        counts[np.arange(len(entities)), role] -= own
        counts = np.maximum(counts, 0.0)
        counts[np.arange(len(entities)), role] = 0.0  # the role itself says nothing about whether it fits
        totals = counts.sum(axis=1)
        fit = (counts * self._given[:, role].T).sum(axis=1) / np.maximum(totals, 1.0)
        return np.where(totals > 0, fit, -1.0)

    def _shared(self, h: np.ndarray, t: np.ndarray) -> np.ndarray:
        """How many entities are linked (any relation, either way) to both ends."""
        return np.asarray(self._adjacency[h].multiply(self._adjacency[t]).sum(axis=1)).ravel()

    def _type_shares(self, h: np.ndarray, r: np.ndarray, t: np.ndarray) -> list[np.ndarray]:
        """The share of the relation's subjects (values) with the head's (tail's) type, over the whole KG and the same
        for a fact and a triple the KG lacks. Leaving a fact out of its own shares would set every fact exactly one
        count below a corruption sharing its types: per relation and type a constant, which a classifier learns as
        "the KG holds this triple" and ranks the KG's own errors with its facts."""
        if self.types is None:
            return [np.full(len(h), -1.0), np.full(len(h), -1.0)]
        R, n = self.num_relations, self._n_types  # noqa: N806
        facts = np.maximum(self._facts[r], 1.0)
        heads = self._head_type(_keys(r, self.types[h] + 1, sizes=(R, n))) / facts
        tails = self._tail_type(_keys(r, self.types[t] + 1, sizes=(R, n))) / facts
        untyped_h, untyped_t = self.types[h] < 0, self.types[t] < 0
        return [np.where(untyped_h, -1.0, heads), np.where(untyped_t, -1.0, tails)]
