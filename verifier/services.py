"""Writes. Every function here is keyword-only, atomic and leaves an audit event."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from django.db import transaction

from verifier.kg.flagged import read_flagged, resolve_rows
from verifier.kg.loader import ImportRejected
from verifier.models import AuditEvent, KnowledgeGraph, VerificationTask


def record_audit(*, actor, action: str, obj, before: dict | None = None, after: dict | None = None) -> AuditEvent:
    return AuditEvent.objects.create(
        actor=actor if getattr(actor, "is_authenticated", False) else None,
        action=action,
        object_type=obj._meta.label_lower,
        object_id=str(obj.pk),
        before=before,
        after=after,
    )


@dataclass
class TaskImportReport:
    created: int
    already_queued: int
    lines: int


def import_flagged_triples(*, kg: KnowledgeGraph, path: Path, actor=None, skip_invalid: bool = False) -> TaskImportReport:
    """Queue the flagged triples of a CSV/TSV file as verification tasks of ``kg``.

    All or nothing: any unreadable, unknown or ambiguous row rejects the whole file (listing every
    bad row) unless ``skip_invalid`` is set. Triples already queued are left as they are.
    """
    rows, problems = read_flagged(path)
    resolved, unresolved = resolve_rows(kg, rows, path)
    problems += unresolved
    if problems and not skip_invalid:
        raise ImportRejected(sorted(problems, key=lambda p: p.line))
    tasks = [
        VerificationTask(
            kg=kg,
            head_id=row.head_id,
            relation_id=row.relation_id,
            tail_id=row.tail_id,
            expected_label=row.label,
            source=f"{path.name}:{row.line}",
        )
        for row in resolved
    ]
    with transaction.atomic():
        before = VerificationTask.objects.filter(kg=kg).count()
        VerificationTask.objects.bulk_create(tasks, ignore_conflicts=True, batch_size=5000)
        created = VerificationTask.objects.filter(kg=kg).count() - before
        record_audit(
            actor=actor,
            action="tasks.import",
            obj=kg,
            after={"file": str(path), "created": created, "rows": len(resolved), "rejected": len(problems)},
        )
    return TaskImportReport(created=created, already_queued=len(resolved) - created, lines=len(rows))


def start_run(*, task: VerificationTask, config: dict | None = None, actor=None, queue: bool = True):
    """Create a run of ``task`` and queue it for a Celery worker once the transaction commits."""
    from django.conf import settings

    from verifier.agent.loop import AgentConfig
    from verifier.models import Run
    from verifier.tasks import run_verification

    merged = {"t_max": settings.KGV_T_MAX, "memory_k": settings.KGV_MEMORY_K, **(config or {})}
    AgentConfig.from_dict(merged)  # validates; raises ValueError with a clear message
    with transaction.atomic():
        run = Run.objects.create(task=task, config=merged, created_by=actor if getattr(actor, "is_authenticated", False) else None)
        record_audit(actor=actor, action="run.start", obj=run, after={"task": task.pk, "config": merged})
        if queue:
            transaction.on_commit(lambda: run_verification.delay(run.pk))
    return run


def cancel_run(*, run, actor=None) -> None:
    from verifier.models import Run

    with transaction.atomic():
        updated = Run.objects.filter(pk=run.pk, status__in=[Run.Status.QUEUED, Run.Status.RUNNING]).update(
            status=Run.Status.CANCELLED)
        if updated:
            record_audit(actor=actor, action="run.cancel", obj=run, before={"status": run.status}, after={"status": "cancelled"})
