"""What the rules mined from a KG (verifier/structure/rules.py) say about one triple.

``rule_evidence`` reads a triple through the mined rules of its relation — the rules whose body holds
between its ends, and the evidence against it (another value of a near-functional relation, a type
outside the relation's domain or range, a rule predicting a different value) — with the triple itself
(and its reverse reading) never used as an edge of anything shown. ``rule_features`` turns that into the
few numbers a calibrated classifier weighs.
"""

from __future__ import annotations

import heapq
import json
import math
import threading
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from django.db import connection

from verifier.kg.base import Edge, KGPath, PathStep, Ref
from verifier.kg.store import shared_labels
from verifier.models import EntityType, KnowledgeGraph, Relation
from verifier.structure.rules import MIN_SUPPORT, Atom, RowTriple, describe_rule

NEAR_FUNCTIONAL = 0.9  # AMIE functionality (#distinct subjects / #facts) from which another value conflicts
GROUNDINGS_SHOWN = 3
FAN_OUT = 20  # intermediate entities followed per rule when looking for other predicted values
VALUES_PER_STEP = 5



@dataclass(frozen=True)
class Rule:
    """A stored rule (MinedRule), with its description."""

    id: int
    relation: int
    body: tuple[Atom, ...]
    support: int
    head_coverage: float
    std_confidence: float
    pca_confidence: float
    text: str


@dataclass(frozen=True)
class Grounding:
    """One instance of a rule body walked from x to y: ``path`` for display (external ids, labels, the
    direction each edge is walked), ``rows`` the same edges as (head, relation, tail) row ids."""

    path: KGPath
    rows: tuple[RowTriple, ...]


@dataclass(frozen=True)
class RuleMatch:
    """A rule whose body holds from the head to ``value``: the tail under test (supporting) or another
    entity (competing: the rule predicts a different value of a near-functional relation)."""

    rule: Rule
    value: Ref
    groundings: tuple[Grounding, ...]


@dataclass(frozen=True)
class OtherValue:
    """A stated fact giving a near-functional relation another value: r(h, t′) ("tail" side), or r(h′, t)
    for a near inverse-functional one ("head" side). ``functionality`` is that side's AMIE functionality."""

    side: Literal["tail", "head"]
    fact: Grounding
    functionality: float


@dataclass(frozen=True)
class TypeViolation:
    """The head (domain) or tail (range) has types, none of which the relation's domain / range lists."""

    side: Literal["domain", "range"]
    entity: Ref
    entity_types: tuple[Ref, ...]
    expected: tuple[Ref, ...]
    derived: bool  # the domain / range was derived from observed facts, not declared by the source


@dataclass
class RuleEvidence:
    """What the mined rules and the relation's statistics say about one triple.

    Lists are best first and cut at the ``limit`` asked for; ``*_confidences`` keep the PCA confidence of
    every matching rule (one per competing rule), for features."""

    triple: Edge
    rows: RowTriple
    rules_of_relation: int = 0  # rules mined for the relation
    supporting: list[RuleMatch] = field(default_factory=list)
    supporting_confidences: list[float] = field(default_factory=list)
    competing: list[RuleMatch] = field(default_factory=list)
    competing_confidences: list[float] = field(default_factory=list)
    other_values: list[OtherValue] = field(default_factory=list)
    violations: list[TypeViolation] = field(default_factory=list)
    functionality: float = 0.0
    inverse_functionality: float = 0.0

    @property
    def has_evidence_against(self) -> bool:
        return bool(self.competing or self.other_values or self.violations)


@dataclass(frozen=True)
class _RelationInfo:
    ref: Ref
    domain: tuple[str, ...]
    range: tuple[str, ...]
    derived: bool
    functionality: float  # #distinct subjects / #facts
    inverse_functionality: float  # #distinct objects / #facts


_relations_cache: dict[tuple[int, int, float], dict[int, _RelationInfo]] = {}
_cache_lock = threading.Lock()


