"""Drawing balanced test sets: relation-matched positive/negative pairs, and type-constrained negatives.

A negative is made from a true triple by replacing its head or its tail with another entity of the
same fine-grained type — the entity's full set of declared types (CoDEx-S: Wikidata classes), or, for
a KG without types (FB15k-237), the set of relation roles it plays in the KG ("head of r1", "tail of
r2", …). A candidate is never a triple of the KG, never a known true triple of the dataset and never a
negative drawn before. Entities with no type, or whose type no other entity shares, cannot be
replaced; a positive neither of whose ends can be replaced is skipped (and counted).

The *popular* scheme replaces the tail of (h, r, t) with a value r takes for other entities of h's type, drawn
as often as the KG states it (the head likewise, by the tail's type): the wrong answers that look most right,
such as a person's citizenship of a neighbouring country or a common occupation of people like them.

The coarser *role* constraint (Krompaß et al., 2015) replaces the tail of (h, r, t) with another entity the KG
holds as a tail of r (the head likewise): every end of a relation with two values can be replaced. It suits a
small dense KG, whose entities each play a set of roles of their own (UMLS: 29 of 135 entities share theirs).

Everything is plain Python over hashable ids and one ``random.Random``: the same inputs and seed give
the same sample on every machine (candidates are ordered by a caller-given key, not by database ids).
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

Triple = tuple[Hashable, Hashable, Hashable]
TypeKey = frozenset

DEFAULT_MAX_TRIES = 200


def declared_type_keys(entity_types: Mapping[Hashable, Iterable[str]]) -> dict[Hashable, TypeKey]:
    """Fine-grained type = the entity's whole set of declared types; untyped entities get none."""
    return {entity: frozenset(types) for entity, types in entity_types.items() if types}


def relation_signature_keys(triples: Iterable[Triple]) -> dict[Hashable, TypeKey]:
    """Fine-grained type of a KG without types: the set of (relation, role) memberships of each entity,
    i.e. which relations' domains and ranges it belongs to."""
    roles: dict[Hashable, set] = defaultdict(set)
    for head, relation, tail in triples:
        roles[head].add((relation, "head"))
        roles[tail].add((relation, "tail"))
    return {entity: frozenset(memberships) for entity, memberships in roles.items()}


def popular_values(triples: Iterable[Triple], type_of: Mapping[Hashable, TypeKey]) -> dict[tuple, list]:
    """(relation, side, the other end's type) → the values the KG states on that side, once per statement (so a
    draw is as likely as the value is common); the key with type None pools every type."""
    values: dict[tuple, list] = defaultdict(list)
    for head, relation, tail in triples:
        for side, value, other in (("tail", tail, head), ("head", head, tail)):
            values[(relation, side, type_of.get(other))].append(value)
            values[(relation, side, None)].append(value)
    return dict(values)


def relation_roles(triples: Iterable[Triple]) -> dict[tuple[Hashable, str], set]:
    """(relation, "head" or "tail") → the entities the KG holds in that role of the relation."""
    roles: dict[tuple[Hashable, str], set] = defaultdict(set)
    for head, relation, tail in triples:
        roles[(relation, "head")].add(head)
        roles[(relation, "tail")].add(tail)
    return dict(roles)


@dataclass(frozen=True)
class Negative:
    triple: Triple
    source: Triple  # the true triple it was made from
    replaced: str  # "head" or "tail"


