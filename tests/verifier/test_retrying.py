"""The one retry policy: the server's wait when it names one (capped), back-off otherwise, and only for
failures another attempt may fix."""

from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest

from verifier.retrying import Transient, call_with_retries, retry_after


def test_retry_after_reads_milliseconds_seconds_and_http_dates():
    assert retry_after({"retry-after-ms": "250"}) == 0.25
    assert retry_after({"Retry-After": "3"}) == 3.0
    later = format_datetime(datetime.now(UTC) + timedelta(seconds=30), usegmt=True)
    assert 25 <= retry_after({"retry-after": later}) <= 30
    assert retry_after({"retry-after": "soon"}) is None and retry_after({}) is None and retry_after(None) is None


def test_a_transient_failure_is_retried_until_success_and_a_permanent_one_is_not():
    calls = []

    def flaky():
        calls.append(1)
        if len(calls) < 3:
            raise Transient("busy", retry_after=0.01)
        return "ok"

    assert call_with_retries(flaky, retries=3, backoff=0.01, cap=0.05, what="test") == "ok" and len(calls) == 3

    def broken():
        calls.append(1)
        raise KeyError("no")

    calls.clear()
    with pytest.raises(KeyError):
        call_with_retries(broken, retries=3, backoff=0.01, cap=0.05, what="test")
    assert len(calls) == 1


def test_the_last_transient_failure_is_raised_once_the_retries_are_spent():
    def always():
        raise Transient("still busy", retry_after=3600)  # the cap keeps the test (and a worker) from sleeping an hour

    with pytest.raises(Transient, match="still busy"):
        call_with_retries(always, retries=2, backoff=0.01, cap=0.01, what="test")
