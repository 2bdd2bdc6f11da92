"""Creating, driving and resuming evaluations.

An evaluation is created once from its parameters (the benchmark is drawn, its triples become
verification tasks tagged ``evaluation:<name>``, one item per triple and repeat). Driving it keeps at
most ``concurrency`` of its runs in flight on the Celery workers and waits for them; the command that
created it can die at any moment. Driving it again (``--resume``, or the same command again) queues
only what has no finished run:

- an item whose run succeeded is kept as it is;
- an item whose run failed (the LLM was down, the worker died and the run was closed as failed) or was
  cancelled gets a fresh run; within one session a failure is retried once, then counted as wrong;
- an item whose run is still queued or running from an earlier session is kept if a live worker holds
  it, otherwise it is superseded (cancelled, noted) and gets a fresh run.

Only one process drives an evaluation at a time: each writes a heartbeat, and a fresh heartbeat from
another process makes a second driver stop with a message.
"""

from __future__ import annotations

import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from django.db import connection, transaction
from django.db.models import F, Q
from django.utils import timezone
from django.utils.text import slugify
from tqdm import tqdm

from verifier import confidence
from verifier.benchmarks.datasets import Benchmark, benchmark_kg, build_benchmark
from verifier.errors import ApplicationError
from verifier.evaluation import outcomes
from verifier.evaluation.configs import Configuration, run_config
from verifier.evaluation.workers import runs_held_by_workers
from verifier.models import Evaluation, EvaluationItem, Run, VerificationTask
from verifier.queue_filters import EVALUATION_SOURCE_PREFIX
from verifier.services import cancel_run, record_audit, start_run

HEARTBEAT_STALE = timedelta(seconds=10)
ABANDONED_SECONDS = 300  # a driver beats every second: this long silent, it is gone
WORKER_DRIVER_LOCK = 0x4B4756_0001  # the advisory lock of ``worker_driver_turn``
WORKER_DRIVER_WAIT_SECONDS = 10  # how soon a worker-driven evaluation waiting its turn asks again
RETRIED = (Run.Status.FAILED, Run.Status.CANCELLED)
QUICK_POLL = 0.05  # seconds: the driver's next look after a round in which runs ended or started
SUPERSEDED_NOTE = "superseded: evaluation {name} resumed and no live worker held this run; a fresh run replaces it"
STOPPED_NOTE = "stopped with evaluation {name}: its worker was stopped before the run ended; resuming gives it a fresh run"


class EvaluationError(ApplicationError):
    """The evaluation cannot be created or driven as asked; the message says why."""


class EvaluationStopped(EvaluationError):
    """The evaluation was stopped (the workbench's Stop) while this process drove it."""


@dataclass(frozen=True)
class EvaluationSpec:
    benchmark: str
    n: int
    seed: int = 0
    mode: str = "agent"
    ablations: tuple[str, ...] = ()
    repeats: int = 1
    concurrency: int = 1
    abstain: bool = False
    t_max: int | None = None
    samples: int | None = None
    kg_name: str | None = None
    types: str = "auto"
    name: str | None = None
    suite: str = ""
    profile: str | None = None
    for_fit: bool = False  # the runs are data for a confidence model's fit: weighed or not, they are what a fit needs

    @property
    def config(self) -> dict:
        return run_config(self.mode, self.ablations, abstain=self.abstain, t_max=self.t_max, samples=self.samples,
                          profile=self.profile)

    @property
    def resolved_name(self) -> str:
        if self.name:
            return slugify(self.name)
        stem = self.benchmark if "/" not in self.benchmark and "." not in self.benchmark else Path(self.benchmark).stem
        profile = self.config.get("profile", "")
        parts = [self.suite, stem, Configuration(self.mode, self.ablations).slug, profile, f"n{self.n}", f"s{self.seed}"]
        if self.repeats > 1:
            parts.append(f"k{self.repeats}")
        if self.abstain:
            parts.append("abstain")
        return slugify("-".join(p for p in parts if p))


def _same_parameters(evaluation: Evaluation, spec: EvaluationSpec) -> list[str]:
    wanted = {"benchmark": spec.benchmark, "sample_size": spec.n, "seed": spec.seed, "mode": spec.mode,
              "ablations": list(spec.ablations), "repeats": spec.repeats, "config": spec.config}
    return [f"{field}: {getattr(evaluation, field)!r} ≠ {value!r}" for field, value in wanted.items()
            if getattr(evaluation, field) != value]


