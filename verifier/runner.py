"""Running one investigation for a Run row: every step persisted the moment it happens (numbered),
then broadcast after commit; support items, memories used, tokens, cost and the verdict recorded.

Idempotent under re-delivery: a finished run is left alone; a run found half-done (its worker died)
is closed as failed with the reason, never resumed with duplicated or renumbered steps.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import timedelta
from functools import partial

from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import InterfaceError, OperationalError, connection, transaction
from django.utils import timezone
from tenacity import retry, retry_if_exception_type, stop_after_delay, wait_exponential

from verifier.agent.llm import LLM, LLMError
from verifier.agent.loop import MODEL_FREE_MODES, Investigation
from verifier.agent.steps import Claim, VerdictStep
from verifier.agent.steps import Step as AgentStep
from verifier.confidence import assess, weigher_for
from verifier.memory import bank
from verifier.models import Run, RunMemory, Step, SupportItem, VerificationTask
from verifier.quality import signals_of
from verifier.realtime.publish import publish_run_status, publish_step
from verifier.structure.training import training_to_await
from verifier.wiring import build_llm, build_toolbox

logger = logging.getLogger(__name__)

def claim_of(task: VerificationTask) -> Claim:
    return Claim(task.head.external_id, task.relation.external_id, task.tail.external_id,
                 task.head.label or task.head.external_id, task.relation.label or task.relation.external_id,
                 task.tail.label or task.tail.external_id)


# A write that ends a run must land even when the database connection was lost mid-run (PostgreSQL restarted,
# a failover): the broken connection is dropped and the write retried on a new one for up to a minute.
# Beyond that the run stays running without a heartbeat, and the sweeper fails it once the database is back.
_reconnecting = retry(retry=retry_if_exception_type((OperationalError, InterfaceError)), stop=stop_after_delay(60),
                      wait=wait_exponential(multiplier=0.5, max=5), before_sleep=lambda _: connection.close(), reraise=True)


@_reconnecting
def _finish(run: Run, status: str, **fields) -> bool:
    """End a running run and settle its task, in one transaction (Run.finish: a run a curator cancelled, or a
    sweeper failed, meanwhile keeps that state), and tell its followers. False when the run was no longer running."""
    with transaction.atomic():
        ended = run.finish(status, **fields)
        if ended:
            publish_run_status(run)
    return ended


def _failure(error: Exception) -> str:
    """What a failed run tells the curator: the error itself for the failures we expect (endpoint, bad
    configuration or data), its type too for anything else (the worker log holds the traceback)."""
    if isinstance(error, SoftTimeLimitExceeded):
        return f"the run exceeded its time limit ({settings.KGV_RUN_TIME_LIMIT // 60} minutes, KGV_RUN_TIME_LIMIT); its steps are kept"
    if isinstance(error, LLMError | ValueError | RuntimeError):
        return str(error)
    if isinstance(error, OperationalError | InterfaceError):
        return f"the database connection was lost mid-run ({error}); the steps stored before are kept; start a new run"
    return f"internal error ({type(error).__name__}: {error}); the worker log has the details"


def _persist(run: Run, seq: int, step: AgentStep) -> Step | None:
    """Store one step with its evidence and add its tokens and cost to the run's, in one transaction.

    Adding to the counters also tells whether a curator cancelled the run (Run.charge): the step is then not
    stored and None is returned.
    """
    record = step.record()
    spent = record.usage
    with transaction.atomic():
        if not run.charge(spent.prompt_tokens, spent.completion_tokens, spent.cost_usd):
            return None
        row = Step.objects.create(
            run=run, seq=seq, kind=record.kind, content=record.content, tool=record.tool, arguments=record.arguments,
            prompt_tokens=spent.prompt_tokens, completion_tokens=spent.completion_tokens, cost_usd=spent.cost_usd,
            duration_ms=spent.duration_ms,
        )
        # Keys are stable within the run: an item seen again keeps its first row (ignore_conflicts).
        SupportItem.objects.bulk_create([
            SupportItem(run=run, step=row, key=item.key, kind=item.kind, text=item.text, payload=item.payload,
                        source=item.source, content_hash=item.content_hash)
            for item in record.items
        ], ignore_conflicts=True)
        publish_step(row)
    return row


def execute_run(run_id: int, *, llm: LLM | None = None, on_step: Callable[[Step], None] | None = None,
                await_structure: bool = True) -> Run:
    """Run the investigation of ``run_id`` to its end (see the module docstring). A run on a KG whose first structural
    model is being trained does not start: it stays queued, ``awaiting_model`` names the training, and the
    training's end sends it again (``await_structure=False``: start regardless; the caller waited itself)."""
    with transaction.atomic():
        # of=("self",): lock the run row only. A plain FOR UPDATE also locks every joined row, and all runs of a
        # KG join its one KnowledgeGraph row, so runs starting together queued behind each other's first commit.
        run = (Run.objects.select_for_update(of=("self",))
               .select_related("task__kg", "task__head", "task__relation", "task__tail").get(pk=run_id))
        if run.is_finished:
            return run
        if run.status == Run.Status.RUNNING or run.steps.exists():
            run.abandon("the worker running this investigation stopped mid-run; start a new run")
            publish_run_status(run)
            return run
        if await_structure and (awaited := _training_to_await(run)) is not None:
            run.park(awaited)
            publish_run_status(run)
            return run
        run.start()
        publish_run_status(run)  # a page opened while the run was queued shows it running, its time counting
    with _Heartbeat(run.pk):
        return _investigate(run, llm, on_step)


