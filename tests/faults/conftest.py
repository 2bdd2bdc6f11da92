import logging

import pytest

from tests.faults.tally import TALLIES, Tracebacks


def pytest_terminal_summary(terminalreporter):
    """What the fault-injection and fuzzing suites tried, and what went wrong (every bad count also failed a test)."""
    for suite, counts in TALLIES.items():
        if any(counts.values()):
            terminalreporter.write_line(f"{suite}: " + ", ".join(f"{name.replace('_', ' ')}: {value}"
                                                                 for name, value in counts.items()))


@pytest.fixture(scope="session")
def tracebacks():
    """Every log record of this process that carries a traceback (a 500 is logged so, by Django's handler)."""
    handler = Tracebacks()
    logging.getLogger().addHandler(handler)
    yield handler
    logging.getLogger().removeHandler(handler)
