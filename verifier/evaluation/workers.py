"""Celery workers for an evaluation: use the ones already serving the broker, or start one.

An evaluation's runs go through the same path as a curator's (start_run → Celery → execute_run).
When no worker answers a ping, the evaluation starts its own (thread pool, ``concurrency`` threads)
with the embedded local model when no LLM endpoint is configured and the runs ask a model, and stops both
when it ends. A worker started for runs that ask no model has no endpoint, and its hostname says so
(``kgv-eval-nollm-…``): runs that ask a model refuse to queue behind it rather than fail on it one by one.
"""

from __future__ import annotations

import ast
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

from django.conf import settings

from kgv_web.celery import app
from verifier.errors import ApplicationError
from verifier.queueing import RUN_VERIFICATION, queue_of

START_TIMEOUT_SECONDS = 240.0  # a worker imports Django, the app and its models: minutes on two cores busy with a training
STOP_GRACE_SECONDS = 10.0
TASK_NAME = RUN_VERIFICATION
NO_MODEL_PREFIX = "kgv-eval-nollm-"


class WorkerUnfit(ApplicationError):
    """The running workers cannot execute these runs; the message says which and what to do."""


def live_workers(timeout: float = 1.0) -> list[str]:
    """The running workers that take runs (consume the verification queue)."""
    names = [name for reply in (app.control.ping(timeout=timeout) or []) for name in reply]
    if not names:
        return []
    queues = app.control.inspect(destination=names, timeout=timeout, limit=len(names)).active_queues() or {}
    wanted = queue_of(RUN_VERIFICATION)
    return sorted(name for name, consumed in queues.items() if any(q.get("name") == wanted for q in consumed))


def _run_id(request: dict) -> int | None:
    args = request.get("args")
    if isinstance(args, str):  # older workers send the repr
        try:
            args = ast.literal_eval(args)
        except (ValueError, SyntaxError):
            return None
    if request.get("name") == TASK_NAME and isinstance(args, list | tuple) and args:
        return int(args[0])
    return None


def runs_held_by_workers(timeout: float = 1.0) -> set[int]:
    """Ids of the runs that live workers are executing or have reserved (a busy solo-pool worker
    cannot answer, so its run is not listed)."""
    inspector = app.control.inspect(timeout=timeout)
    held: set[int] = set()
    for answer in (inspector.active() or {}, inspector.reserved() or {}):
        for requests in answer.values():
            held.update(run_id for request in requests if (run_id := _run_id(request)) is not None)
    return held


def _interrupt(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


@contextmanager
def worker_pool(concurrency: int, *, log=print, needs_model: bool = True) -> Iterator[str]:
    """Yield a description of the workers serving this process's runs (see the module docstring).

    SIGTERM interrupts like Ctrl-C does, so a stopped evaluation is recorded as interrupted and the
    worker and model it started are stopped too."""
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        yield from _workers(concurrency, log, needs_model)
    finally:
        signal.signal(signal.SIGTERM, previous)


def _workers(concurrency: int, log, needs_model: bool) -> Iterator[str]:
    existing = live_workers()
    if existing:
        if needs_model and (unfit := [name for name in existing if name.startswith(NO_MODEL_PREFIX)]):
            raise WorkerUnfit(
                f"the running Celery worker(s) {', '.join(unfit)} were started without a language model by an "
                "evaluation whose runs ask none, and would fail these runs: wait until that evaluation ends "
                "(it stops its worker) or stop it, then start this one again")
        log(f"Using the running Celery worker(s): {', '.join(existing)}")
        yield ", ".join(existing)
        return
    from kgv_web.embedded_llm import provide_local_llm

    if needs_model:  # the embedded model, unless LLM_BASE_URL names an endpoint; the worker inherits it
        provide_local_llm()
    hostname = f"{'kgv-eval-' if needs_model else NO_MODEL_PREFIX}{os.getpid()}@localhost"
    process = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "kgv_web", "worker", "--pool", "threads", "-Q", queue_of(RUN_VERIFICATION),
         "--concurrency", str(concurrency), "--hostname", hostname, "--loglevel", "WARNING"],
        cwd=settings.BASE_DIR, env={**os.environ},
    )
    try:
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        while not app.control.ping(destination=[hostname], timeout=0.5):
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the Celery worker {hostname} did not start (exit status {process.poll()})")
        endpoint = settings.LLM_BASE_URL if needs_model else "none (no run asks a model)"
        log(f"Started Celery worker {hostname} ({concurrency} threads); LLM endpoint {endpoint}")
        yield hostname
    finally:
        _stop(process)


def _stop(process: subprocess.Popen) -> None:
    if process.poll() is not None:
        return
    process.send_signal(signal.SIGTERM)  # warm shutdown: finishes what it holds if that is quick
    try:
        process.wait(timeout=STOP_GRACE_SECONDS)
    except subprocess.TimeoutExpired:
        # Runs still in flight stay "running"; resuming the evaluation gives them fresh runs.
        process.kill()
        process.wait()
