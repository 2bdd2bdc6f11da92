"""Writes. Every function here is keyword-only, atomic and leaves an audit event."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from verifier import confidence, webhooks
from verifier.agent.config import RunConfig
from verifier.agent.prompts import LESSON_CHARS
from verifier.benchmarks.datasets import build_benchmark, validation_benchmark
from verifier.errors import ApplicationError
from verifier.kg.flagged import read_flagged, resolve_rows
from verifier.kg.loader import ImportRejected
from verifier.memory.bank import Imported, add_entry, import_bank, lesson_of, trajectory_of
from verifier.models import (
    AuditEvent,
    FitTriple,
    KnowledgeGraph,
    MemoryEntry,
    Review,
    Run,
    SavedView,
    StructuralModel,
    Triple,
    Verdict,
    VerificationTask,
    Webhook,
)
from verifier.models.memory import UNREVIEWED
from verifier.queue_filters import EVALUATION_SOURCE_PREFIX
from verifier.queueing import RUN_VERIFICATION, enqueue
from verifier.realtime.publish import publish_run_status
from verifier.selectors import structural_statuses
from verifier.structure.training import request_training
from verifier.wiring import settle_config


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
    skipped: list = field(default_factory=list)  # the bad rows (kg.sources.Problem) left out by skip_invalid
    stated: int = 0  # triples the KG states (each scored by the network that never learnt it)
    task_ids: list[int] = field(default_factory=list)  # the tasks queued now (new, or moved from an evaluation)


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
        VerificationTask(kg=kg, head_id=row.head_id, relation_id=row.relation_id, tail_id=row.tail_id,
                         expected_label=row.label, source=f"{path.name}:{row.line}")
        for row in resolved
    ]
    report = _queue(kg, tasks, actor=actor, audit={"file": str(path), "rows": len(resolved), "rejected": len(problems)})
    report.lines, report.skipped = len(rows), sorted(problems, key=lambda p: p.line)
    return report


def queue_validation_sample(*, kg: KnowledgeGraph, n: int, seed: int = 0, actor=None) -> TaskImportReport:
    """Queue ``n`` labelled triples of the KG's validation split, drawn as its benchmark draws them (half true,
    relation-matched or type-constrained negatives, never a triple something was fitted on): work to try the
    workbench on, with the gold label beside each verdict. Each task's source says where its triple comes from."""
    spec = validation_benchmark(kg.name)
    if spec is None:
        raise ApplicationError(f"{kg.name} is not a dataset with a validation split to sample; "
                               f"queue flagged triples from a file instead")
    benchmark = build_benchmark(spec, n=n, seed=seed, kg_name=kg.name)
    tasks = [VerificationTask(kg=kg, head_id=t.head_id, relation_id=t.relation_id, tail_id=t.tail_id,
                              expected_label=t.label, source=f"{spec} sample: {t.origin}"[:500])
             for t in benchmark.triples]
    report = _queue(kg, tasks, actor=actor, audit={"sample": spec, "n": n, "seed": seed})
    report.lines = len(tasks)
    return report


def _adopt_evaluation_tasks(kg: KnowledgeGraph, tasks: list[VerificationTask]) -> list[int]:
    """Move the evaluation-created tasks of these triples into the work queue (their evaluations keep them); their ids."""
    source_of = {(t.head_id, t.relation_id, t.tail_id): t.source for t in tasks}
    adopted = []
    for task in (VerificationTask.objects.filter(kg=kg, source__startswith=EVALUATION_SOURCE_PREFIX,
                                                 head_id__in={t.head_id for t in tasks})
                 .only("pk", "head_id", "relation_id", "tail_id").iterator(chunk_size=5000)):
        if (source := source_of.get((task.head_id, task.relation_id, task.tail_id))) is not None:
            task.source = source
            adopted.append(task)
    VerificationTask.objects.bulk_update(adopted, ["source"], batch_size=1000)
    return [task.pk for task in adopted]


