"""Which fold a triple belongs to: the rule that keeps every structural score honest.

A structural model is K networks; network k learns every KG triple outside fold k. Any triple — a fact the KG
states, a flagged one, a corruption, a benchmark's — is scored by the network of its own fold, which never saw
it. So a flagged KG fact is scored at once, with no retraining, and every KG triple has a score from a model
that did not learn it (what the audit ranks). The fold is a hash of the triple's row ids: the same triple keeps
its fold across KG versions and processes, and folds are near-equal in size whatever the KG's order.
"""

from __future__ import annotations

import numpy as np

DEFAULT_FOLDS = 5

_MIX = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)


def _splitmix(x: np.ndarray) -> np.ndarray:
    """SplitMix64's finaliser: a well-spread 64-bit hash of each value (wrapping arithmetic)."""
    with np.errstate(over="ignore"):
        x = (x + _MIX).astype(np.uint64)
        x = (x ^ (x >> np.uint64(30))) * _M1
        x = (x ^ (x >> np.uint64(27))) * _M2
        return x ^ (x >> np.uint64(31))


def fold_of(triples: np.ndarray, folds: int) -> np.ndarray:
    """The fold (0 … folds-1) of each (head, relation, tail) row-id triple of an (n, 3) array."""
    triples = np.asarray(triples, dtype=np.int64).reshape(-1, 3).astype(np.uint64)
    with np.errstate(over="ignore"):
        key = _splitmix(triples[:, 0])
        key = _splitmix(key ^ triples[:, 1])
        key = _splitmix(key ^ triples[:, 2])
    return (key % np.uint64(folds)).astype(np.int64)


def fold_of_one(head: int, relation: int, tail: int, folds: int) -> int:
    return int(fold_of(np.array([[head, relation, tail]]), folds)[0])
