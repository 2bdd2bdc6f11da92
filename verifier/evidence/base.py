"""Protocols for text evidence outside the KG: encyclopedia passages and web search snippets."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable


class EvidenceError(RuntimeError):
    """A text source could not answer (not configured, down, timed out, malformed response). The
    message is written for a curator and for the model."""


@dataclass(frozen=True)
class TextPassage:
    """A piece of encyclopedia text about an entity (or found by a query)."""

    title: str
    text: str
    url: str = ""
    source: str = ""  # "wikipedia (local corpus)", "wikipedia (live)", …
    entity_id: str = ""
    score: float = 0.0


@dataclass(frozen=True)
class WebHit:
    title: str
    url: str
    snippet: str
    source: str  # provider name: "searxng", "brave", …
    score: float = 0.0


@runtime_checkable
class WebSearchProvider(Protocol):
    name: str

    def search(self, query: str, *, limit: int = 10) -> list[WebHit]:
        """Raw hits in the provider's order; raises EvidenceError on failure."""


@runtime_checkable
class EncyclopediaSource(Protocol):
    name: str

    def summary(self, title: str) -> TextPassage | None:
        """The lead section of the article with this title (None if there is none)."""

    def search(self, query: str, *, limit: int = 5) -> list[TextPassage]:
        """Passages (article extracts) matching a free-text query."""