def _relations(kg: KnowledgeGraph) -> dict[int, _RelationInfo]:
    """Labels, schema and functionality of the KG's relations, computed once per process and KG version."""
    key = (kg.pk, kg.version, kg.loaded_at.timestamp() if kg.loaded_at else 0.0)
    with _cache_lock:
        if key in _relations_cache:
            return _relations_cache[key]
    with connection.cursor() as cursor:
        cursor.execute("""SELECT relation_id, count(DISTINCT head_id)::float / count(*), count(DISTINCT tail_id)::float / count(*)
                          FROM verifier_triple WHERE kg_id = %s GROUP BY relation_id""", [kg.pk])
        functionality = {r: (heads, tails) for r, heads, tails in cursor.fetchall()}
    info = {pk: _RelationInfo(Ref(ext, label), tuple(domain), tuple(range_), source == "derived", *functionality.get(pk, (0.0, 0.0)))
            for pk, ext, label, domain, range_, source in Relation.objects.filter(kg=kg).values_list(
                "pk", "external_id", "label", "domain", "range", "schema_source")}
    with _cache_lock:
        for stale in [k for k in _relations_cache if k[0] == kg.pk]:
            del _relations_cache[stale]
        _relations_cache[key] = info
    return info


def _rules_of(kg: KnowledgeGraph, relation_row: int, relations: dict[int, _RelationInfo]) -> list[Rule]:
    labels = {pk: info.ref.name for pk, info in relations.items()}
    with connection.cursor() as cursor:  # rule_kg_relation_idx; read each call, so a re-mined set is seen at once
        cursor.execute("""SELECT id, body::text, support, head_coverage, std_confidence, pca_confidence FROM verifier_minedrule
                          WHERE kg_id = %s AND kg_version = %s AND relation_id = %s
                          ORDER BY pca_confidence DESC, support DESC, id""", [kg.pk, kg.version, relation_row])
        rows = cursor.fetchall()
    rules = []
    for pk, body, support, coverage, std, pca in rows:
        atoms = tuple((int(r), bool(f)) for r, f in json.loads(body))
        rules.append(Rule(pk, relation_row, atoms, support, coverage, std, pca, describe_rule(relation_row, atoms, labels)))
    return rules


def _edge(start: int, atom: Atom, end: int) -> RowTriple:
    """The KG edge an atom stands for when walked from ``start`` to ``end``."""
    relation, forward = atom
    return (start, relation, end) if forward else (end, relation, start)


def _query_arguments(rules: Sequence[Rule], h: int, r: int, t: int) -> dict:
    first = [rule.body[0] for rule in rules]
    second = [rule.body[1] if len(rule.body) == 2 else (None, None) for rule in rules]
    relations = lambda atoms, forward: sorted({row for row, f in atoms if row is not None and f == forward})  # noqa: E731
    return {"k": list(range(len(rules))), "r1": [a[0] for a in first], "f1": [a[1] for a in first],
            "r2": [a[0] for a in second], "f2": [a[1] for a in second], "h": h, "r": r, "t": t,
            "a1f": relations(first, True), "a1b": relations(first, False), "a2f": relations(second, True), "a2b": relations(second, False)}


# Walks from h along the rules' first atoms and into t along their second atoms, as (z, relation, forward),
# read from the (head, relation, tail) and covering (tail, relation) indexes; the query triple's edge
# (either reading) is never walked.
_AT_HEAD = """SELECT tail_id AS z, relation_id AS r, true AS f FROM verifier_triple
      WHERE head_id = %(h)s AND relation_id = ANY(%(a1f)s::int[]) AND NOT (relation_id = %(r)s AND tail_id = %(t)s)
      UNION ALL
      SELECT head_id, relation_id, false FROM verifier_triple
      WHERE tail_id = %(h)s AND relation_id = ANY(%(a1b)s::int[]) AND NOT (relation_id = %(r)s AND head_id = %(t)s)"""
_AT_TAIL = """SELECT head_id AS z, relation_id AS r, true AS f FROM verifier_triple
      WHERE tail_id = %(t)s AND relation_id = ANY(%(a2f)s::int[])
      UNION ALL
      SELECT tail_id, relation_id, false FROM verifier_triple WHERE head_id = %(t)s AND relation_id = ANY(%(a2b)s::int[])"""


