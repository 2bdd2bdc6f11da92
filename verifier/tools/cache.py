"""Caching of tool results: per run (a dict in the Toolbox) and across runs (Redis, via Django's cache).

The key covers the KG's version, the tool, its arguments and the excluded (query) triple: a reloaded
KG or another query triple never sees a stale or leaking answer.
"""

from __future__ import annotations

import hashlib
import json
import logging
from typing import Protocol

from redis.exceptions import RedisError

logger = logging.getLogger(__name__)


class ToolCache(Protocol):
    def get(self, key: str) -> dict | None: ...

    def set(self, key: str, value: dict) -> None: ...


# Raised whenever tools write their results differently (2: ids beside labels other entities share; 3: the same
# on SPARQL endpoints, within an answer), so no result cached in an older notation is shown beside new ones.
RESULTS_FORMAT = 3


def cache_key(kg_version: str, tool: str, arguments: dict[str, str], exclude: frozenset) -> str:
    material = json.dumps([RESULTS_FORMAT, kg_version, tool, sorted(arguments.items()), sorted(exclude)], ensure_ascii=False)
    return "kgv:tool:" + hashlib.sha256(material.encode()).hexdigest()


class DjangoToolCache:
    """Shared across runs and worker processes through the configured Django cache (Redis). The cache only
    saves work: while Redis is unreachable (restarting, say) a lookup misses and a result is not kept, and
    the investigation goes on instead of failing on a tool call that had succeeded."""

    def __init__(self, alias: str = "default", timeout: int = 7 * 24 * 3600):
        from django.core.cache import caches

        self.cache = caches[alias]
        self.timeout = timeout

    def get(self, key: str) -> dict | None:
        try:
            return self.cache.get(key)
        except (RedisError, OSError) as exc:
            logger.warning("tool cache unreachable, computing the result: %s", exc)
            return None

    def set(self, key: str, value: dict) -> None:
        try:
            self.cache.set(key, value, self.timeout)
        except (RedisError, OSError) as exc:
            logger.warning("tool cache unreachable, result not kept: %s", exc)
