"""Horn rules of length ≤ 2 mined from a KG (AMIE's measures), and what they say about one triple.

Mining counts every rule at once instead of refining rules one by one as AMIE does. A rule is
``body ⇒ r(x, y)`` with a body of one atom, ``r1(x, y)`` or ``r1(y, x)``, or two, ``r1(x, z) ∧ r2(z, y)``
with either atom reversible; bodies are written as atoms ``(relation, forward)`` walked from x to y.

- Support: for every fact r(x, y), the bodies that hold between x and y. Length 1: the labels of the
  pair (x, y). Length 2: the paths x – z – y, found by walking the neighbours of whichever end has
  fewer and looking the other hop up in the sorted pair keys; distinct (fact, body) count once.
- Body size (distinct (x, y) the body connects) and PCA body size (those whose x has some r-fact) only
  for bodies whose support passed the thresholds, as sparse products; a cheap lower bound on the PCA
  body size (each x reaches at least as many y as its best z fans out to) drops bodies through hubs
  ("same gender", "same country") before any product is computed.

The measures are AMIE's: tests/verifier/structure/test_rules.py checks the support, body size and PCA body
size of every length-2 rule against CoDEx's own AMIE run (``rules.tsv``). Self-loops are left out of mining
(they would let z or y stand for x), and so are body groundings with y = x. The PCA denominator counts
on x, as the method defines it (AMIE 3 may count on y for a relation more inverse-functional than
functional; every rule of ``rules.tsv`` counts on x).

What the mined rules say about one triple is in verifier/structure/rule_evidence.py.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from django.db import connection, transaction

from verifier.models import KnowledgeGraph, MinedRule
from verifier.structure.dataset import kg_triples

Atom = tuple[int, bool]  # (relation row id, forward: the edge points the way we walk from x to y)
RowTriple = tuple[int, int, int]

MIN_SUPPORT = 2  # a rule needs this many instances
EXPANSION_BUDGET = 4_000_000  # neighbour probes per chunk while counting length-2 support (memory bound)


# ================================================================================================ mining


@dataclass(frozen=True)
class RuleStats:
    """A mined rule with AMIE's counts; relation and body atoms are relation row ids."""

    relation: int
    body: tuple[Atom, ...]
    support: int  # distinct (x, y) with the body and the head
    head_facts: int  # facts of the head relation
    body_size: int  # distinct (x, y) the body connects
    pca_body_size: int  # those whose x has some fact of the head relation

    @property
    def head_coverage(self) -> float:
        return self.support / self.head_facts

    @property
    def std_confidence(self) -> float:
        return self.support / self.body_size

    @property
    def pca_confidence(self) -> float:
        return self.support / self.pca_body_size


