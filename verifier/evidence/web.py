"""Web search providers (SearxNG, Brave Search) and a dense re-ranker for their snippets.

HTTP goes through the standard library (`urllib.request`): the venv has no plain `httpx` (the openai SDK
brings its own renamed copy), and one GET with JSON back does not justify a new dependency. `get_json` is
shared with the MediaWiki source; it turns every failure into an `EvidenceError` whose one-line message
names the provider, because these messages end up in front of curators and in the model's observations.
"""

from __future__ import annotations

import html
import json
import re
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from http.client import HTTPException
from typing import Any

import numpy as np

from verifier.evidence.base import EvidenceError, WebHit, WebSearchProvider
from verifier.retrying import Transient, call_with_retries, retry_after

USER_AGENT = "KGV/1.0 (knowledge-graph verification workbench)"
# Rate limits and server errors are usually transient; other statuses are answers, retrying them only adds latency.
RETRYABLE_STATUSES = frozenset({429, 500, 502, 503, 504})
# A Retry-After of minutes would stall a verification run: no wait between attempts is longer than this.
MAX_RETRY_AFTER_SECONDS = 5.0

Encoder = Callable[[list[str]], np.ndarray]


def get_json(
    url: str,
    *,
    provider: str,
    headers: Mapping[str, str] | None = None,
    timeout: float = 10,
    retries: int = 2,
    backoff: float = 0.5,
    hints: Mapping[int | str, str] | None = None,
) -> Any:
    """GET `url` and decode its JSON body, retrying 429/5xx/timeouts/dropped connections with exponential backoff.

    Raises EvidenceError("<provider>: …") for everything else and once the retries are spent.
    `hints` adds a provider-specific explanation for a final HTTP status or JSON error code (401 → check the key).
    """
    host = urllib.parse.urlsplit(url).netloc or url
    request = urllib.request.Request(url, headers={"User-Agent": USER_AGENT, "Accept": "application/json", **(headers or {})})
    attempts = max(retries, 0) + 1

    def attempt() -> bytes:
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                return response.read()
        except urllib.error.HTTPError as error:
            if error.code in RETRYABLE_STATUSES:
                wait = retry_after(error.headers)
                raise Transient(f"HTTP {error.code}", retry_after=wait, status_code=error.code) from error
            raise
        except (TimeoutError, urllib.error.URLError, HTTPException, ConnectionError) as error:
            reason = error.reason if isinstance(error, urllib.error.URLError) else error
            if isinstance(reason, TimeoutError | ConnectionResetError | HTTPException):
                raise Transient(str(reason)) from error
            raise

    try:
        body = call_with_retries(attempt, retries=attempts - 1, backoff=backoff, cap=MAX_RETRY_AFTER_SECONDS,
                                 what=f"{provider} at {host}")
    except Transient as failure:
        error = failure.__cause__
        if isinstance(error, urllib.error.HTTPError):
            raise _http_error(error, provider, host, hints, tried=f" after {attempts} attempts" if attempts > 1 else "") from None
        reason = error.reason if isinstance(error, urllib.error.URLError) else error
        raise EvidenceError(f"{provider}: {_describe_network_error(reason, host, timeout, attempts)}") from None
    except urllib.error.HTTPError as error:
        raise _http_error(error, provider, host, hints, tried="") from None
    except (TimeoutError, urllib.error.URLError, HTTPException, ConnectionError) as error:
        reason = error.reason if isinstance(error, urllib.error.URLError) else error
        raise EvidenceError(f"{provider}: {_describe_network_error(reason, host, timeout, 1)}") from None
    except ValueError as error:  # urllib's "unknown url type" and friends: a configuration mistake
        raise EvidenceError(f"{provider}: invalid URL {url!r} ({error})") from None
    try:
        return json.loads(body)
    except ValueError:
        preview = body[:60].decode("utf-8", "replace").strip()
        raise EvidenceError(f"{provider}: malformed response from {host} (not JSON: {preview!r})") from None


def _http_error(error: urllib.error.HTTPError, provider: str, host: str, hints: Mapping[int | str, str] | None,
                *, tried: str) -> EvidenceError:
    """The final HTTP status as one line: the status, the server's own message and the provider's hint."""
    code, detail = _error_detail(_read_quietly(error))
    hint = (hints or {}).get(code, "") or (hints or {}).get(error.code, "")
    parts = [f"{provider}: HTTP {error.code} from {host}{tried}", _SPACES.sub(" ", detail).strip(), hint]
    return EvidenceError(" — ".join(part for part in parts if part))


