"""A claim benchmark written from a loaded KG, so claim verification can be measured offline.

Claims are written from a split's true triples (by default the dataset's validation split: triples the KG does not
state) and from type-constrained corruptions of them (verifier/benchmarks/sampling.py), with one template per
category over the relations' labels:

- one-hop       "The genre of A is B." / "A is member of B."      a split triple / a corruption of it
- negation      "The genre of A is not B."                         a corruption / a split triple
- conjunction   "The P of A is B, and the Q of A is C."            a split triple and a KG fact of the same head;
                                                                  false: the split triple corrupted
- multi-hop     "The P of A is something, and its Q is C."         A -P-> M (split), M -Q-> C (KG), C ≠ A;
                                                                  false: C replaced by an entity of its type
- existence     "A has a known P." / "A is member of something."  A has a P-fact in the KG / a P that no
                                                                  entity sharing a type with A has

Each category is half true, half false. Every line of the JSONL names the claim, its label and category, the
entities the claim names (for entity correctness) and the triples it stands for. No triple something was fitted
on (verifier/evaluation/datasets.fitted_triples) is drawn.
"""

from __future__ import annotations

import json
import random
from collections import defaultdict
from dataclasses import asdict, dataclass
from pathlib import Path

from verifier.benchmarks.datasets import fitted_triples, kg_triple_set, negative_sampler, read_rows
from verifier.benchmarks.sampling import NegativeSampler, distinct
from verifier.models import Claim, Entity, KnowledgeGraph, Relation

CATEGORIES = tuple(Claim.Category.values)


@dataclass
class GeneratedClaim:
    claim: str
    label: bool
    category: str
    entities: list[str]  # external ids of the entities the claim names
    parts: list[list]  # [head, relation, tail, negated] external ids; the middle of a multi-hop is "unknown_1"
    source: str


PREPOSITIONS = ("of", "by", "at", "in", "for", "with", "to", "from", "on", "as")


class _Writer:
    def __init__(self, kg: KnowledgeGraph):
        self.entity = {pk: (ext, label or ext) for pk, ext, label in
                       Entity.objects.filter(kg=kg).values_list("id", "external_id", "label")}
        self.relation = {pk: (ext, label or ext) for pk, ext, label in
                         Relation.objects.filter(kg=kg).values_list("id", "external_id", "label")}

    def e(self, pk) -> str:
        return self.entity[pk][1]

    def r(self, pk) -> str:
        return self.relation[pk][1]

    def clause(self, h, r, t, negated: bool = False) -> str:
        """"The genre of A is B" for a noun label, "A is member of B" for a label ending in a preposition;
        ``h`` or ``t`` may be text instead of an entity."""
        head, tail = (self.e(x) if isinstance(x, int) else x for x in (h, t))
        label, neg = self.r(r), "not " if negated else ""
        if label.rsplit(" ", 1)[-1] in PREPOSITIONS:
            return f"{head} is {neg}{label} {tail}"
        if head == "it":
            return f"its {label} is {neg}{tail}"
        return f"the {label} of {head} is {neg}{tail}"

    def ids(self, *pks) -> list[str]:
        return [self.entity[pk][0] for pk in pks]

    def part(self, h, r, t, negated=False) -> list:
        head = self.entity[h][0] if isinstance(h, int) else h
        tail = self.entity[t][0] if isinstance(t, int) else t
        return [head, self.relation[r][0], tail, negated]