def _training_to_await(run: Run):
    """The structural model's training this run must wait for, if its configuration uses the structure."""
    return training_to_await(run.task.kg) if run.agent_config.uses_structure else None


def _investigate(run: Run, llm: LLM | None, on_step) -> Run:
    task = run.task
    try:
        config = run.agent_config  # settled when the run was created (wiring.settle_config)
        if llm is None and config.mode not in MODEL_FREE_MODES:
            llm = build_llm(use_grammar=config.use_grammar)
        run.model = getattr(llm, "model", "")
        Run.objects.filter(pk=run.pk).update(model=run.model)
        claim = claim_of(task)
        toolbox = build_toolbox(task.kg, claim, kg_tools=config.kg_tools, external_tools=config.external_tools,
                                structural_tools=config.structural_tools)
        investigation = Investigation(claim, config, llm=llm, tools=toolbox, memory=partial(bank.for_claim, kg=task.kg),
                                      weigher=weigher_for(task))
        final = _drive(run, investigation, on_step)
        if final is not None:
            SupportItem.objects.filter(run=run, key__in=final.cited).update(cited=True)
            assessment = assess(run, verdict=final.verdict or "", stated=final.confidence, weighed=final.assessment)
            run.verdict = final.verdict or ""
            signals = signals_of(run, forced=final.forced)
    except Exception as error:  # noqa: BLE001 — whatever went wrong, the run ends failed and its task is free again
        expected = isinstance(error, LLMError | ValueError | RuntimeError)
        (logger.warning if expected else logger.exception)("run %s failed: %s", run.pk, error)
        if isinstance(error, OperationalError | InterfaceError):
            connection.close()  # the connection broke under the investigation; the writes below open a new one
        _finish(run, Run.Status.FAILED, error=_failure(error)[:4000])
        return run
    if final is None:  # cancelled: the task goes back to the queue
        VerificationTask.release(task.pk)
        return run
    _finish(run, Run.Status.SUCCEEDED, verdict=run.verdict, explanation=final.explanation,
            confidence=assessment.confidence, disputed=assessment.disputed, assessment=assessment.details,
            structural_model_id=assessment.structural_model, signals=signals)
    return run


# A running run stamps Run.heartbeat_at this often, from a thread beside the investigation (a model call may
# take many minutes); the sweeper fails a running run silent for STALL_SECONDS: its worker is gone.
HEARTBEAT_SECONDS = 30
STALL_SECONDS = 300


class _Heartbeat:
    def __init__(self, run_id: int):
        self.run_id = run_id
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name=f"run-{run_id}-heartbeat", daemon=True)

    def __enter__(self) -> _Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _beat(self) -> None:
        try:
            while not self._stop.wait(HEARTBEAT_SECONDS):
                try:
                    Run.objects.filter(pk=self.run_id).beat()
                except Exception:  # noqa: BLE001 — a missed beat must never disturb the run; the sweeper tolerates several
                    logger.warning("heartbeat of run %s missed", self.run_id, exc_info=True)
                    connection.close()  # a lost connection (database restarted) is replaced at the next beat
        finally:
            connection.close()  # this thread's own connection


def sweep_stalled_runs() -> list[int]:
    """Fail every running run whose worker stopped heartbeating (killed, or lost with its machine), with the
    reason, and free its task. Returns the ids failed. Celery beat calls it every minute (settings)."""
    cutoff = timezone.now() - timedelta(seconds=STALL_SECONDS)
    failed = []
    for run in Run.objects.stalled(cutoff):
        reason = (f"the worker running this investigation stopped (no sign of life for {STALL_SECONDS // 60} minutes); "
                  "its steps are kept; start a new run")
        with transaction.atomic():
            if not Run.objects.stalled(cutoff).filter(pk=run.pk).end(Run.Status.FAILED, error=reason):
                continue  # it came back to life, or ended, in the meantime
            run.refresh_from_db()
            VerificationTask.release(run.task_id)
            publish_run_status(run)
        failed.append(run.pk)
    if failed:
        logger.warning("failed %d stalled run(s): %s", len(failed), failed)
    return failed


def _drive(run: Run, investigation: Investigation, on_step) -> VerdictStep | None:
    seq, final, memories_recorded = 0, None, False
    for step in investigation.steps():
        if not memories_recorded:
            RunMemory.objects.bulk_create([RunMemory(run=run, entry_id=m.id, similarity=m.similarity, rank=rank)
                                           for rank, m in enumerate(investigation.memories, start=1)])
            memories_recorded = True
        seq += 1
        row = _persist(run, seq, step)
        if row is None:  # cancelled
            return None
        if on_step is not None:
            on_step(row)
        if isinstance(step, VerdictStep):
            final = step
    if final is None:
        raise RuntimeError("the investigation ended without a verdict")
    return final