def _queue(kg: KnowledgeGraph, tasks: list[VerificationTask], *, actor, audit: dict) -> TaskImportReport:
    """Put the tasks' triples in the work queue and record the import. A triple already queued keeps its task;
    one whose task an evaluation created joins the work queue under the new source (counted as queued now)."""
    with transaction.atomic():
        newest = VerificationTask.objects.aggregate(newest=Max("pk"))["newest"] or 0
        VerificationTask.objects.bulk_create(tasks, ignore_conflicts=True, batch_size=5000)
        queued = list(VerificationTask.objects.filter(kg=kg, pk__gt=newest, source__in={t.source for t in tasks})
                      .values_list("pk", flat=True))  # the triples not already queued: bulk_create skipped the others
        queued += _adopt_evaluation_tasks(kg, tasks)
        stated = _stated(kg, tasks)
        record_audit(actor=actor, action="tasks.import", obj=kg, after={**audit, "created": len(queued)})
    return TaskImportReport(created=len(queued), already_queued=len(tasks) - len(queued), lines=len(tasks), stated=stated,
                            task_ids=queued)


def release_awaiting(model_id: int) -> list[int]:
    """Send again every queued run that waited for this training, now ended however it ended: each checks afresh
    whether there is still something to wait for. Returns their ids."""
    with transaction.atomic():
        released = Run.objects.release_from(model_id)
        for run_id in released:
            enqueue(RUN_VERIFICATION, run_id)
    return released


def _stated(kg: KnowledgeGraph, tasks: list[VerificationTask]) -> int:
    """How many of the tasks' triples the KG states."""
    wanted = {(t.head_id, t.relation_id, t.tail_id) for t in tasks}
    return sum(1 for triple in Triple.objects.filter(kg=kg, head_id__in={h for h, _, _ in wanted})
               .values_list("head_id", "relation_id", "tail_id") if triple in wanted)


MAX_BULK = 1000  # the most tasks or memories one bulk action takes (the queue's, the bank's, the API's)


def start_run(*, task: VerificationTask, config: dict | RunConfig | None = None, actor=None, queue: bool = True,
              unweighed_ok: bool = False):
    """Create a run of ``task`` and queue it for a Celery worker once the transaction commits. ``config`` is the
    request (a JSON object of AgentConfig settings), validated and settled here (wiring.settle_config: ValueError names
    what is wrong), or one settled already; the run stores both and its worker runs it with the settled one as is.
    A mode that decides only by weighing is refused while no confidence model is in force for the task's KG
    (confidence.Unweighed), unless ``unweighed_ok``: the caller checked already (``start_runs``, once for all its KGs) or
    decided it for all its runs (an evaluation, whose runs may be a fit's data)."""
    settled = config if isinstance(config, RunConfig) else settle_config(config)
    if not unweighed_ok:
        confidence.require_weighing(task.kg_id, settled.agent.mode)
    with transaction.atomic():
        VerificationTask.objects.select_for_update().filter(pk=task.pk).first()  # one start at a time per task
        in_flight = Run.objects.filter(task=task).in_flight().first()
        if in_flight is not None:
            raise TaskBusy(f"task {task.pk} already has run {in_flight.pk} {in_flight.status}; wait for it or cancel it")
        run = Run.objects.create(task=task, request=settled.request, config=settled.agent.to_dict(),
                                 created_by=actor if getattr(actor, "is_authenticated", False) else None)
        record_audit(actor=actor, action="run.start", obj=run, after={"task": task.pk, "config": settled.request})
        if queue:
            enqueue(RUN_VERIFICATION, run.pk)
    return run


def start_runs(*, tasks, config: dict | RunConfig | None = None, actor=None, queue: bool = True) -> list:
    """``start_run`` for each of ``tasks``, all or none, with ``config`` settled once: the weighing their mode needs is
    checked once for all their KGs (confidence.Unweighed, naming each KG without one, before any run exists)."""
    settled = config if isinstance(config, RunConfig) else settle_config(config)
    confidence.require_weighing({task.kg_id for task in tasks}, settled.agent.mode)
    with transaction.atomic():
        return [start_run(task=task, config=settled, actor=actor, queue=queue, unweighed_ok=True) for task in tasks]


class TaskBusy(ApplicationError):
    """A run was asked for a task that already has one queued or running."""