def _ranges(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """``concatenate([arange(s, s + n) for s, n in zip(starts, lengths)])``, vectorised."""
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    offsets = np.repeat(starts - (np.cumsum(lengths) - lengths), lengths)
    return offsets + np.arange(total, dtype=np.int64)


class _Graph:
    """Triples as dense indices with every edge walkable both ways. A walk u → v along an edge of relation
    index k has label 2k (forward) or 2k + 1 (against the edge); ``pair_*`` index the distinct (u, v)
    with their labels, sorted by u then v, so neighbours are a slice and adjacency is a binary search."""

    def __init__(self, triples: np.ndarray):
        triples = np.unique(triples, axis=0)
        self.entity_rows, ends = np.unique(triples[:, [0, 2]], return_inverse=True)
        self.relation_rows, relation = np.unique(triples[:, 1], return_inverse=True)
        ends = ends.reshape(-1, 2).astype(np.int64)
        self.x, self.y, self.r = ends[:, 0], ends[:, 1], relation.reshape(-1).astype(np.int64)
        self.n, self.labels = len(self.entity_rows), 2 * len(self.relation_rows)
        u, v = np.concatenate([self.x, self.y]), np.concatenate([self.y, self.x])
        label = np.concatenate([2 * self.r, 2 * self.r + 1])
        key = u * self.n + v
        order = np.lexsort((label, key))
        self.label = label[order]
        self.pair_key, start = np.unique(key[order], return_index=True)
        self.pair_start = np.append(start, len(key)).astype(np.int64)
        self.pair_v = self.pair_key % self.n
        self.node_ptr = np.searchsorted(self.pair_key // self.n, np.arange(self.n + 1)).astype(np.int64)
        self.degree = np.diff(self.node_ptr)
        self.facts = np.bincount(self.r, minlength=len(self.relation_rows))
        self.fan_out = sp.csr_matrix((np.ones(len(u)), (label, u)), shape=(self.labels, self.n))  # walks per label and start
        subjects = sp.csr_matrix((np.ones(len(self.x)), (self.r, self.x)), shape=(len(self.relation_rows), self.n))
        self.subjects = (subjects > 0).astype(np.float64).tocsr()  # relation × entity: x has some fact of r
        self._matrices: dict[int, sp.csr_matrix] = {}

    def pair_index(self, u: np.ndarray, v: np.ndarray) -> np.ndarray:
        """Index of each pair (u, v) among the adjacent pairs, -1 where u and v are not adjacent."""
        keys = u * self.n + v
        index = np.minimum(np.searchsorted(self.pair_key, keys), len(self.pair_key) - 1)
        return np.where(self.pair_key[index] == keys, index, -1)

    def matrix(self, label: int) -> sp.csr_matrix:
        """Adjacency of one walk label: entry (u, v) when u → v is walkable with that label."""
        if label not in self._matrices:
            mask = self.r == label // 2
            rows, cols = (self.x[mask], self.y[mask]) if label % 2 == 0 else (self.y[mask], self.x[mask])
            self._matrices[label] = sp.csr_matrix((np.ones(len(rows), dtype=np.float32), (rows, cols)), shape=(self.n, self.n))
        return self._matrices[label]

    def atom(self, label: int) -> Atom:
        return int(self.relation_rows[label // 2]), label % 2 == 0


def _length1_support(g: _Graph) -> tuple[np.ndarray, np.ndarray]:
    """Support of every (head relation, body label) as keys r · L + label, with counts."""
    pairs = g.pair_index(g.x, g.y)
    lengths = g.pair_start[pairs + 1] - g.pair_start[pairs]
    fact = np.repeat(np.arange(len(g.x)), lengths)
    label = g.label[_ranges(g.pair_start[pairs], lengths)]
    keep = label != 2 * g.r[fact]  # the fact itself is not a body
    return np.unique(g.r[fact[keep]] * g.labels + label[keep], return_counts=True)


def _length2_support(g: _Graph) -> tuple[np.ndarray, np.ndarray]:
    """Support of every (head relation, label 1, label 2) as keys (r · L + l1) · L + l2, with counts."""
    smaller = np.where(g.degree[g.x] <= g.degree[g.y], g.x, g.y)
    cost = g.degree[smaller]
    cumulative = np.cumsum(cost)
    cuts = np.searchsorted(cumulative, np.arange(1, cumulative[-1] // EXPANSION_BUDGET + 1) * EXPANSION_BUDGET)
    bounds = np.unique(np.concatenate([[0], cuts, [len(cost)]]))
    L = g.labels
    keys, counts = [], []
    for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
        facts = np.arange(lo, hi)
        fact = np.repeat(facts, cost[facts])
        z = g.pair_v[_ranges(g.node_ptr[smaller[facts]], cost[facts])]
        first, second = g.pair_index(g.x[fact], z), g.pair_index(z, g.y[fact])
        found = (first >= 0) & (second >= 0)  # z = x or z = y would need a self-loop: never found
        fact, first, second = fact[found], first[found], second[found]
        n1 = g.pair_start[first + 1] - g.pair_start[first]
        n2 = g.pair_start[second + 1] - g.pair_start[second]
        combos = n1 * n2  # every label of hop 1 with every label of hop 2 (usually 1 × 1)
        row = np.repeat(np.arange(len(fact)), combos)
        k = np.arange(int(combos.sum())) - np.repeat(np.cumsum(combos) - combos, combos)
        label1 = g.label[g.pair_start[first][row] + k // n2[row]]
        label2 = g.label[g.pair_start[second][row] + k % n2[row]]
        grounded = np.unique((fact[row] * L + label1) * L + label2)  # a fact counts once per body, whatever z
        chunk_keys, chunk_counts = np.unique(g.r[grounded // (L * L)] * L * L + grounded % (L * L), return_counts=True)
        keys.append(chunk_keys)
        counts.append(chunk_counts)
    unique, inverse = np.unique(np.concatenate(keys), return_inverse=True)
    return unique, np.bincount(inverse, weights=np.concatenate(counts)).astype(np.int64)


def _length1_rules(g: _Graph, need: np.ndarray, min_pca: float) -> list[RuleStats]:
    keys, support = _length1_support(g)
    relation, label = keys // g.labels, keys % g.labels
    pca_body = (g.subjects @ g.fan_out.T).toarray()  # relation × label: Σ over subjects x of x's fan-out
    rules = []
    for r, lab, s in zip(relation, label, support, strict=True):
        if s >= need[r] and s >= min_pca * pca_body[r, lab]:
            rules.append(RuleStats(int(g.relation_rows[r]), (g.atom(int(lab)),), int(s), int(g.facts[r]),
                                   int(g.facts[lab // 2]), int(pca_body[r, lab])))
    return rules


def _length2_rules(g: _Graph, need: np.ndarray, min_pca: float) -> list[RuleStats]:
    keys, support = _length2_support(g)
    relation, body = keys // (g.labels * g.labels), keys % (g.labels * g.labels)
    kept = support >= need[relation]
    relation, body, support = relation[kept], body[kept], support[kept]
    order = np.argsort(body, kind="stable")
    relation, body, support = relation[order], body[order], support[order]
    bodies, starts = np.unique(body, return_index=True)
    rules = []
    for b, lo, hi in zip(bodies, starts, np.append(starts, len(body))[1:], strict=True):
        label1, label2 = int(b // g.labels), int(b % g.labels)
        heads, supports = relation[lo:hi], support[lo:hi]
        first = g.matrix(label1)
        # Each x reaches at least (its best z's fan-out − 1) distinct y ≠ x: a lower bound of the PCA body.
        bound = np.maximum(first.multiply(g.fan_out[label2].toarray()).max(axis=1).toarray().ravel() - 1, 0)
        hopeful = supports >= min_pca * (g.subjects[heads] @ bound)
        if not hopeful.any():
            continue
        reached = first @ g.matrix(label2)
        per_x = np.diff(reached.indptr) - (reached.diagonal() > 0)  # y = x is not a grounding
        pca_bodies = g.subjects[heads[hopeful]] @ per_x
        atoms = (g.atom(label1), g.atom(label2))
        for r, s, pca_body in zip(heads[hopeful], supports[hopeful], pca_bodies, strict=True):
            if s >= min_pca * pca_body:
                rules.append(RuleStats(int(g.relation_rows[r]), atoms, int(s), int(g.facts[r]), int(per_x.sum()), int(pca_body)))
    return rules


def find_rules(triples: np.ndarray, *, min_support: int = MIN_SUPPORT, min_head_coverage: float = 0.01,
               min_pca_confidence: float = 0.1) -> list[RuleStats]:
    """Every rule of length ≤ 2 over (n, 3) row-id triples meeting the three thresholds (no database)."""
    triples = np.asarray(triples, dtype=np.int64).reshape(-1, 3)
    triples = triples[triples[:, 0] != triples[:, 2]]  # self-loops would let z or y stand for x
    if not len(triples):
        return []
    g = _Graph(triples)
    need = np.maximum(min_support, np.ceil(min_head_coverage * g.facts - 1e-9)).astype(np.int64)
    return _length1_rules(g, need, min_pca_confidence) + _length2_rules(g, need, min_pca_confidence)


def mine_rules(kg: KnowledgeGraph, *, min_support: int = MIN_SUPPORT, min_head_coverage: float = 0.01,
               min_pca_confidence: float = 0.1, log: Callable[[str], None] | None = None) -> int:
    """Mine the KG's rules and store them for its current version, replacing every older set; returns how many were
    stored. A rule's support counts every fact it predicts; the evidence about one fact leaves that fact out
    (verifier/structure/rule_evidence.py)."""
    log = log or (lambda message: None)
    triples = kg_triples(kg)
    log(f"Mining rules of length ≤ 2 over {len(triples):,} triples of {kg.name} v{kg.version}…")
    found = find_rules(triples, min_support=min_support, min_head_coverage=min_head_coverage,
                       min_pca_confidence=min_pca_confidence)
    rows = [MinedRule(kg=kg, kg_version=kg.version, relation_id=rule.relation, body=[list(a) for a in rule.body],
                      support=rule.support, head_coverage=rule.head_coverage, std_confidence=rule.std_confidence,
                      pca_confidence=rule.pca_confidence) for rule in found]
    with transaction.atomic():
        MinedRule.objects.filter(kg=kg).delete()
        MinedRule.objects.bulk_create(rows, batch_size=5000)
    with connection.cursor() as cursor:
        # Rule evidence plans its index reads on these statistics: a KG loaded moments ago may have none yet
        # (or those of an emptier table), and the planner then scans all triples for one entity's edges.
        cursor.execute("ANALYZE verifier_triple, verifier_minedrule")
    log(f"Stored {len(rows):,} rules for {kg.name} v{kg.version}.")
    return len(rows)


def describe_rule(relation: int, body: Sequence[Atom], labels: Mapping[int, str]) -> str:
    """``(?x) -[country]-> (?z) -[official language]-> (?y) ⇒ (?x) -[language used]-> (?y)``: the body walked
    from x to y, arrows showing each edge's direction; relations by label (their id when unlabelled)."""
    name = lambda row: labels.get(row) or str(row)  # noqa: E731
    ends = ["(?x)", "(?z)", "(?y)"] if len(body) == 2 else ["(?x)", "(?y)"]
    parts = [ends[0]]
    for (row, forward), end in zip(body, ends[1:], strict=True):
        parts.append(f"-[{name(row)}]-> {end}" if forward else f"<-[{name(row)}]- {end}")
    return f"{' '.join(parts)} ⇒ (?x) -[{name(relation)}]-> (?y)"
