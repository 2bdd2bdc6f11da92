"""Live encyclopedia text from a MediaWiki Action API (Wikipedia by default): article leads and search.

Uses the TextExtracts extension (`prop=extracts`), which Wikipedia and most Wikimedia wikis run. Requests
go through `get_json` from the web module, so failures surface as one-line `EvidenceError`s the same way
web search failures do.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Sequence
from typing import Any

from verifier.evidence.base import EvidenceError, TextPassage
from verifier.evidence.web import clean_html, get_json

WIKIPEDIA_API = "https://en.wikipedia.org/w/api.php"
# TextExtracts returns at most 20 lead sections per request when exintro is set.
MAX_EXTRACTS = 20


class MediaWikiSource:
    name = "wikipedia (live)"

    def __init__(
        self,
        api_url: str = WIKIPEDIA_API,
        *,
        user_agent: str,
        timeout: float = 10,
        retries: int = 2,
        backoff: float = 0.5,
    ) -> None:
        # Wikimedia blocks generic library User-Agents; its policy asks for a name plus a contact.
        if not user_agent.strip():
            raise ValueError("MediaWikiSource needs a user_agent naming the tool and a contact (Wikimedia User-Agent policy)")
        parts = urllib.parse.urlsplit(api_url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError(f"MediaWiki API URL must be an http(s) URL, not {api_url!r}")
        self.api_url = api_url
        self.user_agent = user_agent
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self._site = f"{parts.scheme}://{parts.netloc}"

    def summary(self, title: str) -> TextPassage | None:
        title = title.strip()
        if not title:
            return None
        return self._extracts([title]).get(title)

    def search(self, query: str, *, limit: int = 5) -> list[TextPassage]:
        query = query.strip()
        if not query or limit <= 0:
            return []
        limit = min(limit, MAX_EXTRACTS)
        payload = self._query({"list": "search", "srsearch": query, "srlimit": limit, "srnamespace": 0, "srprop": "snippet"})
        hits = payload.get("search") or []
        if not isinstance(hits, list):
            raise EvidenceError(f"{self.name}: malformed search response (query.search is not a list)")
        ranked = [(str(hit["title"]), str(hit.get("snippet") or "")) for hit in hits if isinstance(hit, dict) and hit.get("title")]
        if not ranked:
            return []
        extracts = self._extracts([title for title, _ in ranked])
        passages = []
        for title, snippet in ranked:  # the extracts come back in page-id order; keep the search ranking
            passage = extracts.get(title)
            if passage is None and snippet:  # no lead text (rare): the highlighted search snippet beats nothing
                passage = TextPassage(title=title, text=clean_html(snippet), url=self._page_url(title), source=self.name)
            if passage is not None:
                passages.append(passage)
        return passages

    # -- API plumbing ------------------------------------------------------------------------------------

    def _extracts(self, titles: Sequence[str]) -> dict[str, TextPassage]:
        """Lead sections for up to 20 titles in one request, keyed by the title as asked (redirects followed)."""
        payload = self._query(
            {
                "prop": "extracts",
                "exintro": 1,
                "explaintext": 1,
                "exlimit": len(titles),
                "redirects": 1,
                "titles": "|".join(titles),
            }
        )
        pages = payload.get("pages") or []
        if not isinstance(pages, list):
            raise EvidenceError(f"{self.name}: malformed extracts response (query.pages is not a list)")
        by_title = {}
        for page in pages:
            if not isinstance(page, dict) or page.get("missing") or page.get("invalid") or not page.get("title"):
                continue
            text = str(page.get("extract") or "").strip()
            if text:  # an existing page with an empty lead has nothing to offer as evidence
                title = str(page["title"])
                by_title[title] = TextPassage(title=title, text=text, url=self._page_url(title), source=self.name)
        # The API answers under the canonical title; walk each asked title through normalisation and redirects.
        renamed = {}
        for key in ("normalized", "redirects"):
            for step in payload.get(key) or []:
                if isinstance(step, dict) and step.get("from") and step.get("to"):
                    renamed[str(step["from"])] = str(step["to"])
        found = {}
        for asked in titles:
            title, seen = asked, set()
            while title in renamed and title not in seen:  # redirect loops exist on real wikis
                seen.add(title)
                title = renamed[title]
            if title in by_title:
                found[asked] = by_title[title]
        return found

    def _query(self, params: dict[str, Any]) -> dict[str, Any]:
        """Run an action=query request and return its `query` object ({} when the API found nothing)."""
        full = {"action": "query", "format": "json", "formatversion": 2, **params}
        payload = get_json(
            f"{self.api_url}?{urllib.parse.urlencode(full)}",
            provider=self.name,
            headers={"User-Agent": self.user_agent},
            timeout=self.timeout,
            retries=self.retries,
            backoff=self.backoff,
            hints={403: "the wiki refused the request (check the User-Agent or a block)"},
        )
        if not isinstance(payload, dict):
            raise EvidenceError(f"{self.name}: malformed response (expected a JSON object)")
        error = payload.get("error")
        if isinstance(error, dict):  # API errors come back with HTTP 200
            raise EvidenceError(f"{self.name}: API error {error.get('code', '?')}: {error.get('info', '')}".rstrip(": "))
        query = payload.get("query", {})
        if not isinstance(query, dict):
            raise EvidenceError(f"{self.name}: malformed response (query is not an object)")
        return query

    def _page_url(self, title: str) -> str:
        return f"{self._site}/wiki/{urllib.parse.quote(title.replace(' ', '_'), safe=':/(),!*@$;~')}"
