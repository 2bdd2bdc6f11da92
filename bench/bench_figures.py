"""Figures for the benchmarks: percentiles and per-process CPU accounting from /proc."""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import urlsplit

from django.conf import settings

# ------------------------------------------------------------------------------------------------
# Figures
# ------------------------------------------------------------------------------------------------


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))] if ordered else float("nan")


def spread(values: list[float], unit: str = "ms") -> str:
    if not values:
        return "n/a"
    return (f"p50 {pct(values, 0.5):7.1f} {unit}  p95 {pct(values, 0.95):7.1f} {unit}  "
            f"max {max(values):7.1f} {unit}  (n={len(values)})")


TICK = os.sysconf("SC_CLK_TCK")


def _proc(pid: int | str) -> tuple[str, list[str]] | None:
    """(command name, the /proc/<pid>/stat fields after the name), None when the process is gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return raw[raw.index("(") + 1: raw.rindex(")")], raw[raw.rindex(")") + 2:].split()


def _ticks(fields: list[str], children: bool = False) -> int:
    # utime, stime (and cutime, cstime: children already waited for, e.g. PostgreSQL backends that exited)
    return int(fields[11]) + int(fields[12]) + (int(fields[13]) + int(fields[14]) if children else 0)


class CpuMeter:
    """CPU seconds used by the worker processes, the embedded PostgreSQL and Redis, this process and the rest of the machine."""

    def __init__(self, worker_pids: list[int]):
        self.worker_pids = set(worker_pids)
        host = Path(str(settings.DATABASES["default"].get("HOST") or "/nonexistent"))
        try:
            self.postmaster = int((host / "postmaster.pid").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            self.postmaster = 0  # an external server: not on this machine, or not ours to count
        port = f":{urlsplit(settings.REDIS_URL).port}"
        self.redis = 0
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit() and (_proc(entry.name) or ("",))[0] == "redis-server":
                try:
                    if port in (entry / "cmdline").read_text():
                        self.redis = int(entry.name)
                except OSError:
                    pass

    def snapshot(self) -> dict[str, float]:
        ticks = {"worker": 0, "PostgreSQL": 0, "Redis": 0}
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            pid, proc = int(entry.name), _proc(entry.name)
            if proc is None:
                continue
            if pid in self.worker_pids:
                ticks["worker"] += _ticks(proc[1], children=True)
            elif pid == self.redis:
                ticks["Redis"] = _ticks(proc[1])
            elif self.postmaster and pid == self.postmaster:
                ticks["PostgreSQL"] += _ticks(proc[1], children=True)
            elif self.postmaster and int(proc[1][1]) == self.postmaster:
                ticks["PostgreSQL"] += _ticks(proc[1])
        seconds = {k: v / TICK for k, v in ticks.items()}
        seconds["this process (scripted server, follower)"] = sum(os.times()[:2])
        busy = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
        seconds["machine"] = (sum(busy) - busy[3] - busy[4]) / TICK  # all but idle and iowait
        return seconds

    @staticmethod
    def delta(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
        used = {k: after[k] - before[k] for k in before}
        used["other processes"] = max(0.0, used["machine"] - sum(v for k, v in used.items() if k != "machine"))
        return used


