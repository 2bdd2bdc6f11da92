"""Caching of tool results: per run (a dict in the Toolbox) and across runs (Redis, via Django's cache).

The key covers the KG's version, the tool, its arguments and the excluded (query) triple: a reloaded
KG or another query triple never sees a stale or leaking answer.
"""

from __future__ import annotations

import hashlib
import json
from typing import Protocol


class ToolCache(Protocol):
    def get(self, key: str) -> dict | None: ...

    def set(self, key: str, value: dict) -> None: ...


def cache_key(kg_version: str, tool: str, arguments: dict[str, str], exclude: frozenset) -> str:
    material = json.dumps([kg_version, tool, sorted(arguments.items()), sorted(exclude)], ensure_ascii=False)
    return "kgv:tool:" + hashlib.sha256(material.encode()).hexdigest()


class DjangoToolCache:
    """Shared across runs and worker processes through the configured Django cache (Redis)."""

    def __init__(self, alias: str = "default", timeout: int = 7 * 24 * 3600):
        from django.core.cache import caches

        self.cache = caches[alias]
        self.timeout = timeout

    def get(self, key: str) -> dict | None:
        return self.cache.get(key)

    def set(self, key: str, value: dict) -> None:
        self.cache.set(key, value, self.timeout)