def prepare(spec: EvaluationSpec, *, actor=None) -> tuple[Evaluation, bool]:
    """The evaluation named by ``spec`` — the existing one (to be resumed) or a new one. (evaluation, created)"""
    name = spec.resolved_name
    existing = Evaluation.objects.filter(name=name).first()
    if existing is not None:
        differences = _same_parameters(existing, spec)
        if differences:
            raise EvaluationError(f"an evaluation named {name!r} exists with other parameters ({'; '.join(differences)}); "
                                  f"choose another --name, or --resume {existing.pk}")
        return existing, False
    if spec.repeats < 1 or spec.concurrency < 1:
        raise EvaluationError("--repeats and --concurrency must be at least 1")
    try:
        config = spec.config
    except ValueError as exc:
        raise EvaluationError(str(exc)) from None
    if not spec.for_fit:
        try:  # before the draw, which can take a while on a large KG
            confidence.require_weighing(benchmark_kg(spec.benchmark, spec.kg_name).pk, spec.mode)
        except confidence.Unweighed as exc:
            raise EvaluationError(f"{exc}; runs meant only as data for a fit: manage.py evaluate … --for-fit") from None
    benchmark = build_benchmark(spec.benchmark, n=spec.n, seed=spec.seed, kg_name=spec.kg_name, types=spec.types)
    return create(name, spec, benchmark, config, actor=actor), True


def create(name: str, spec: EvaluationSpec, benchmark: Benchmark, config: dict, *, actor=None) -> Evaluation:
    """Store the evaluation, its tasks (existing tasks of the same triples are reused) and its items."""
    source = f"{EVALUATION_SOURCE_PREFIX}{name}"
    with transaction.atomic():
        evaluation = Evaluation.objects.create(
            name=name, suite=spec.suite, kg=benchmark.kg, benchmark=spec.benchmark, sample_size=spec.n, seed=spec.seed,
            mode=spec.mode, ablations=list(spec.ablations), repeats=spec.repeats, concurrency=spec.concurrency,
            config=config, dataset=benchmark.notes, created_by=actor if getattr(actor, "is_authenticated", False) else None)
        VerificationTask.objects.bulk_create([
            VerificationTask(kg=benchmark.kg, head_id=t.head_id, relation_id=t.relation_id, tail_id=t.tail_id,
                             expected_label=t.label, source=f"{source} ({t.origin})"[:500])
            for t in benchmark.triples
        ], ignore_conflicts=True, batch_size=2000)
        tasks = _tasks_by_triple(benchmark)
        for label in (True, False):  # tasks queued earlier without a gold label get the benchmark's
            VerificationTask.objects.filter(pk__in=[tasks[t.key] for t in benchmark.triples if t.label is label],
                                            expected_label__isnull=True).update(expected_label=label)
        EvaluationItem.objects.bulk_create([
            EvaluationItem(evaluation=evaluation, task_id=tasks[t.key], repeat=repeat, expected_label=t.label, position=position)
            for position, t in enumerate(benchmark.triples) for repeat in range(spec.repeats)
        ], batch_size=2000)
        record_audit(actor=actor, action="evaluation.create", obj=evaluation,
                     after={"benchmark": spec.benchmark, "n": len(benchmark.triples), "config": config, "repeats": spec.repeats})
    return evaluation


def _tasks_by_triple(benchmark: Benchmark) -> dict[tuple[int, int, int], int]:
    heads = {t.head_id for t in benchmark.triples}
    rows = VerificationTask.objects.filter(kg=benchmark.kg, head_id__in=heads).values_list("pk", "head_id", "relation_id", "tail_id")
    return {(h, r, t): pk for pk, h, r, t in rows}


# ---------------------------------------------------------------------------------------------- driving


def _claim(evaluation: Evaluation, force: bool) -> None:
    with transaction.atomic():
        locked = Evaluation.objects.select_for_update().get(pk=evaluation.pk)
        now = timezone.now()
        fresh = locked.heartbeat_at is not None and now - locked.heartbeat_at < HEARTBEAT_STALE
        if locked.status == Evaluation.Status.RUNNING and fresh and not force:
            raise EvaluationError(f"evaluation {locked.name} (#{locked.pk}) is being driven by another process "
                                  f"(heartbeat {int((now - locked.heartbeat_at).total_seconds())} s ago); wait for it, "
                                  f"or stop it and resume after {int(HEARTBEAT_STALE.total_seconds())} s")
        locked.status, locked.heartbeat_at = Evaluation.Status.RUNNING, now
        locked.started_at = locked.started_at or now
        locked.save(update_fields=["status", "heartbeat_at", "started_at"])
    evaluation.refresh_from_db()


def supersede_orphans(evaluation: Evaluation, held: set[int] | None = None, note: str = SUPERSEDED_NOTE) -> int:
    """Cancel the evaluation's queued/running runs that no live worker holds (left by a dead driver or
    worker, or by a worker stopped with its driver), noting why; their items get fresh runs when the
    evaluation is driven again. Returns how many were cancelled."""
    orphans = list(Run.objects.filter(evaluation_items__evaluation=evaluation).in_flight())
    if not orphans:
        return 0
    held = runs_held_by_workers() if held is None else held
    superseded = 0
    for run in orphans:
        if run.pk in held:
            continue
        if cancel_run(run=run):
            Run.objects.filter(pk=run.pk).update(error=note.format(name=evaluation.name))
            superseded += 1
    return superseded


