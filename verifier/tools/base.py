"""What every tool receives (its context) and returns (text for the model + structured evidence)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Literal

from verifier.evidence.base import EncyclopediaSource, WebSearchProvider
from verifier.kg.base import KGBackend

EvidenceKind = Literal["triple", "path", "passage", "definition", "web", "plausibility", "rule"]


@dataclass(frozen=True)
class EvidenceItem:
    """One citable piece of evidence: a triple, a path, a passage sentence, a profile or a snippet.

    ``payload`` holds ids (entities, relations) so the support set can be drawn as a subgraph;
    ``source`` says where it came from (the KG and its version, a URL)."""

    kind: EvidenceKind
    text: str
    payload: dict = field(default_factory=dict)
    source: str = ""
    display: str = ""  # the line of the observation showing this item, when it differs from ``text``

    @property
    def content_hash(self) -> str:
        return hashlib.sha256(f"{self.kind}\n{self.text}\n{self.source}".encode()).hexdigest()

    def to_dict(self) -> dict:
        return {"kind": self.kind, "text": self.text, "payload": self.payload, "source": self.source, "display": self.display}

    @classmethod
    def from_dict(cls, data: dict) -> EvidenceItem:
        return cls(kind=data["kind"], text=data["text"], payload=data.get("payload", {}), source=data.get("source", ""),
                   display=data.get("display", ""))


@dataclass
class ToolResult:
    text: str
    items: list[EvidenceItem] = field(default_factory=list)
    ok: bool = True  # False: the call failed (bad arguments, backend down); the text says why
    cached: bool = False

    def to_dict(self) -> dict:
        return {"text": self.text, "items": [i.to_dict() for i in self.items], "ok": self.ok}

    @classmethod
    def from_dict(cls, data: dict, *, cached: bool = False) -> ToolResult:
        return cls(text=data["text"], items=[EvidenceItem.from_dict(i) for i in data["items"]], ok=data["ok"], cached=cached)


@dataclass(frozen=True)
class QueryTriple:
    """The triple under verification, by ids, so tools can keep it (and its reverse reading) out of
    their results: the agent must find evidence, not the claim itself."""

    head: str
    relation: str
    tail: str
    head_label: str = ""
    relation_label: str = ""
    tail_label: str = ""

    @property
    def leaking_edges(self) -> frozenset[tuple[str, str, str]]:
        return frozenset({(self.head, self.relation, self.tail), (self.tail, self.relation, self.head)})


@dataclass
class ToolContext:
    kg: KGBackend
    corpus: object | None = None  # a text corpus with entity_passages()/search() (verifier/evidence/corpus.py)
    encyclopedia: EncyclopediaSource | None = None
    web: WebSearchProvider | None = None
    query: QueryTriple | None = None
    wiki_alpha: float = 0.5  # weight of the lexical score in hybrid passage retrieval
    # The KG's embedding model and mined rules (verifier/structure/evidence.py); None for a SPARQL endpoint.
    structure: object | None = None

    @property
    def exclude(self) -> frozenset[tuple[str, str, str]]:
        return self.query.leaking_edges if self.query else frozenset()
