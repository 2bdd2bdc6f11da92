"""What every tool receives (its context) and returns: text for the model and structured evidence, in the
agent's own types (verifier/agent/port.py), which the agent reaches tools through."""

from __future__ import annotations

from dataclasses import dataclass

from verifier.agent.port import EvidenceItem, EvidenceKind, ToolResult
from verifier.agent.steps import Claim
from verifier.evidence.base import EncyclopediaSource, WebSearchProvider
from verifier.kg.base import KGBackend

__all__ = ["EvidenceItem", "EvidenceKind", "ToolContext", "ToolResult"]

@dataclass
class ToolContext:
    kg: KGBackend
    corpus: object | None = None  # a text corpus with entity_passages()/search() (verifier/evidence/corpus.py)
    encyclopedia: EncyclopediaSource | None = None
    web: WebSearchProvider | None = None
    query: Claim | None = None
    wiki_alpha: float = 0.5  # weight of the lexical score in hybrid passage retrieval
    # The KG's embedding model and mined rules (verifier/structure/evidence.py); None for a SPARQL endpoint.
    structure: object | None = None

    @property
    def exclude(self) -> frozenset[tuple[str, str, str]]:
        return self.query.leaking_edges if self.query else frozenset()