def cancel_run(*, run, actor=None) -> bool:
    """Stop a queued or running run: its worker stores no further step. False if it had already ended."""
    before = run.status
    with transaction.atomic():
        cancelled = run.cancel()  # its task is freed too, also when its worker is gone and will never do it
        if cancelled:
            record_audit(actor=actor, action="run.cancel", obj=run, before={"status": before}, after={"status": "cancelled"})
            publish_run_status(run)
    return cancelled


def assign_tasks(*, tasks, assignee, actor=None) -> int:
    """Give ``tasks`` (a queryset) to ``assignee`` (None unassigns). Returns how many changed."""
    with transaction.atomic():
        changed = list(tasks.exclude(assignee=assignee).select_for_update().values_list("pk", "assignee_id"))
        VerificationTask.objects.filter(pk__in=[pk for pk, _ in changed]).update(assignee=assignee)
        for pk, before in changed:
            record_audit(actor=actor, action="task.assign", obj=VerificationTask(pk=pk),
                         before={"assignee": before}, after={"assignee": getattr(assignee, "pk", None)})
    return len(changed)


class ReviewRejected(ApplicationError):
    """A review that cannot be recorded as asked (the message says why)."""


def review_run(*, run, reviewer, decision: str, reason: str = "", verdict: str = ""):
    """Record a reviewer's decision on a finished run; every decision but a comment settles the task.

    accept → the run's verdict; override → the other verdict (or ``verdict``), reason required;
    not_enough_evidence → that verdict; comment → no verdict, the task keeps its status.

    The same decision sent again by the same reviewer (a double click, a retried request, concurrent or in a row) is
    recorded once: the reviewer's latest review of the run is returned instead, with no second audit event or webhook.
    """
    decisions = Review.Decision
    if decision not in decisions.values:
        raise ReviewRejected(f"unknown decision {decision!r}; use one of {', '.join(decisions.values)}")
    reason = reason.strip()
    if decision == decisions.COMMENT:
        if not reason:
            raise ReviewRejected("a comment needs text")
        final = ""
    else:
        if not run.is_reviewable:
            raise ReviewRejected(f"run {run.pk} has no verdict to review (status {run.status})")
        if decision == decisions.ACCEPT:
            final = run.verdict
        elif decision == decisions.NOT_ENOUGH_EVIDENCE:
            final = Verdict.NOT_ENOUGH_EVIDENCE
        else:
            if not reason:
                raise ReviewRejected("overriding a verdict needs a reason")
            final = verdict or Verdict.overridden(run.verdict)
            if final not in (Verdict.CORRECT, Verdict.INCORRECT) or final == run.verdict:
                raise ReviewRejected(f"an override must change the verdict {run.verdict!r} to Correct or Incorrect")
    with transaction.atomic():
        task = VerificationTask.objects.select_for_update().get(pk=run.task_id)  # one decision at a time per task
        latest = Review.objects.filter(run=run, reviewer=reviewer).order_by("-created_at", "-id").first()
        if latest is not None and (latest.decision, latest.verdict, latest.reason) == (decision, final, reason):
            return latest
        review = Review.objects.create(run=run, reviewer=reviewer, decision=decision, verdict=final, reason=reason)
        before = {"task_status": task.status}
        if decision != decisions.COMMENT:
            task.mark_reviewed()
        record_audit(actor=reviewer, action=f"review.{decision}", obj=run, before={**before, "verdict": run.verdict},
                     after={"task_status": task.status, "verdict": final, "reason": reason, "review": review.pk})
        webhooks.emit(Webhook.Event.REVIEW_RECORDED, f"review.recorded:{review.pk}", webhooks.review_data(review))
    return review


def accept_verdicts(*, tasks, reviewer) -> tuple[list, int]:
    """Accept the standing verdict of each task that has one and no reviewer decision yet — the newest run with a
    verdict, the run the queue shows — one audited ``review_run`` each: (the reviews, how many tasks were left
    alone: no finished verdict, or already decided by a reviewer, whose decision a bulk accept never replaces).
    All or nothing."""
    reviews, left = [], 0
    with transaction.atomic():
        for task in tasks:
            run = Run.objects.filter(task=task).exclude(verdict="").order_by("-created_at", "-id").first()
            decided = Review.objects.filter(run__task=task).exclude(decision=Review.Decision.COMMENT).exists()
            if run is None or not run.is_reviewable or decided:
                left += 1
                continue
            reviews.append(review_run(run=run, reviewer=reviewer, decision=Review.Decision.ACCEPT))
    return reviews, left