def _start(evaluation: Evaluation, item: EvaluationItem) -> None:
    with transaction.atomic():
        run = start_run(task=item.task, config=evaluation.config, actor=evaluation.created_by, unweighed_ok=True)
        EvaluationItem.objects.filter(pk=item.pk).update(run=run, attempts=F("attempts") + 1)


@dataclass
class Progress:
    total: int
    done: int
    in_flight: int
    right: int
    failed: int

    def postfix(self) -> str:
        accuracy = f"{self.right / self.done:.1%}" if self.done else "–"
        return f"acc {accuracy}, running {self.in_flight}, failed {self.failed}"


def step(evaluation: Evaluation, retries: Counter, *, concurrency: int, max_retries: int = 1) -> Progress:
    """One round: queue runs for items that need one (up to ``concurrency`` in flight), report progress. It reads
    each item's run status as plain values (a round runs several times a second while runs end quickly) and loads
    only the items it starts."""
    rows = (EvaluationItem.objects.filter(evaluation=evaluation).order_by("position", "repeat")
            .values_list("pk", "task_id", "run_id", "run__status", "run__verdict", "expected_label"))
    in_flight, needs_run, finished = [], [], []
    for row in rows:
        pk, _, run_id, status, _, _ = row
        if run_id is not None and status in Run.IN_FLIGHT:
            in_flight.append(row)
        elif run_id is None or (status in RETRIED and retries[pk] < max_retries):
            needs_run.append(row)
        else:
            finished.append(row)
    # One run in flight per task (start_run's rule): the repeats of a triple run one after another, and a triple
    # another evaluation (or a curator) is verifying waits for that run to end.
    busy = {task_id for _, task_id, *_ in in_flight} | set(
        Run.objects.filter(task_id__in={task_id for _, task_id, *_ in needs_run}).in_flight().values_list("task_id", flat=True))
    starting = []
    for pk, task_id, run_id, *_ in needs_run:
        if len(starting) >= max(0, concurrency - len(in_flight)):
            break
        if task_id not in busy:
            starting.append((pk, run_id))
            busy.add(task_id)
    items = EvaluationItem.objects.select_related("task").in_bulk([pk for pk, _ in starting])
    for pk, run_id in starting:
        if run_id is not None:
            retries[pk] += 1
        _start(evaluation, items[pk])
    right = sum(1 for *_, verdict, label in finished if verdict == ("correct" if label else "incorrect"))
    failed = sum(1 for *_, status, _, _ in finished if status != Run.Status.SUCCEEDED)
    return Progress(len(rows), len(finished), len(in_flight) + len(starting), right, failed)


def drive(evaluation: Evaluation, *, concurrency: int | None = None, poll: float = 1.0, progress: bool = True,
          force: bool = False, max_retries: int = 1, log: Callable[[str], None] = print) -> Evaluation:
    """Run the evaluation to its end (see the module docstring) and store its metrics.

    It looks again soon after a round in which runs ended or started (a model-free run takes a fraction of a
    second, so waiting a whole ``poll`` between rounds would idle the workers most of the time) and backs off to
    ``poll`` while nothing changes (an agent run takes tens of seconds)."""
    _claim(evaluation, force)
    concurrency = concurrency or evaluation.concurrency
    superseded = supersede_orphans(evaluation)
    if superseded:
        log(f"{superseded} run(s) left unfinished by a stopped worker or driver get fresh runs.")
    retries: Counter = Counter()
    session_started = time.monotonic()
    # On a terminal the bar redraws every poll; into a log file (a long evaluation under nohup) once a minute.
    redraw_every = poll if sys.stderr.isatty() else 60.0
    bar = tqdm(total=evaluation.items.count(), desc=evaluation.name, unit="run", disable=not progress, dynamic_ncols=True,
               mininterval=redraw_every)
    redrawn = beat = time.monotonic()
    wait, last = QUICK_POLL, None
    try:
        while True:
            state = step(evaluation, retries, concurrency=concurrency, max_retries=max_retries)
            bar.set_postfix_str(state.postfix(), refresh=False)
            bar.update(state.done - bar.n)
            if time.monotonic() - redrawn >= redraw_every:
                bar.refresh()
                redrawn = time.monotonic()
            if state.done == state.total:
                break
            if time.monotonic() - beat >= 1.0:
                if not Evaluation.objects.filter(pk=evaluation.pk, status=Evaluation.Status.RUNNING).update(heartbeat_at=timezone.now()):
                    raise EvaluationStopped(f"evaluation {evaluation.name} was stopped; resume it to verify the rest")
                beat = time.monotonic()
            wait = QUICK_POLL if (state.done, state.in_flight) != last else min(poll, wait * 2)
            last = (state.done, state.in_flight)
            time.sleep(wait)
    except EvaluationStopped:
        _record_session(evaluation, session_started, None)  # stop() set its status, and a resumed driver may own it now
        raise
    except BaseException:
        if not connection.in_atomic_block:
            # A signal that lands mid-query leaves the connection waiting for that query's answer ("another
            # command is already in progress"): the stop is recorded on a fresh one.
            connection.close()
        _record_session(evaluation, session_started, Evaluation.Status.INTERRUPTED)
        raise
    finally:
        bar.close()
    return finish(evaluation, session_started)