def _supporting_rows(rules: Sequence[Rule], h: int, r: int, t: int) -> list[tuple[int, int | None]]:
    """(rule index, z) for body instances between h and t (z None for one-atom bodies), at most
    GROUNDINGS_SHOWN per rule: both ends are read (one index range each) and met on z. The meeting is a
    FULL JOIN behind an OFFSET 0 fence, which Postgres can only run as a hash or merge join: row estimates
    for a hub are far too low, and an inner join then becomes a nested loop rescanning the hub per row."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"""WITH a AS MATERIALIZED ({_AT_HEAD}),
                b AS MATERIALIZED (SELECT * FROM ({_AT_TAIL}) walks WHERE EXISTS (SELECT FROM a))  -- a hub t is read only if needed
                SELECT z, r1, f1, r2, f2 FROM (
                  SELECT a.z, a.r AS r1, a.f AS f1, b.z AS zb, b.r AS r2, b.f AS f2 FROM a FULL JOIN b ON a.z = b.z OFFSET 0) met
                WHERE z IS NOT NULL AND zb IS NOT NULL AND z <> %(h)s AND z <> %(t)s
                UNION ALL
                SELECT NULL, r, f, NULL, NULL FROM a WHERE z = %(t)s""",
            _query_arguments(rules, h, r, t))
        met = cursor.fetchall()
    by_body: dict[tuple[Atom, ...], list[int | None]] = defaultdict(list)
    for z, r1, f1, r2, f2 in met:
        by_body[((r1, f1),) if r2 is None else ((r1, f1), (r2, f2))].append(z)
    found: list[tuple[int, int | None]] = []
    for k, rule in enumerate(rules):
        middles = by_body.get(rule.body, [])
        found += [(k, z) for z in heapq.nsmallest(GROUNDINGS_SHOWN, middles, key=lambda z: z or 0)]
    return found


def _competing_rows(rules: Sequence[Rule], h: int, r: int, t: int) -> list[tuple[int, int | None, int]]:
    """(rule index, z, y) for body instances from h to some y ∉ {h, t}: the values the rules predict
    instead. At most FAN_OUT intermediate entities per rule and VALUES_PER_STEP values per entity."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"""WITH body AS (SELECT * FROM unnest(%(k)s::int[], %(r1)s::int[], %(f1)s::bool[], %(r2)s::int[], %(f2)s::bool[])
                               AS b(k, r1, f1, r2, f2)),
                at_head AS ({_AT_HEAD}),
                first AS (SELECT body.k, body.r2, body.f2, at_head.z FROM body
                          JOIN at_head ON at_head.r = body.r1 AND at_head.f = body.f1 WHERE at_head.z <> %(h)s),
                ranked AS (SELECT * FROM (SELECT first.*, row_number() OVER (PARTITION BY k ORDER BY z) AS n FROM first) f
                           WHERE n <= %(fan)s)
                SELECT k, NULL::int, z FROM ranked WHERE r2 IS NULL AND z <> %(t)s
                UNION ALL
                SELECT f.k, f.z, s.y FROM ranked f CROSS JOIN LATERAL (
                  (SELECT tail_id AS y FROM verifier_triple WHERE f.f2 AND head_id = f.z AND relation_id = f.r2
                     AND tail_id <> %(h)s AND tail_id <> %(t)s LIMIT %(values)s)
                  UNION ALL
                  (SELECT head_id FROM verifier_triple WHERE NOT f.f2 AND tail_id = f.z AND relation_id = f.r2
                     AND head_id <> %(h)s AND head_id <> %(t)s LIMIT %(values)s)) s
                WHERE f.r2 IS NOT NULL""",
            {**_query_arguments(rules, h, r, t), "fan": FAN_OUT, "values": VALUES_PER_STEP})
        return sorted(cursor.fetchall(), key=lambda row: (row[0], row[2], row[1] or 0))


def _other_values(h: int, r: int, t: int, *, tails: bool, heads: bool, limit: int) -> list[tuple[str, RowTriple]]:
    """Stated facts r(h, t′ ≠ t) when ``tails``, r(h′ ≠ h, t) when ``heads``."""
    with connection.cursor() as cursor:
        cursor.execute(
            """(SELECT 'tail', head_id, tail_id FROM verifier_triple WHERE %(tails)s AND head_id = %(h)s AND relation_id = %(r)s
                  AND tail_id <> %(t)s ORDER BY tail_id LIMIT %(n)s)
               UNION ALL
               (SELECT 'head', head_id, tail_id FROM verifier_triple WHERE %(heads)s AND tail_id = %(t)s AND relation_id = %(r)s
                  AND head_id <> %(h)s LIMIT %(n)s)""",
            {"h": h, "r": r, "t": t, "tails": tails, "heads": heads, "n": limit})
        return [(side, (head, r, tail)) for side, head, tail in cursor.fetchall()]


def _entities(kg: KnowledgeGraph, rows: set[int]) -> dict[int, tuple[Ref, tuple[str, ...]]]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT id, external_id, label, types FROM verifier_entity WHERE id = ANY(%s)", [sorted(rows)])
        found = cursor.fetchall()
    shared = shared_labels(kg.pk, (label for _, _, label, _ in found))
    return {pk: (Ref(ext, label).marked(shared), tuple(types or ())) for pk, ext, label, types in found}


class _Grounder:
    """Turns row-id edges into Groundings with ids and labels; refuses the query triple (either reading)."""

    def __init__(self, entities: dict[int, tuple[Ref, tuple[str, ...]]], relations: dict[int, _RelationInfo],
                 leaking: set[RowTriple]):
        self.entities, self.relations, self.leaking = entities, relations, leaking

    def ref(self, row: int) -> Ref:
        return self.entities[row][0]

    def __call__(self, start: int, body: Sequence[Atom], ends: Sequence[int]) -> Grounding | None:
        rows, steps, here = [], [], start
        for atom, end in zip(body, ends, strict=True):
            edge = _edge(here, atom, end)
            if edge in self.leaking:
                return None
            head, relation, tail = edge
            rows.append(edge)
            steps.append(PathStep(Edge(self.ref(head), self.relations[relation].ref, self.ref(tail)), atom[1]))
            here = end
        return Grounding(KGPath(tuple(steps)), tuple(rows))


def _supporting(rules: list[Rule], found: list[tuple[int, int | None]], h: int, t: int, ground: _Grounder) -> list[RuleMatch]:
    by_rule: dict[int, list[Grounding]] = {}
    for k, z in found:
        grounding = ground(h, rules[k].body, [t] if z is None else [z, t])
        if grounding is not None:
            by_rule.setdefault(k, []).append(grounding)
    return [RuleMatch(rules[k], ground.ref(t), tuple(g)) for k, g in sorted(by_rule.items())]


def _competing(rules: list[Rule], found: list[tuple[int, int | None, int]], h: int, ground: _Grounder) -> list[RuleMatch]:
    """One match per rule: the other value it reaches by the most paths (shown with up to three)."""
    by_rule: dict[int, dict[int, list[Grounding]]] = {}
    for k, z, y in found:
        grounding = ground(h, rules[k].body, [y] if z is None else [z, y])
        if grounding is not None:
            by_rule.setdefault(k, {}).setdefault(y, []).append(grounding)
    matches = []
    for k, values in sorted(by_rule.items()):
        value, groundings = max(values.items(), key=lambda item: (len(item[1]), -item[0]))
        matches.append(RuleMatch(rules[k], ground.ref(value), tuple(groundings[:GROUNDINGS_SHOWN])))
    return matches


def _violations(kg: KnowledgeGraph, info: _RelationInfo, head: tuple[Ref, tuple[str, ...]],
                tail: tuple[Ref, tuple[str, ...]]) -> list[TypeViolation]:
    found = []
    for side, (ref, types), expected in (("domain", head, info.domain), ("range", tail, info.range)):
        if types and expected and not set(types) & set(expected):
            found.append((side, ref, types, expected))
    if not found:
        return []
    wanted = {x for _, _, types, expected in found for x in (*types, *expected)}
    labels = dict(EntityType.objects.filter(kg=kg, external_id__in=wanted).values_list("external_id", "label"))
    refs = lambda ids: tuple(Ref(x, labels.get(x, "")) for x in ids)  # noqa: E731
    return [TypeViolation(side, ref, refs(types), refs(expected), info.derived) for side, ref, types, expected in found]


def _leave_one_out(matches: list[RuleMatch], h: int, r: int, t: int) -> tuple[list[RuleMatch], list[float]]:
    """The supporting rules and their PCA confidences as if the KG did not state (h, r, t): where it does, each rule
    whose body holds between h and t counted the triple among its instances, so its support loses one (a rule then
    below the miner's minimum support would not exist) and its confidence is recomputed — a fact is weighed exactly as
    a triple the KG lacks, and no rule owes its support to the triple it speaks for."""
    if not matches:
        return matches, []
    with connection.cursor() as cursor:
        cursor.execute("""SELECT EXISTS (SELECT FROM verifier_triple WHERE head_id = %(h)s AND relation_id = %(r)s AND tail_id = %(t)s),
                                 EXISTS (SELECT FROM verifier_triple WHERE head_id = %(h)s AND relation_id = %(r)s AND tail_id <> %(t)s)""",
                       {"h": h, "r": r, "t": t})
        stated, other_value = cursor.fetchone()
    if not stated:
        return matches, [m.rule.pca_confidence for m in matches]
    kept, confidences = [], []
    for match in matches:
        support = match.rule.support - 1
        if support < MIN_SUPPORT:
            continue
        body = match.rule.support / match.rule.pca_confidence if match.rule.pca_confidence else float(match.rule.support)
        kept.append(match)
        confidences.append(min(1.0, support / max(body - (0 if other_value else 1), 1.0)))
    return kept, confidences


def rule_evidence(kg: KnowledgeGraph, head_row: int, relation_row: int, tail_row: int, *, limit: int = 5) -> RuleEvidence:
    """What the rules mined for the KG's current version and the relation's statistics say about (h, r, t),
    given as row ids. The triple and its reverse reading are never an edge of a grounding or another value, and a
    triple the KG states is weighed as if it did not (``_leave_one_out``)."""
    h, r, t = head_row, relation_row, tail_row
    relations = _relations(kg)
    info = relations[r]
    rules = _rules_of(kg, r, relations)
    functional, inverse = info.functionality >= NEAR_FUNCTIONAL, info.inverse_functionality >= NEAR_FUNCTIONAL
    supporting_rows = _supporting_rows(rules, h, r, t) if rules else []
    competing_rows = _competing_rows(rules, h, r, t) if rules and functional else []
    leaking = {(h, r, t), (t, r, h)}
    others = [(side, edge) for side, edge in _other_values(h, r, t, tails=functional, heads=inverse, limit=limit)
              if edge not in leaking]
    rows = {h, t} | {z for _, z in supporting_rows if z is not None}
    rows |= {x for _, z, y in competing_rows for x in (z, y) if x is not None} | {x for _, e in others for x in (e[0], e[2])}
    entities = _entities(kg, rows)
    ground = _Grounder(entities, relations, leaking)
    supporting, confidences = _leave_one_out(_supporting(rules, supporting_rows, h, t, ground), h, r, t)
    competing = _competing(rules, competing_rows, h, ground)
    other_values = [OtherValue(side, ground(edge[0], [(r, True)], [edge[2]]),
                               info.functionality if side == "tail" else info.inverse_functionality)
                    for side, edge in others]
    return RuleEvidence(
        triple=Edge(ground.ref(h), info.ref, ground.ref(t)), rows=(h, r, t), rules_of_relation=len(rules),
        supporting=supporting[:limit], supporting_confidences=confidences,
        competing=competing[:limit], competing_confidences=[m.rule.pca_confidence for m in competing],
        other_values=other_values, violations=_violations(kg, info, entities[h], entities[t]),
        functionality=info.functionality, inverse_functionality=info.inverse_functionality)


# ================================================================================================ features

# What a classifier (the ``rules`` baseline, the verdict confidence) reads from a RuleEvidence, in order:
RULE_FEATURES = [
    "support_noisy_or",  # 1 − Π(1 − PCA confidence) over the rules whose body holds between h and t
    "support_best",  # the best of those confidences (0 when none)
    "support_rules",  # log(1 + number of those rules)
    "competing_noisy_or",  # the same noisy-or over rules predicting another value of a near-functional relation
    "functional_conflict",  # functionality of the side where another value is stated (0 when none)
    "domain_violation",  # 1 when the head's types miss the relation's domain
    "range_violation",  # 1 when the tail's types miss the relation's range
]


def _noisy_or(confidences: Sequence[float]) -> float:
    return 1.0 - math.prod(1.0 - min(max(c, 0.0), 1.0) for c in confidences)


def rule_features(evidence: RuleEvidence) -> list[float]:
    """The RULE_FEATURES of one triple's rule evidence."""
    support = evidence.supporting_confidences
    sides = {v.side: v.functionality for v in evidence.other_values}
    violated = {v.side for v in evidence.violations}
    return [
        _noisy_or(support),
        max(support, default=0.0),
        math.log1p(len(support)),
        _noisy_or(evidence.competing_confidences),
        max(sides.values(), default=0.0),
        float("domain" in violated),
        float("range" in violated),
    ]
