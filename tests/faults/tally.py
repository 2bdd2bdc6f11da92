"""Counts the fault and fuzzing suites keep while they run, printed in pytest's summary (conftest.py)."""

from __future__ import annotations

import logging

TALLIES: dict[str, dict[str, int]] = {}


def tally(suite: str, *names: str) -> dict[str, int]:
    """The counters of one suite, in the order given (created at zero on first use)."""
    return TALLIES.setdefault(suite, dict.fromkeys(names, 0))


class Tracebacks(logging.Handler):
    """A log handler that keeps the records carrying a traceback."""

    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.exc_info or (record.exc_text and "Traceback" in record.exc_text):
            self.records.append(record)

    def since(self, mark: int) -> list[str]:
        """The tracebacks logged after ``mark`` (a ``len(records)`` taken before), as text."""
        return [f"{record.name}: {record.getMessage()}" for record in self.records[mark:]]
