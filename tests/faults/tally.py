"""Counts the fault and fuzzing suites keep while they run, printed in pytest's summary (conftest.py)."""

from __future__ import annotations

TALLIES: dict[str, dict[str, int]] = {}


def tally(suite: str, *names: str) -> dict[str, int]:
    """The counters of one suite, in the order given (created at zero on first use)."""
    return TALLIES.setdefault(suite, dict.fromkeys(names, 0))
