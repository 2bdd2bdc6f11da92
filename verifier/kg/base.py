"""The protocol every KG backend implements, and the plain values it returns.

Backends (the Postgres local store, a SPARQL endpoint such as Wikidata) answer a handful of questions:
find entities/relations by name, describe one, list an entity's edges, find short paths between two
entities. Tools (verifier/tools/) turn the answers into observations for the model; nothing here knows
about prompts. Ids are the KG's own external ids (``Q42``, ``P27``, ``/m/02mjmr``).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import Literal, Protocol, runtime_checkable

MatchKind = Literal["id", "exact", "alias", "fuzzy", "embedding"]
# How ``Ref.distinct_name`` writes an entity whose label another entity shares, read back: "Jackson County [/m/0nf3h]".
WRITTEN_WITH_ID = re.compile(r"(?P<label>.*\S)\s*\[(?P<id>[^\[\]\s]+)\]")


class BackendError(RuntimeError):
    """The backend could not answer (endpoint down, timeout, malformed response). The message is
    written for a curator and for the model: it says what failed and whether retrying may help."""


@dataclass(frozen=True)
class Ref:
    """An entity, relation or type by id, with its label for display. ``shared``: another entity of the KG
    carries the same label (FB15k-237 has four Jackson Counties; on a SPARQL endpoint, another entity of the same
    answer: ``shared_within``), so where it is written the id must be too."""

    id: str
    label: str = ""
    shared: bool = field(default=False, compare=False)

    @property
    def name(self) -> str:
        return self.label or self.id

    @property
    def distinct_name(self) -> str:
        """The name, followed by the id where the label alone does not tell which entity it is."""
        return f"{self.label} [{self.id}]" if self.shared and self.label else self.name

    def marked(self, shared_labels: Collection[str]) -> Ref:
        return replace(self, shared=True) if self.label and self.label in shared_labels else self


def _refs_text(refs: list[Ref]) -> str:
    return "; ".join(f"{r.name} ({r.id})" if r.label else r.id for r in refs) or "(none recorded)"


@dataclass(frozen=True)
class Candidate:
    """A possible match of a name, with how it matched and a score in [0, 1]."""

    id: str
    label: str
    description: str
    match: MatchKind
    score: float


@dataclass
class EntityProfile:
    id: str
    label: str
    description: str = ""
    aliases: list[str] = field(default_factory=list)
    types: list[Ref] = field(default_factory=list)

    def text(self) -> str:
        """The profile as tools and prompts show it."""
        return "\n".join([
            f"Entity Profile: {self.id}",
            f"Label: {self.label or '(no label)'}",
            f"Description: {self.description or '(no description)'}",
            f"Type: {_refs_text(self.types)}",
            f"Aliases: {', '.join(self.aliases) or '(none)'}",
        ])


@dataclass
class RelationProfile:
    id: str
    label: str
    description: str = ""
    aliases: list[str] = field(default_factory=list)
    domain: list[Ref] = field(default_factory=list)
    range: list[Ref] = field(default_factory=list)
    # "declared" (the source states the constraint), "derived" (from observed heads/tails), or "".
    schema_source: str = ""

    def text(self) -> str:
        """The relation's schema as tools and the planner's prompt show it."""
        lines = [
            f"Relation Profile: {self.id}",
            f"Label: {self.label or '(no label)'}",
            f"Description: {self.description or '(no description)'}",
            f"Aliases: {', '.join(self.aliases) or '(none)'}",
            f"Subject Constraint (Domain): {_refs_text(self.domain)}",
            f"Object Constraint (Range): {_refs_text(self.range)}",
        ]
        if self.schema_source == "derived":
            lines.append("Note: this KG declares no schema for the relation; domain and range are the most common "
                         "types of its observed subjects and objects.")
        return "\n".join(lines)


@dataclass(frozen=True)
class Edge:
    head: Ref
    relation: Ref
    tail: Ref

    @property
    def ids(self) -> tuple[str, str, str]:
        return self.head.id, self.relation.id, self.tail.id

    def marked(self, shared_labels: Collection[str]) -> Edge:
        """The edge with each end whose label is among ``shared_labels`` marked as shared (``Ref.marked``)."""
        return Edge(self.head.marked(shared_labels), self.relation, self.tail.marked(shared_labels))


def ends(edges: Iterable[Edge]) -> Iterator[Ref]:
    """The entities at either end of the edges."""
    return (ref for edge in edges for ref in (edge.head, edge.tail))


def shared_within(refs: Iterable[Ref]) -> set[str]:
    """The labels that name more than one entity among ``refs``, ignoring case: the rule where the whole KG cannot be
    asked (on Wikidata nearly every label has a namesake somewhere) or is not the point (one drawing), but two
    Parises side by side must be told apart."""
    refs = [ref for ref in refs if ref.label]
    ids: dict[str, set[str]] = {}
    for ref in refs:
        ids.setdefault(ref.label.casefold(), set()).add(ref.id)
    return {ref.label for ref in refs if len(ids[ref.label.casefold()]) > 1}


@dataclass(frozen=True)
class PathStep:
    """One hop of a path walked from its start: ``forward`` when the edge points the way we walk."""

    edge: Edge
    forward: bool


@dataclass(frozen=True)
class KGPath:
    steps: tuple[PathStep, ...]

    @property
    def hops(self) -> int:
        return len(self.steps)

    @property
    def edges(self) -> tuple[Edge, ...]:
        return tuple(step.edge for step in self.steps)


@runtime_checkable
class KGBackend(Protocol):
    """What a knowledge graph must answer for the tools."""

    name: str

    @property
    def version(self) -> str:
        """Changes whenever the data may have changed; part of every cache key."""

    def find_entities(self, text: str, *, limit: int = 5) -> list[Candidate]:
        """Entities whose id, label or alias matches ``text``, best first (exact before fuzzy)."""

    def find_relations(self, text: str, *, limit: int = 5) -> list[Candidate]:
        """Relations whose id, label or alias matches ``text``, best first."""

    def entity(self, entity_id: str) -> EntityProfile | None: ...

    def relation(self, relation_id: str) -> RelationProfile | None: ...

    def edges(self, entity_id: str, *, limit: int = 500) -> list[Edge]:
        """One-hop edges of the entity in both directions (it is the head or the tail)."""

    def paths(self, source_id: str, target_id: str, *, max_hops: int = 3, limit: int = 20,
              exclude: frozenset[tuple[str, str, str]] = frozenset()) -> list[KGPath]:
        """Shortest-first paths of 1..max_hops edges from source to target, edges in either direction,
        never using an edge whose (head, relation, tail) ids are in ``exclude``."""