UNDO_SECONDS = 15 * 60


def undo_review(*, review, actor) -> None:
    """Take back a decision or comment its reviewer recorded in the last UNDO_SECONDS. A task left with no
    decision on any of its runs is back to verified."""


    if review.reviewer_id != getattr(actor, "pk", None):
        raise ReviewRejected("only the reviewer who recorded a decision can undo it")
    if (timezone.now() - review.created_at).total_seconds() > UNDO_SECONDS:
        raise ReviewRejected(f"a decision can be undone for {UNDO_SECONDS // 60} minutes; record a new one instead")
    with transaction.atomic():
        task = VerificationTask.objects.select_for_update().get(pk=review.run.task_id)
        before = {"decision": review.decision, "verdict": review.verdict, "reason": review.reason, "task_status": task.status}
        run, pk = review.run, review.pk
        review.delete()
        task.unmark_reviewed()
        record_audit(actor=actor, action="review.undo", obj=run, before=before, after={"review": pk, "task_status": task.status})


def promote_run(*, run, actor, trajectory: str | None = None, triple_text: str | None = None):
    """Copy a finished, reviewed run into the memory bank (optionally with an edited trajectory); the next run
    can retrieve it at once. The entry's verdict is the latest reviewed verdict."""
    if not run.is_reviewable:
        raise ReviewRejected(f"only a finished run with a verdict can be promoted (run {run.pk} is {run.status})")
    task = run.task
    if task.source.startswith(EVALUATION_SOURCE_PREFIX):
        raise ReviewRejected(f"run {run.pk} verifies a benchmark triple of an evaluation ({task.source}); in the memory "
                             "bank it would guide the runs that evaluation scores")
    reviewed = run.reviews.exclude(verdict="").order_by("-created_at", "-id").first()
    if reviewed is None:
        raise ReviewRejected(f"review run {run.pk} first (accept or override its verdict): only a reviewed "
                             "investigation guides later runs")
    verdict = reviewed.verdict
    if verdict not in ("correct", "incorrect"):
        raise ReviewRejected("a run reviewed as 'not enough evidence' cannot guide later runs")
    text = (triple_text or f"{task.head.label} {task.relation.label} {task.tail.label}").strip()
    body = (trajectory if trajectory is not None else trajectory_of(run)).strip()
    if not body:
        raise ReviewRejected("the trajectory is empty")
    with transaction.atomic():
        Run.objects.select_for_update().filter(pk=run.pk).first()  # two clicks promote once
        same = MemoryEntry.objects.filter(source_run=run, triple_text=text, trajectory=body, verdict=verdict).first()
        if same is not None:
            return same
        entry = add_entry(triple_text=text, trajectory=body, verdict=verdict, relation_label=task.relation.label,
                          kg=task.kg, source_run=run, promoted_by=actor, provenance=f"promoted from run {run.pk}",
                          lesson=lesson_of(run, verdict, reviewed.reason))
        # A memory of this very triple would hand a later evaluation its label: no benchmark draws it from now on.
        FitTriple.objects.get_or_create(kg=task.kg, purpose=FitTriple.Purpose.MEMORY, head_id=task.head_id,
                                        relation_id=task.relation_id, tail_id=task.tail_id,
                                        defaults={"label": verdict == "correct"})
        record_audit(actor=actor, action="memory.promote", obj=entry,
                     after={"run": run.pk, "verdict": verdict, "edited": trajectory is not None})
        webhooks.emit(Webhook.Event.MEMORY_PROMOTED, f"memory.promoted:{entry.pk}", webhooks.memory_data(entry))
    return entry


REASON_CHARS = 300  # the longest reason for retiring or restoring a memory, once whitespace is collapsed


def _memory_reason(reason: str) -> str:
    """A reason for retiring or restoring memories, whitespace collapsed; one too long is refused."""
    reason = " ".join(reason.split())
    if len(reason) > REASON_CHARS:
        raise ReviewRejected(f"the reason has {len(reason)} characters; at most {REASON_CHARS} are kept")
    return reason


