"""Sending work to the Celery workers: every task by its registered name, once the transaction that asked for it
commits, on the queue of its kind of work.

Celery's routing (``CELERY_TASK_ROUTES`` in kgv_web/settings.py) keeps long work from holding short work:

- ``verification``: investigations and claims, what curators wait for (seconds each);
- ``training``: structural-model trainings (minutes to hours, every core they are given);
- ``audit``: the chunks of a whole-KG audit (minutes each; several workers or machines share them);
- ``housekeeping``: sweeps, webhook deliveries, re-weighing finished runs, evaluation drivers.

``make demo`` starts one worker per queue; a deployment runs as many as it needs of each, on any machine
(``celery -A kgv_web worker -Q verification``). Nothing here imports the task functions: the worker's
``verifier/tasks.py`` imports downward, and callers name the task they want.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from celery import current_app
from django.conf import settings
from django.db import transaction

RUN_VERIFICATION = "verifier.run_verification"
VERIFY_CLAIM = "verifier.verify_claim"
TRAIN_STRUCTURAL_MODEL = "verifier.train_structural_model"
PREPARE_AUDIT = "verifier.prepare_audit"
AUDIT_CHUNK = "verifier.audit_chunk"
ONBOARD_KG = "verifier.onboard_kg"
REASSESS_CONFIDENCE = "verifier.reassess_confidence"
DRIVE_EVALUATION = "verifier.drive_evaluation"
DELIVER_WEBHOOK = "verifier.deliver_webhook"


def queue_of(name: str) -> str:
    """The queue a task is routed to (``CELERY_TASK_ROUTES``)."""
    try:
        return settings.CELERY_TASK_ROUTES[name]["queue"]
    except KeyError:
        raise ValueError(f"no queue is routed the task {name!r} (CELERY_TASK_ROUTES)") from None


def enqueue(name: str, *args, task_id: str | None = None) -> None:
    """Send the task ``name`` with ``args`` once the current transaction commits (at once outside one): a worker
    never reads a row the sender has not committed, and a rolled-back request sends nothing."""
    queue_of(name)  # an unknown name fails here, in the caller, not silently in the broker
    transaction.on_commit(lambda: send_now(name, *args, task_id=task_id))


def send_now(name: str, *args, task_id: str | None = None) -> None:
    """Send the task at once, on its queue (the sweeps that re-send lost messages, outside any transaction)."""
    current_app.send_task(name, args=list(args), task_id=task_id)


def worker_commands(celery: Path, concurrency: int, schedule: Path) -> list[tuple[list[str], Callable[[], None] | None]]:
    """The commands of one worker per queue, as ``make demo`` starts them, each with what runs in the child first:
    verification takes ``concurrency`` runs at once; training and the audit one job each, at a lower CPU priority so
    that runs beside them keep their pace (a training uses every core it is given); housekeeping also runs Celery beat
    (-B), which sweeps stalled runs and audits and retries webhook deliveries."""

    def worker(queue: str, slots: int, *extra: str) -> list[str]:
        return [str(celery), "-A", "kgv_web", "worker", "--loglevel", "INFO", "-Q", queue, "--concurrency", str(slots),
                "--hostname", f"kgv-{queue}@%h", *extra]

    def lower_priority() -> None:
        os.nice(10)

    return [(worker("verification", concurrency), None),
            (worker("training", 1), lower_priority),
            (worker("audit", 1), lower_priority),
            (worker("housekeeping", 1, "-B", "--schedule", str(schedule)), None)]
