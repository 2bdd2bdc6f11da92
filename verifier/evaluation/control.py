"""Starting, resuming and stopping an evaluation on the worker: one home for the rules the workbench's buttons and the
API share (``manage.py evaluate`` drives evaluations in its own process instead)."""

from __future__ import annotations

import uuid

from django.db import transaction

from verifier.benchmarks.datasets import BenchmarkError, available_benchmarks
from verifier.evaluation import driver
from verifier.models import Evaluation
from verifier.queueing import DRIVE_EVALUATION, enqueue
from verifier.services import record_audit

MAX_TRIPLES = 2000  # one evaluation handed to the worker; larger ones are drawn with manage.py evaluate
START_ERRORS = (driver.EvaluationError, BenchmarkError, ValueError)  # what a refused start raises, with its reason
RESUMABLE = (Evaluation.Status.CREATED, Evaluation.Status.INTERRUPTED)


def check_benchmark(spec: str) -> str:
    """``spec`` when it is a dataset benchmark whose KG and files are here: over the web an evaluation never names a
    file of the server's."""
    choices = available_benchmarks()
    if spec not in choices:
        raise BenchmarkError(f"{spec!r} is not a benchmark here; one of: {', '.join(choices) or 'none (no dataset KG is loaded)'}")
    return spec


def start(spec: driver.EvaluationSpec, *, actor) -> tuple[Evaluation, str]:
    """Draw the benchmark and hand the evaluation to the worker; an evaluation of the same parameters is resumed
    instead. (evaluation, outcome): "started", "resumed", or the status it has already ("finished", "running").
    Raises one of START_ERRORS when the benchmark cannot be drawn or the name is taken by other parameters."""
    check_benchmark(spec.benchmark)
    evaluation, created = driver.prepare(spec, actor=actor)
    if not created and evaluation.status not in RESUMABLE:
        return evaluation, evaluation.status
    _hand_to_worker(evaluation, actor=actor, action="evaluation.start" if created else "evaluation.resume")
    return evaluation, "started" if created else "resumed"


def resume(evaluation: Evaluation, *, actor, action: str = "evaluation.resume") -> bool:
    """Hand a created or interrupted evaluation (back) to the worker (audited as ``action``); False when it is running
    or finished."""
    if evaluation.status not in RESUMABLE:
        return False
    _hand_to_worker(evaluation, actor=actor, action=action)
    return True


def stop(evaluation: Evaluation, *, actor) -> str:
    """Stop a running evaluation ("stopped": no run is started for it any more; those under way finish and count) or
    take it back from a driver waiting its turn ("withdrawn"); "" when it was doing neither."""
    with transaction.atomic():
        outcome = "stopped" if driver.stop(evaluation) else "withdrawn" if driver.withdraw(evaluation) else ""
        if outcome:
            record_audit(actor=actor, action="evaluation.stop", obj=evaluation)
    evaluation.refresh_from_db()
    return outcome


def _hand_to_worker(evaluation: Evaluation, *, actor, action: str) -> None:
    """The worker starts the evaluation's runs one at a time and records the figures at the end. The driver's task id
    is stored first: a driver handed it before and still waiting its turn finds another id there and drives nothing."""
    driver = uuid.uuid4().hex
    with transaction.atomic():
        Evaluation.objects.filter(pk=evaluation.pk).update(worker_driver=driver)
        record_audit(actor=actor, action=action, obj=evaluation)
        enqueue(DRIVE_EVALUATION, evaluation.pk, task_id=driver)
    evaluation.refresh_from_db()