def set_memory_status(*, entry, status: str, actor=None, reason: str = "") -> None:
    """Retire or restore a memory entry (retired entries are never retrieved). Retiring an entry that awaits
    review is that review's other outcome: its provenance then says who retired it, and why (``reason``); the
    audit log keeps the reason of either change."""
    if status not in MemoryEntry.Status.values:
        raise ValueError(f"unknown status {status!r}")
    reason = _memory_reason(reason)
    if entry.status == status:
        return
    with transaction.atomic():
        before, provenance = {"status": entry.status}, entry.provenance
        entry.status = status
        if status == MemoryEntry.Status.RETIRED:
            outcome = _reviewed_by(actor, "retired") + (f": {reason}" if reason else "")
            entry.provenance = entry.provenance.replace(UNREVIEWED, outcome)[:500]
        entry.save(update_fields=["status", "provenance", "updated_at"])
        after = {"status": status, **({"reason": reason} if reason else {})}
        if entry.provenance != provenance:
            before["provenance"], after["provenance"] = provenance, entry.provenance
        record_audit(actor=actor, action=f"memory.{'retire' if status == 'retired' else 'restore'}", obj=entry,
                     before=before, after=after)


def import_memory_bank(path: Path, *, actor=None) -> Imported:
    """Import a memory bank export (bank.import_bank); each entry the file brought up to its version (a
    review done elsewhere, a re-derived lesson) is in the audit log with its fields before and after."""
    with transaction.atomic():
        imported = import_bank(path)
        for entry, before in imported.changes:
            record_audit(actor=actor, action="memory.import", obj=entry, before=before,
                         after={name: getattr(entry, name) for name in before} | {"file": path.name})
    return imported


def _reviewed_by(actor, outcome: str = "") -> str:
    """What replaces a bootstrapped entry's "awaiting review" in its provenance."""
    who = actor.get_username() if getattr(actor, "is_authenticated", False) else "a curator"
    return f"reviewed{f' and {outcome}' if outcome else ''} by {who} on {timezone.localdate():%Y-%m-%d}"


def review_memory(*, entry, actor, lesson: str) -> None:
    """A curator's review of a memory: its lesson (what a small model's plan is shown of it) as the curator
    words it, and, for a bootstrapped entry, its provenance saying who reviewed it instead of that it awaits
    review. Retiring is the other outcome of a review (set_memory_status)."""
    lesson = " ".join(lesson.split())
    if not lesson:
        raise ReviewRejected("the lesson is empty: say what decided this case")
    if len(lesson) > LESSON_CHARS:
        raise ReviewRejected(f"the lesson has {len(lesson)} characters; a small model's prompt shows at most {LESSON_CHARS}")
    with transaction.atomic():
        before = {"lesson": entry.lesson, "provenance": entry.provenance}
        entry.lesson = lesson
        entry.provenance = entry.provenance.replace(UNREVIEWED, _reviewed_by(actor))[:500]
        entry.save(update_fields=["lesson", "provenance", "updated_at"])
        record_audit(actor=actor, action="memory.review", obj=entry, before=before,
                     after={"lesson": entry.lesson, "provenance": entry.provenance})


MEMORY_BULK_ACTIONS = {"keep": "Keep, with their lessons", "retire": "Retire"}


@dataclass
class MemoryBulkReview:
    done: list[int] = field(default_factory=list)  # the entries kept or retired
    skipped: dict[int, str] = field(default_factory=dict)  # entry → why it was left as it was


