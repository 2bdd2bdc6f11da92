"""Applying to a local KG the changes its reviewers' decisions make (``manage.py apply_changes``): the triples settled
Incorrect leave it, those settled Correct join it — the changes the KG changes export lists (verifier/exports/
changes.py holds the rule), for the work queue's tasks; an evaluation's benchmark triples never change the KG.
The structural model is then retrained on the KG as it now stands."""

from __future__ import annotations

from dataclasses import dataclass

from django.db import transaction

from verifier.exports.changes import ADD, REMOVE, Change, changes
from verifier.exports.records import MAX_SELECTION, select
from verifier.kg.amend import Amended, amend
from verifier.models import KnowledgeGraph, StructuralModel, VerificationTask
from verifier.queue_filters import EVALUATION_SOURCE_PREFIX
from verifier.selectors import standing_runs
from verifier.services import record_audit
from verifier.structure.training import request_training


def settled_changes(kg: KnowledgeGraph) -> list[Change]:
    """The changes the KG's work-queue tasks call for now, in task order. Only a reviewed task can call for one, so
    only those are read (a KG's queue may hold thousands that nobody decided on)."""
    task_ids = list(VerificationTask.objects.filter(kg=kg, runs__reviews__isnull=False)
                    .exclude(source__startswith=EVALUATION_SOURCE_PREFIX).distinct().order_by("pk").values_list("pk", flat=True))
    standing = standing_runs(task_ids)
    task_ids = [pk for pk in task_ids if pk in standing]
    found: list[Change] = []
    for start in range(0, len(task_ids), MAX_SELECTION):
        found += [change for change in changes(select(task_ids=task_ids[start:start + MAX_SELECTION])) if change.change]
    return found


@dataclass(frozen=True)
class Applied:
    changes: list[Change]
    amended: Amended | None  # None: a dry run, or nothing to change
    training: StructuralModel | None  # the retraining requested (None: none, or one was already in flight)


def apply_changes(*, kg: KnowledgeGraph, actor=None, dry_run: bool = False) -> Applied:
    """Make ``kg`` state what its reviewers settled, audited; ``dry_run``: only say what would change."""
    pending = settled_changes(kg)
    if dry_run or not pending:
        return Applied(pending, None, None)
    rows = {pk: (head, relation, tail) for pk, head, relation, tail in VerificationTask.objects.filter(
        pk__in=[change.record.task_id for change in pending]).values_list("pk", "head_id", "relation_id", "tail_id")}
    with transaction.atomic():
        version = kg.version
        amended = amend(kg, remove=[rows[c.record.task_id] for c in pending if c.change == REMOVE],
                        add=[rows[c.record.task_id] for c in pending if c.change == ADD])
        # The triples themselves, by external id, so the audit log says exactly what to undo.
        by_op = {op: [" ".join((c.record.head.id, c.record.relation.id, c.record.tail.id)) for c in pending if c.change == op]
                 for op in (REMOVE, ADD)}
        record_audit(actor=actor, action="kg.changes_applied", obj=kg, before={"version": version},
                     after={"version": amended.version, "removed": amended.removed, "added": amended.added,
                            "triples_removed": by_op[REMOVE], "triples_added": by_op[ADD],
                            "tasks": [c.record.task_id for c in pending]})
        kg.refresh_from_db()
        training = request_training(kg, reason=f"reviewers' decisions removed {amended.removed} and added "
                                                f"{amended.added} triple(s)")
    return Applied(pending, amended, training)
