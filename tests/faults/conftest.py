from tests.faults.tally import TALLIES


def pytest_terminal_summary(terminalreporter):
    """What the fault-injection and fuzzing suites tried, and what went wrong (every bad count also failed a test)."""
    for suite, counts in TALLIES.items():
        if any(counts.values()):
            terminalreporter.write_line(f"{suite}: " + ", ".join(f"{value} {name.replace('_', ' ')}"
                                                                 for name, value in counts.items()))