def _read_quietly(error: urllib.error.HTTPError) -> bytes:
    try:
        return error.read()
    except (OSError, HTTPException):
        return b""
    finally:
        error.close()


def _error_detail(body: bytes) -> tuple[str, str]:
    """(code, message) of a JSON error body (Brave: error.code/detail, MediaWiki: error.code/info); ("", "") if none."""
    try:
        payload = json.loads(body)
    except ValueError:
        return "", ""
    if not isinstance(payload, dict):
        return "", ""
    error = payload.get("error")
    if isinstance(error, dict):
        text = error.get("detail") or error.get("info") or error.get("message") or error.get("code") or ""
        return str(error.get("code") or ""), str(text)[:200]
    if isinstance(error, str):
        return "", error[:200]
    return "", str(payload.get("message") or payload.get("detail") or "")[:200]


def _describe_network_error(reason: object, host: str, timeout: float, attempts: int) -> str:
    if isinstance(reason, TimeoutError):
        return f"{host} did not answer within {timeout:g} s ({attempts} attempt{'s' if attempts > 1 else ''})"
    if isinstance(reason, ConnectionRefusedError):
        return f"cannot connect to {host} (connection refused)"
    if isinstance(reason, OSError) and reason.strerror:
        return f"cannot reach {host} ({reason.strerror})"
    return f"cannot reach {host} ({reason or type(reason).__name__})"


_TAG = re.compile(r"<[^>]+>")
_SPACES = re.compile(r"\s+")


def clean_html(text: str) -> str:
    """Plain text from a highlighted snippet: tags dropped, entities decoded, whitespace collapsed."""
    return _SPACES.sub(" ", html.unescape(_TAG.sub("", text))).strip()


def _results_list(payload: Any, path: Sequence[str], provider: str) -> list[dict[str, Any]]:
    """The result objects at `path`; a missing step means "no results", a wrong type means a malformed reply."""
    node = payload
    for key in path:
        if not isinstance(node, dict):
            raise EvidenceError(f"{provider}: malformed response (expected an object with {'.'.join(path)})")
        node = node.get(key)
        if node is None:
            return []
    if not isinstance(node, list):
        raise EvidenceError(f"{provider}: malformed response ({'.'.join(path)} is not a list)")
    return [item for item in node if isinstance(item, dict) and isinstance(item.get("url"), str) and item["url"]]


class SearxngProvider:
    """A SearxNG instance's JSON API. The instance must list `json` under `search.formats` in settings.yml."""

    name = "searxng"

    def __init__(self, base_url: str, *, language: str | None = None, timeout: float = 10, retries: int = 2, backoff: float = 0.5) -> None:
        if not base_url:
            raise EvidenceError("searxng: not configured (set SEARXNG_URL)")
        self.base_url = base_url.rstrip("/")
        self.language = language
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff

    def search(self, query: str, *, limit: int = 10) -> list[WebHit]:
        params = {"q": query, "format": "json", "categories": "general"}
        if self.language:
            params["language"] = self.language
        payload = get_json(
            f"{self.base_url}/search?{urllib.parse.urlencode(params)}",
            provider=self.name,
            timeout=self.timeout,
            retries=self.retries,
            backoff=self.backoff,
            hints={
                403: "the instance refuses format=json (add json to search.formats in its settings.yml)",
                429: "the instance's bot limiter blocked us (disable it or allow this host's IP)",
            },
        )
        results = _results_list(payload, ["results"], self.name)
        failed = payload.get("unresponsive_engines") or []
        if not results and failed:
            # An empty list here is not "the web knows nothing": every engine failed, and the model must not read it as evidence.
            engines = ", ".join(f"{item[0]} ({item[1]})" for item in failed if isinstance(item, list | tuple) and len(item) >= 2)
            raise EvidenceError(f"searxng: no results; the instance's engines failed: {engines or failed}")
        # SearxNG has no count parameter (it pages by 10-ish); cut here.
        return [
            WebHit(
                title=_SPACES.sub(" ", str(item.get("title") or "")).strip(),
                url=item["url"],
                snippet=_SPACES.sub(" ", str(item.get("content") or "")).strip(),
                source=self.name,
            )
            for item in results[: max(limit, 0)]
        ]