@contextmanager
def worker_driver_turn() -> Iterator[bool]:
    """Whether this worker process may drive an evaluation now: one at a time is driven inside the workers (the
    workbench's), because a driver holds a worker process for the evaluation's length, and two on a two-process
    worker would leave none to run their runs. A PostgreSQL advisory lock, released with the connection if the
    process dies."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s)", [WORKER_DRIVER_LOCK])
        held = cursor.fetchone()[0]
    try:
        yield held
    finally:
        if held and connection.connection is not None:  # a connection closed meanwhile took the lock with it
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_unlock(%s)", [WORKER_DRIVER_LOCK])


def stop(evaluation: Evaluation) -> bool:
    """Ask the process driving ``evaluation`` to stop (it sees it within a second and starts no more runs; those in
    flight finish and count). False when it was not running."""
    return bool(Evaluation.objects.filter(pk=evaluation.pk, status=Evaluation.Status.RUNNING)
                .update(status=Evaluation.Status.INTERRUPTED, heartbeat_at=None, worker_driver=""))


def withdraw(evaluation: Evaluation) -> bool:
    """Take back the evaluation from a workbench driver still waiting its turn: when the turn comes it drives nothing.
    False when none was waiting (or it is driving already: ``stop`` halts that one)."""
    waiting = (Evaluation.Status.CREATED, Evaluation.Status.INTERRUPTED)  # as Evaluation.waiting_for_worker says
    return bool(Evaluation.objects.filter(pk=evaluation.pk, status__in=waiting).exclude(worker_driver="")
                .update(worker_driver=""))


def sweep_abandoned() -> list[int]:
    """Mark interrupted every evaluation said to be running whose driver stopped heartbeating (killed with no chance
    to say so, or lost with its machine), so none shows "running" while nobody drives it; ``--resume`` takes it on.
    Its runs are left to the workers and to the runs' own sweep. Returns the ids marked. Celery beat calls it with
    the runs' sweep."""
    cutoff = timezone.now() - timedelta(seconds=ABANDONED_SECONDS)
    abandoned = Q(status=Evaluation.Status.RUNNING) & (Q(heartbeat_at__lt=cutoff) | Q(heartbeat_at__isnull=True))
    marked = list(Evaluation.objects.filter(abandoned).values_list("pk", flat=True))
    Evaluation.objects.filter(abandoned, pk__in=marked).update(status=Evaluation.Status.INTERRUPTED, heartbeat_at=None,
                                                               worker_driver="")
    return marked


def _record_session(evaluation: Evaluation, started: float, status: str | None, figures: dict | None = None) -> None:
    """End a driving session in one write: its status (None: left as it is), the time it drove and, when it finished,
    its figures (a reader never sees it finished without them)."""
    elapsed = time.monotonic() - started
    evaluation.refresh_from_db(fields=["metrics"])
    driving = evaluation.metrics.get("driving_seconds", 0.0) + elapsed
    fields = {"metrics": {**(evaluation.metrics if figures is None else figures), "driving_seconds": driving}}
    if status is not None:
        fields.update(status=status, heartbeat_at=None)
    if status == Evaluation.Status.FINISHED:
        fields["finished_at"] = timezone.now()
    Evaluation.objects.filter(pk=evaluation.pk).update(**fields)
    evaluation.refresh_from_db()


def refresh_metrics(evaluation: Evaluation) -> dict:
    """Recompute the evaluation's metrics from its runs and store them (kept: the time spent driving)."""
    figures = outcomes.figures(evaluation)
    figures["driving_seconds"] = evaluation.metrics.get("driving_seconds", 0.0)
    evaluation.metrics = figures
    evaluation.save(update_fields=["metrics"])
    return figures


def finish(evaluation: Evaluation, session_started: float) -> Evaluation:
    _record_session(evaluation, session_started, Evaluation.Status.FINISHED, outcomes.figures(evaluation))
    return evaluation
