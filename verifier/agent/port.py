"""The agent's port to its tools: what a tool returns (text for the model and citable evidence) and what
the agent asks of the tools offered to a run. The tools (verifier/tools) implement it; the agent imports
nothing above this package, so it runs the same against the local store, a SPARQL endpoint or a test double.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

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


class Tools(Protocol):
    """The tools offered to one run."""

    @property
    def names(self) -> list[str]: ...

    def describe(self) -> str:
        """The tool list as written into a text ReAct prompt."""

    def openai_tools(self) -> list[dict]:
        """The same tools as function-calling schemas, for endpoints that call tools natively."""

    def relation_schema(self) -> str:
        """The claim's relation as the planner reads it (label, description, domain, range), or ""."""

    def call(self, name: str, arguments: Mapping[str, str] | Sequence[str]) -> ToolResult: ...
