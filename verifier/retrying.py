"""One retry policy for every remote call KGV makes (the model endpoint, SPARQL endpoints, web search and
MediaWiki), on tenacity.

An attempt that may succeed if repeated raises ``Transient``; anything else ends the call at once. Between
attempts the wait is the server's Retry-After when it sent one, else exponential back-off with jitter (so
workers hitting one rate limit do not retry in lock-step), both capped: a worker must never sleep for the
hour a server asks for. Each retry is logged with what failed.
"""

from __future__ import annotations

import email.utils
import logging
import random
import time
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from tenacity import RetryCallState, Retrying, retry_if_exception_type, stop_after_attempt

logger = logging.getLogger(__name__)

T = TypeVar("T")


class Transient(Exception):
    """One failed attempt that another may fix. ``retry_after``: the wait the server asked for, in seconds."""

    def __init__(self, reason: str, *, retry_after: float | None = None, status_code: int | None = None) -> None:
        super().__init__(reason)
        self.reason, self.retry_after, self.status_code = reason, retry_after, status_code


def retry_after(headers: Mapping[str, Any] | None) -> float | None:
    """Seconds to wait from ``retry-after-ms`` (OpenAI) or ``Retry-After`` (seconds or an HTTP date); None when
    absent or unreadable."""
    if not headers:
        return None
    milliseconds = headers.get("retry-after-ms")
    if milliseconds:
        try:
            return max(float(milliseconds) / 1000, 0.0)
        except ValueError:
            pass
    value = headers.get("retry-after") or headers.get("Retry-After")
    if not value:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    return max(when.timestamp() - time.time(), 0.0)


def _wait(backoff: float, cap: float) -> Callable[[RetryCallState], float]:
    def wait(state: RetryCallState) -> float:
        failure = state.outcome.exception() if state.outcome else None
        asked = getattr(failure, "retry_after", None)
        if asked is not None:
            return min(asked, cap)
        return min(backoff * 2 ** (state.attempt_number - 1), cap) * random.uniform(0.5, 1.0)

    return wait


def call_with_retries(attempt: Callable[[], T], *, retries: int, backoff: float, cap: float, what: str) -> T:
    """``attempt()`` until it returns; a ``Transient`` failure is retried up to ``retries`` times, then raised.
    ``what`` names the call in the log line of each retry."""

    def log(state: RetryCallState) -> None:
        failure = state.outcome.exception() if state.outcome else None
        wait = state.next_action.sleep if state.next_action else 0.0
        logger.warning("%s: %s; retry %d of %d in %.2f s", what, failure, state.attempt_number, retries, wait)

    retrying = Retrying(retry=retry_if_exception_type(Transient), stop=stop_after_attempt(retries + 1),
                        wait=_wait(backoff, cap), before_sleep=log, reraise=True)
    return retrying(attempt)