class BraveProvider:
    """Brave Search API (web search endpoint)."""

    name = "brave"
    MAX_COUNT = 20  # the API rejects larger `count` values with a 422

    def __init__(
        self,
        api_key: str,
        *,
        base_url: str = "https://api.search.brave.com/res/v1",
        timeout: float = 10,
        retries: int = 2,
        backoff: float = 0.5,
    ) -> None:
        if not api_key:
            raise EvidenceError("brave: not configured (set BRAVE_API_KEY)")
        self.api_key = api_key
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff

    def search(self, query: str, *, limit: int = 10) -> list[WebHit]:
        if limit <= 0:
            return []
        params = {"q": query, "count": min(limit, self.MAX_COUNT)}
        rejected_key = "the API key was rejected (check BRAVE_API_KEY)"
        payload = get_json(
            f"{self.base_url}/web/search?{urllib.parse.urlencode(params)}",
            provider=self.name,
            headers={"X-Subscription-Token": self.api_key},
            timeout=self.timeout,
            retries=self.retries,
            backoff=self.backoff,
            # Brave answers a bad token with 422 SUBSCRIPTION_TOKEN_INVALID rather than 401.
            hints={
                "SUBSCRIPTION_TOKEN_INVALID": rejected_key,
                401: rejected_key,
                403: rejected_key,
                429: "rate limit or plan quota exceeded",
            },
        )
        results = _results_list(payload, ["web", "results"], self.name)
        return [
            WebHit(
                title=clean_html(str(item.get("title") or "")),
                url=item["url"],
                snippet=clean_html(str(item.get("description") or "")),
                source=self.name,
            )
            for item in results[:limit]
        ]


def provider_from_env(environ: Mapping[str, str]) -> WebSearchProvider | None:
    """The configured provider, or None when web search is off. A named provider missing its setting is a ValueError."""
    name = environ.get("WEB_SEARCH_PROVIDER", "").strip().lower()
    searxng_url = environ.get("SEARXNG_URL", "").strip()
    brave_key = environ.get("BRAVE_API_KEY", "").strip()
    if not name:
        name = "searxng" if searxng_url else "brave" if brave_key else ""
    if not name:
        return None
    if name == "searxng":
        if not searxng_url:
            raise ValueError("WEB_SEARCH_PROVIDER=searxng needs SEARXNG_URL (the instance's base URL, e.g. http://127.0.0.1:8888)")
        if urllib.parse.urlsplit(searxng_url).scheme not in ("http", "https"):
            raise ValueError(f"SEARXNG_URL must be an http(s) URL, not {searxng_url!r}")
        return SearxngProvider(searxng_url)
    if name == "brave":
        if not brave_key:
            raise ValueError("WEB_SEARCH_PROVIDER=brave needs BRAVE_API_KEY (a Brave Search API subscription token)")
        base_url = environ.get("BRAVE_BASE_URL", "").strip()
        return BraveProvider(brave_key, base_url=base_url) if base_url else BraveProvider(brave_key)
    raise ValueError(f"WEB_SEARCH_PROVIDER must be 'searxng', 'brave' or empty, not {name!r}")


def _url_key(url: str) -> str:
    """Same page, different spelling (scheme, host case, trailing slash, fragment) → same key."""
    parts = urllib.parse.urlsplit(url.strip())
    return f"{parts.netloc.lower().removeprefix('www.')}{parts.path.rstrip('/')}?{parts.query}"


def rerank(question: str, hits: Sequence[WebHit], *, encode: Encoder, limit: int = 5) -> list[WebHit]:
    """The `limit` hits whose title + snippet is closest (cosine) to the question, best first, unique by URL."""
    unique: dict[str, WebHit] = {}
    for hit in hits:
        unique.setdefault(_url_key(hit.url), hit)  # first seen wins: providers put their better copy first
    candidates = list(unique.values())
    if not candidates or limit <= 0:
        return []
    vectors = np.asarray(encode([question, *(f"{hit.title}. {hit.snippet}" for hit in candidates)]), dtype=np.float32)
    if vectors.shape[0] != len(candidates) + 1:
        raise ValueError(f"encode returned {vectors.shape[0]} vectors for {len(candidates) + 1} texts")
    # Normalise anyway: cheap, and it keeps the score a true cosine even for an encoder that does not.
    vectors = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    similarities = vectors[1:] @ vectors[0]
    order = np.argsort(-similarities, kind="stable")[:limit]
    return [replace(candidates[index], score=float(similarities[index])) for index in order]
