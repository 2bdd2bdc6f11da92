"""Running one investigation for a Run row: every step persisted the moment it happens (numbered),
then broadcast after commit; support items, memories used, tokens, cost and the verdict recorded.

Idempotent under re-delivery: a finished run is left alone; a run found half-done (its worker died)
is closed as failed with the reason, never resumed with duplicated or renumbered steps.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from decimal import Decimal

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from verifier.agent.llm import LLM, LLMError
from verifier.agent.loop import STRUCTURAL_MODES, AgentConfig, Investigation
from verifier.agent.steps import AgentStep, Claim
from verifier.confidence import assess, weigher_for
from verifier.memory import bank
from verifier.models import Run, RunMemory, Step, SupportItem, VerificationTask
from verifier.realtime.publish import publish_run_status, publish_step
from verifier.tools.base import QueryTriple
from verifier.wiring import backend_for, build_llm, build_toolbox, settled_config

logger = logging.getLogger(__name__)

FINISHED = {Run.Status.SUCCEEDED, Run.Status.FAILED, Run.Status.CANCELLED}


def claim_of(task: VerificationTask) -> Claim:
    return Claim(task.head.external_id, task.relation.external_id, task.tail.external_id,
                 task.head.label or task.head.external_id, task.relation.label or task.relation.external_id,
                 task.tail.label or task.tail.external_id)


def _schema(task: VerificationTask) -> str:
    from verifier.tools.kg_definition import relation_text

    profile = backend_for(task.kg).relation(task.relation.external_id)
    return relation_text(profile) if profile else ""


def _set_status(run: Run, status: str, **fields) -> None:
    with transaction.atomic():
        for name, value in fields.items():
            setattr(run, name, value)
        run.status = status
        run.save()
        publish_run_status(run)


def _persist(run: Run, seq: int, step: AgentStep, prices) -> Step | None:
    """Store one step with its evidence and add its tokens and cost to the run, in one transaction.

    The counter UPDATE also tells whether a curator cancelled the run (it then matches no row): the
    step is not stored and None is returned.
    """
    with transaction.atomic():
        prompt_tokens = run.prompt_tokens + step.prompt_tokens
        completion_tokens = run.completion_tokens + step.completion_tokens
        cost = prices.cost(run.model, prompt_tokens, completion_tokens) if prices is not None else Decimal(0)
        live = Run.objects.filter(pk=run.pk).exclude(status=Run.Status.CANCELLED).update(
            prompt_tokens=prompt_tokens, completion_tokens=completion_tokens, cost_usd=cost)
        if not live:
            return None
        run.prompt_tokens, run.completion_tokens, run.cost_usd = prompt_tokens, completion_tokens, cost
        row = Step.objects.create(
            run=run, seq=seq, kind=step.kind, content=step.content, tool=step.tool, arguments=step.arguments,
            prompt_tokens=step.prompt_tokens, completion_tokens=step.completion_tokens, duration_ms=step.duration_ms,
        )
        # Keys are stable within the run: an item seen again keeps its first row (ignore_conflicts).
        SupportItem.objects.bulk_create([
            SupportItem(run=run, step=row, key=item.key, kind=item.kind, text=item.text, payload=item.payload,
                        source=item.source, content_hash=item.content_hash)
            for item in step.items
        ], ignore_conflicts=True)
        publish_step(row)
    return row


def execute_run(run_id: int, *, llm: LLM | None = None, on_step: Callable[[Step], None] | None = None) -> Run:
    """Run the investigation of ``run_id`` to its end (see the module docstring)."""
    with transaction.atomic():
        # of=("self",): lock the run row only. A plain FOR UPDATE also locks every joined row, and all runs of a
        # KG join its one KnowledgeGraph row, so runs starting together queued behind each other's first commit.
        run = (Run.objects.select_for_update(of=("self",))
               .select_related("task__kg", "task__head", "task__relation", "task__tail").get(pk=run_id))
        if run.status in FINISHED:
            return run
        if run.status == Run.Status.RUNNING or run.steps.exists():
            run.status, run.finished_at = Run.Status.FAILED, timezone.now()
            run.error = "the worker running this investigation stopped mid-run; start a new run"
            run.save()
            VerificationTask.objects.filter(pk=run.task_id, status=VerificationTask.Status.RUNNING).update(
                status=VerificationTask.Status.PENDING)
            publish_run_status(run)
            return run
        run.status, run.started_at = Run.Status.RUNNING, timezone.now()
        run.save()
        VerificationTask.objects.filter(pk=run.task_id).update(status=VerificationTask.Status.RUNNING)
    task = run.task
    try:
        if llm is None and run.config.get("mode") not in STRUCTURAL_MODES:  # structural baselines need no model
            llm = build_llm(use_grammar=run.config.get("use_grammar"))
        # The profile and its defaults follow the model that answers, unless the run's config chose them.
        run.config = settled_config(run.config, llm)
        Run.objects.filter(pk=run.pk).update(config=run.config)
        # Small local models follow the step format only under a grammar; the endpoint says if it takes one.
        config = AgentConfig.from_dict({"use_grammar": getattr(llm, "supports_grammar", False),
                                         "tool_calling": settings.LLM_TOOL_CALLING, **run.config})
        run.model = getattr(llm, "model", "")
        claim = claim_of(task)
        query = QueryTriple(claim.head, claim.relation, claim.tail, claim.head_label, claim.relation_label, claim.tail_label)
        toolbox = build_toolbox(task.kg, query, kg_tools=config.kg_tools, external_tools=config.external_tools,
                                structural_tools=config.structural_tools)
        investigation = Investigation(claim, config, llm=llm, tools=toolbox, memory=bank.for_claim, schema=_schema(task),
                                      weigher=weigher_for(task.kg_id))
        final = _drive(run, investigation, on_step)
    except (LLMError, ValueError, RuntimeError) as error:
        logger.warning("run %s failed: %s", run.pk, error)
        _set_status(run, Run.Status.FAILED, error=str(error), finished_at=timezone.now())
        VerificationTask.objects.filter(pk=task.pk).update(status=VerificationTask.Status.PENDING)
        return run
    if final is None:  # cancelled: the task goes back to the queue
        VerificationTask.objects.filter(pk=task.pk).update(status=VerificationTask.Status.PENDING)
        return run
    SupportItem.objects.filter(run=run, key__in=final.cited).update(cited=True)
    assessment = assess(run, verdict=final.verdict or "", stated=final.confidence, weighed=final.assessment)
    _set_status(run, Run.Status.SUCCEEDED, verdict=final.verdict or "", explanation=final.explanation,
                finished_at=timezone.now(), confidence=assessment.confidence, disputed=assessment.disputed,
                assessment=assessment.details, structural_model_id=assessment.structural_model)
    VerificationTask.objects.filter(pk=task.pk).update(status=VerificationTask.Status.VERIFIED)
    return run


def _drive(run: Run, investigation: Investigation, on_step) -> AgentStep | None:
    seq, final, memories_recorded = 0, None, False
    prices = getattr(investigation.llm, "prices", None)
    for step in investigation.steps():
        if not memories_recorded:
            RunMemory.objects.bulk_create([RunMemory(run=run, entry_id=m.id, similarity=m.similarity, rank=rank)
                                           for rank, m in enumerate(investigation.memories, start=1)])
            memories_recorded = True
        seq += 1
        row = _persist(run, seq, step, prices)
        if row is None:  # cancelled
            return None
        if on_step is not None:
            on_step(row)
        if step.kind == "verdict":
            final = step
    if final is None:
        raise RuntimeError("the investigation ended without a verdict")
    return final


def elapsed_ms(run: Run) -> int:
    end = run.finished_at or timezone.now()
    return int((end - run.started_at).total_seconds() * 1000) if run.started_at else 0