@dataclass
class NegativeSampler:
    """Type-constrained corruption of true triples; see the module docstring. With ``roles``
    (``relation_roles``) a replacement shares the replaced end's role in the relation instead of its type."""

    type_of: Mapping[Hashable, TypeKey]
    forbidden: set[Triple]
    sort_key: Callable[[Hashable], object] = str
    max_tries: int = DEFAULT_MAX_TRIES
    roles: Mapping[tuple[Hashable, str], Iterable[Hashable]] | None = None
    popular: Mapping[tuple, Sequence[Hashable]] | None = None  # ``popular_values``: the "popular" scheme
    _groups: dict[Hashable, list[Hashable]] = field(init=False, repr=False)
    _in_roles: set[Hashable] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        groups: dict[Hashable, set] = defaultdict(set)
        if self.popular is not None:
            self._groups = {key: sorted(values, key=self.sort_key) for key, values in self.popular.items() if len(set(values)) > 1}
            self._in_roles = set()
            self.forbidden = set(self.forbidden)
            return
        if self.roles is not None:
            for role, members in self.roles.items():
                groups[role].update(members)
        else:
            for entity, key in self.type_of.items():
                groups[key].add(entity)
        self._groups = {key: sorted(members, key=self.sort_key) for key, members in groups.items() if len(members) > 1}
        self._in_roles = set().union(*self._groups.values()) if self.roles is not None else set()
        self.forbidden = set(self.forbidden)

    def _group_of(self, entity: Hashable, relation: Hashable, side: str, other: Hashable = None) -> list[Hashable] | None:
        if self.popular is not None:  # values popular for entities like the other end, else for any
            return self._groups.get((relation, side, self.type_of.get(other))) or self._groups.get((relation, side, None))
        key = (relation, side) if self.roles is not None else self.type_of.get(entity)
        return None if key is None else self._groups.get(key)

    def replaceable(self, entity: Hashable) -> bool:
        """Whether some corruption could replace ``entity``: its type is shared (or, by role, it plays a role
        another entity plays too)."""
        if self.roles is not None:
            return entity in self._in_roles
        key = self.type_of.get(entity)
        return key is not None and key in self._groups

    def _candidates(self, members: list[Hashable], rng: random.Random) -> Iterable[Hashable]:
        if self.popular is not None:  # drawn with repetition: a common value as often as it is stated
            return (rng.choice(members) for _ in range(self.max_tries))
        if len(members) - 1 <= self.max_tries:
            return rng.sample(members, len(members))
        return (rng.choice(members) for _ in range(self.max_tries))

    def corrupt(self, triple: Triple, rng: random.Random, *, sides: tuple[str, ...] = ("head", "tail")) -> Negative | None:
        """A negative from ``triple`` (side chosen at random among ``sides``, the other tried next), or None."""
        head, relation, tail = triple
        sides = list(sides)
        rng.shuffle(sides)
        for side in sides:
            original, other = (head, tail) if side == "head" else (tail, head)
            members = self._group_of(original, relation, side, other)
            if members is None:
                continue
            for candidate in self._candidates(members, rng):
                if candidate == original:
                    continue
                corrupted = (candidate, relation, tail) if side == "head" else (head, relation, candidate)
                if corrupted[0] == corrupted[2] or corrupted in self.forbidden:
                    continue
                self.forbidden.add(corrupted)  # never drawn twice
                return Negative(corrupted, triple, side)
        return None


def distinct(triples: Iterable[Triple]) -> list[Triple]:
    """The triples without repeats, first occurrence kept (file order is the reproducible order)."""
    return list(dict.fromkeys(triples))


def relation_matched_pairs(positives: Sequence[Triple], negatives: Sequence[Triple], pairs: int,
                           rng: random.Random) -> list[tuple[Triple, Triple]]:
    """Up to ``pairs`` (positive, negative) pairs sharing a relation, so that the relation alone says nothing about
    the label: each relation's shuffled positives are matched one to one with its shuffled negatives (min(#true,
    #false) pairs), and the pairs are drawn uniformly from all relations' together."""
    by_relation: dict[Hashable, tuple[list[Triple], list[Triple]]] = defaultdict(lambda: ([], []))
    for triple in distinct(positives):
        by_relation[triple[1]][0].append(triple)
    for triple in distinct(negatives):
        by_relation[triple[1]][1].append(triple)
    available: list[tuple[Triple, Triple]] = []
    for relation in sorted(by_relation, key=str):
        pos, neg = by_relation[relation]
        available.extend(zip(rng.sample(pos, len(pos)), rng.sample(neg, len(neg)), strict=False))
    return rng.sample(available, min(pairs, len(available)))


def corrupted_pairs(positives: Sequence[Triple], pairs: int, sampler: NegativeSampler,
                    rng: random.Random) -> tuple[list[tuple[Triple, Negative]], int]:
    """Up to ``pairs`` (positive, negative made from it) pairs and the number of positives skipped because
    no same-type replacement existed."""
    drawn: list[tuple[Triple, Negative]] = []
    skipped = 0
    pool = distinct(positives)
    for triple in rng.sample(pool, len(pool)):
        if len(drawn) >= pairs:
            break
        negative = sampler.corrupt(triple, rng)
        if negative is None:
            skipped += 1
            continue
        drawn.append((triple, negative))
    return drawn, skipped