def generate(kg: KnowledgeGraph, positives_path: Path, *, n: int, seed: int = 0, types: str = "auto") -> list[GeneratedClaim]:
    """``n`` claims (n / 5 per category, half true) from the true triples in ``positives_path``."""
    rng = random.Random(seed)
    in_kg = kg_triple_set(kg)
    rows = read_rows(kg, positives_path)
    fitted = fitted_triples(kg)
    known_true = {(r.head_id, r.relation_id, r.tail_id) for r in rows}
    pool = [t for t in distinct((r.head_id, r.relation_id, r.tail_id) for r in rows) if t not in in_kg and t not in fitted]
    rng.shuffle(pool)
    sampler, _ = negative_sampler(kg, types, in_kg, in_kg | known_true | fitted)
    keys = sampler.type_of
    out_edges: dict[int, list[tuple[int, int]]] = defaultdict(list)
    has_relation = {(h, r) for h, r, _ in in_kg | known_true}
    for h, r, t in in_kg:
        out_edges[h].append((r, t))
    for edges in out_edges.values():
        edges.sort()
    writer, name = _Writer(kg), positives_path.name
    per_category = max(1, n // len(CATEGORIES))
    claims: list[GeneratedClaim] = []
    makers = {"one-hop": _one_hop, "negation": _negation, "conjunction": _conjunction, "multi-hop": _multi_hop,
              "existence": _existence}
    type_relations: dict = defaultdict(set)
    for h, r in has_relation:
        for element in keys.get(h, ()):
            type_relations[element].add(r)
    ctx = _Context(writer, sampler, out_edges, has_relation, keys, type_relations, sorted(writer.relation), rng, name)
    for category in CATEGORIES:
        made: list[GeneratedClaim] = []
        for label in [True, False] * per_category:
            for _ in range(len(pool)):
                triple = pool.pop()
                pool.insert(0, triple)  # a triple may serve several categories, each once
                claim = makers[category](triple, label, ctx)
                if claim is not None:
                    made.append(claim)
                    break
            if len(made) >= per_category:
                break
        true, false = [c for c in made if c.label], [c for c in made if not c.label]
        kept = min(len(true), len(false))  # balanced within the category, true and false alternating
        claims.extend(c for pair in zip(true[:kept], false[:kept], strict=True) for c in pair)
    return claims


@dataclass
class _Context:
    writer: _Writer
    sampler: NegativeSampler
    out_edges: dict  # head pk → [(relation pk, tail pk)] of the KG
    has_relation: set  # (entity pk, relation pk) with a known fact (KG or split)
    keys: dict  # entity pk → fine-grained type
    type_relations: dict  # type (an element of a fine-grained type) → relations an entity of that type has facts of
    relations: list  # every relation pk, sorted
    rng: random.Random
    name: str


def _sentence(clause: str) -> str:
    return f"{clause[0].upper()}{clause[1:]}."


def _source(name, triple, writer) -> str:
    h, r, t = triple
    return f"{name}: {writer.e(h)} / {writer.r(r)} / {writer.e(t)}"


def _one_hop(triple, label, c: _Context):
    if not label:
        negative = c.sampler.corrupt(triple, c.rng)
        if negative is None:
            return None
        triple = negative.triple
    h, r, t = triple
    return GeneratedClaim(_sentence(c.writer.clause(h, r, t)), label, "one-hop", c.writer.ids(h, t),
                          [c.writer.part(h, r, t)], _source(c.name, triple, c.writer))


def _negation(triple, label, c: _Context):
    if label:  # "A is not B" is true of a corruption
        negative = c.sampler.corrupt(triple, c.rng)
        if negative is None:
            return None
        triple = negative.triple
    h, r, t = triple
    return GeneratedClaim(_sentence(c.writer.clause(h, r, t, True)), label, "negation",
                          c.writer.ids(h, t), [c.writer.part(h, r, t, True)], _source(c.name, triple, c.writer))


def _conjunction(triple, label, c: _Context):
    h, r, t = triple
    others = [(r2, t2) for r2, t2 in c.out_edges.get(h, []) if r2 != r and t2 != t]
    if not others:
        return None
    r2, t2 = c.rng.choice(others)
    if not label:
        negative = c.sampler.corrupt(triple, c.rng, sides=("tail",))
        if negative is None:
            return None
        t = negative.triple[2]
    said = [c.writer.clause(h, r, t), c.writer.clause(h, r2, t2)]
    c.rng.shuffle(said)
    text = _sentence(f"{said[0]}, and {said[1]}")
    return GeneratedClaim(text, label, "conjunction", c.writer.ids(h, t, t2),
                          [c.writer.part(h, r, t), c.writer.part(h, r2, t2)], _source(c.name, triple, c.writer))


def _multi_hop(triple, label, c: _Context):
    h, r, m = triple
    hops = [(r2, t) for r2, t in c.out_edges.get(m, []) if t != h]
    if not hops:
        return None
    r2, t = c.rng.choice(hops)
    if not label:
        negative = c.sampler.corrupt((m, r2, t), c.rng, sides=("tail",))
        if negative is None:
            return None
        t = negative.triple[2]
        middles = {m} | {x for r1, x in c.out_edges.get(h, []) if r1 == r}
        if any((x, r2, t) in c.sampler.forbidden for x in middles - {m}):
            return None  # true through another middle entity
    text = _sentence(f"{c.writer.clause(h, r, 'something')}, and {c.writer.clause('it', r2, t)}")
    return GeneratedClaim(text, label, "multi-hop", c.writer.ids(h, t),
                          [c.writer.part(h, r, "unknown_1"), c.writer.part("unknown_1", r2, t)], _source(c.name, triple, c.writer))


def _existence(triple, label, c: _Context):
    h, r, _ = triple
    if label:
        if not any(r2 == r for r2, _ in c.out_edges.get(h, [])):
            return None
        subject = h
    else:  # a relation no entity of the subject's type has a fact of: "Malta has a known spouse"
        shared = set().union(*(c.type_relations.get(element, set()) for element in c.keys.get(h, ())))
        foreign = [r2 for r2 in c.relations if r2 not in shared]
        if not c.keys.get(h) or not foreign:
            return None
        subject, r = h, c.rng.choice(foreign)
    if c.writer.r(r).rsplit(" ", 1)[-1] in PREPOSITIONS:
        text = _sentence(c.writer.clause(subject, r, "something"))
    else:
        text = f"{c.writer.e(subject)} has a known {c.writer.r(r)}."
    return GeneratedClaim(text, label, "existence", c.writer.ids(subject),
                          [c.writer.part(subject, r, "unknown_1")], _source(c.name, triple, c.writer))


def write_jsonl(claims: list[GeneratedClaim], path: Path) -> None:
    with path.open("w", encoding="utf-8") as handle:
        for claim in claims:
            handle.write(json.dumps(asdict(claim), ensure_ascii=False) + "\n")