def review_memories(*, entries, actor, action: str, reason: str = "") -> MemoryBulkReview:
    """Review several memories at once, each as its own review would (audit log, provenance): ``keep`` marks
    the entries that await review reviewed with the lessons they have; ``retire`` retires the active ones,
    with one ``reason``. An entry the action does not apply to is left as it was and named with the reason.
    A reason too long refuses the whole action."""
    if action not in MEMORY_BULK_ACTIONS:
        raise ReviewRejected(f"unknown action {action!r}: one of {', '.join(MEMORY_BULK_ACTIONS)}")
    reason = _memory_reason(reason)
    result = MemoryBulkReview()
    with transaction.atomic():
        for entry in entries:
            if entry.status == MemoryEntry.Status.RETIRED:
                result.skipped[entry.pk] = "retired already"
            elif action == "retire":
                set_memory_status(entry=entry, status=MemoryEntry.Status.RETIRED, actor=actor, reason=reason)
                result.done.append(entry.pk)
            elif not entry.awaits_review:
                result.skipped[entry.pk] = "reviewed already"
            elif not entry.lesson.strip():
                result.skipped[entry.pk] = "no lesson yet: open it and write one"
            else:
                try:
                    review_memory(entry=entry, actor=actor, lesson=entry.lesson)
                except ReviewRejected as rejected:  # a lesson imported longer than a prompt shows, say
                    result.skipped[entry.pk] = f"{rejected}: open it and reword it"
                    continue
                result.done.append(entry.pk)
    return result


def save_webhook(*, webhook, actor=None, **fields):
    """Register a webhook (``webhook`` None) or change one: url, events, description, active."""
    with transaction.atomic():
        if webhook is None:
            webhook = Webhook.objects.create(created_by=actor if getattr(actor, "is_authenticated", False) else None, **fields)
            record_audit(actor=actor, action="webhook.create", obj=webhook, after={**fields})
            return webhook
        before = {name: getattr(webhook, name) for name in fields}
        for name, value in fields.items():
            setattr(webhook, name, value)
        webhook.save(update_fields=list(fields) or None)
        record_audit(actor=actor, action="webhook.update", obj=webhook, before=before, after={**fields})
    return webhook


def delete_webhook(*, webhook, actor=None) -> None:
    """Remove a webhook and its delivery log."""
    with transaction.atomic():
        record_audit(actor=actor, action="webhook.delete", obj=webhook, before={"url": webhook.url, "events": webhook.events})
        webhook.delete()


def send_test_delivery(*, webhook, actor=None):
    """A ``ping`` to the webhook now, answered with its delivery (not retried)."""
    delivery = webhooks.ping(webhook)
    record_audit(actor=actor, action="webhook.test", obj=webhook, after={"delivery": delivery.pk, "status": delivery.status,
                                                                        "error": delivery.error})
    return delivery


class ViewRejected(ApplicationError):
    """A saved view that cannot be kept as asked."""


def save_view(*, user, name: str, query: str):
    """Keep the queue's filters ``query`` under ``name`` for ``user`` (a view of that name is replaced)."""
    name = name.strip()
    if not name:
        raise ViewRejected("a saved view needs a name")
    with transaction.atomic():
        view, created = SavedView.objects.update_or_create(user=user, name=name[:80], defaults={"query": query})
        record_audit(actor=user, action="view.save", obj=view, after={"name": view.name, "query": query, "new": created})
    return view


def delete_view(*, view, user) -> None:
    with transaction.atomic():
        record_audit(actor=user, action="view.delete", obj=view, before={"name": view.name, "query": view.query})
        view.delete()


def train_structural_model(*, kg, actor) -> StructuralModel:
    """Queue a training of the KG's current version where none serves it: its model failed, stalled (its worker is
    gone; the new job replaces it when it starts) or was never trained. ValueError says why not: a SPARQL endpoint,
    a KG with no triples, a training queued or running, or a ready model (``manage.py train_kge`` retrains one)."""
    if kg.kind != KnowledgeGraph.Kind.LOCAL or kg.version == 0:
        raise ValueError(f"{kg.name} has no triples of its own to train on" if kg.kind == KnowledgeGraph.Kind.LOCAL
                         else f"{kg.name} is a SPARQL endpoint: it has no structural model")
    [status] = structural_statuses([kg.pk])
    if status.state not in ("failed", "stalled", "none"):
        raise ValueError(f"the structural model of {kg.name} is {status.text}: nothing to train again "
                         f"(manage.py train_kge {kg.name} retrains a ready one)")
    with transaction.atomic():
        row = request_training(kg, reason=f"requested by {actor.get_username()} after the model {status.state}")
        if row is None:
            raise ValueError(f"a training of {kg.name} is already queued or running")
        record_audit(actor=actor, action="structure.train", obj=row, after={"kg": kg.name, "after": status.state})
    return row
