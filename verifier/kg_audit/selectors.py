"""Reads of KG audits that the pages and the API share: the audits of each KG, an audit's live state (what its page
polls), its suspects filtered by relation, and the suspect's flagged task and latest run once it is queued."""

from __future__ import annotations

from django.db.models import QuerySet

from verifier.kg_audit.exports import suspects_of
from verifier.models import KGAudit, KnowledgeGraph, Run, Suspect


def auditable_kgs() -> QuerySet[KnowledgeGraph]:
    """The KGs an audit can be started on: local ones with triples loaded."""
    return KnowledgeGraph.objects.filter(kind=KnowledgeGraph.Kind.LOCAL, version__gt=0).order_by("name")


def audits(kg_id: int | None = None) -> QuerySet[KGAudit]:
    """Every audit (of one KG), newest first, without the stored scorer."""
    rows = KGAudit.objects.select_related("kg", "created_by").defer("scorer").order_by("-created_at", "-id")
    return rows.filter(kg_id=kg_id) if kg_id is not None else rows


def audits_by_kg(kg_id: int | None = None, *, per_kg: int = 20) -> list[tuple[KnowledgeGraph, list[KGAudit], int]]:
    """(KG, its latest ``per_kg`` audits, how many it has) for each KG with an audit, the latest audited first."""
    grouped: dict[int, list[KGAudit]] = {}
    kgs: dict[int, KnowledgeGraph] = {}
    for audit in audits(kg_id):
        grouped.setdefault(audit.kg_id, []).append(audit)
        kgs[audit.kg_id] = audit.kg
    return [(kgs[pk], rows[:per_kg], len(rows)) for pk, rows in grouped.items()]


def is_done(audit: KGAudit) -> bool:
    return audit.status in (KGAudit.Status.FINISHED, KGAudit.Status.FAILED)


def audit_state(audit: KGAudit) -> dict:
    """What the audit's page shows while it runs (and polls): status, stage, triples scored of the total."""
    return {"id": audit.pk, "status": audit.status, "status_label": audit.get_status_display(), "stage": audit.stage,
            "triples": audit.triples, "scored": audit.scored, "progress": round(audit.progress, 4),
            "percent": int(100 * audit.progress), "stale": audit.is_stale, "done": is_done(audit), "error": audit.error}


def suspects(audit: KGAudit, *, relation: int | None = None) -> QuerySet[Suspect]:
    """The audit's suspects by rank, with their triple's terms and their task (one relation's only, if given)."""
    rows = suspects_of(audit).select_related("task")
    return rows.filter(relation_id=relation) if relation is not None else rows


def latest_run(suspect: Suspect) -> Run | None:
    """The latest run of the task the suspect was queued as, if any."""
    if suspect.task_id is None:
        return None
    return Run.objects.filter(task_id=suspect.task_id).order_by("-created_at", "-id").first()
