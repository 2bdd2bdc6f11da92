"""Running a KG audit: prepare (fit the scorer, cut the KG into chunks), score the chunks (any worker, any order,
each once), finish (rank, summarise, compare with the previous audit), and act on the suspects (queue them as
flagged triples). Every step is idempotent: an interrupted audit resumes from the chunks still to score.
"""

from __future__ import annotations

import io
import logging
import time
from dataclasses import dataclass

import numpy as np
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from verifier.errors import ApplicationError
from verifier.kg_audit import reasons
from verifier.kg_audit.classifier import Scorer, fit
from verifier.kg_audit.features import view_of
from verifier.kg_audit.names import embed_names
from verifier.models import AuditChunk, Entity, KGAudit, KnowledgeGraph, Relation, StructuralModel, Suspect, VerificationTask
from verifier.queueing import AUDIT_CHUNK, PREPARE_AUDIT, enqueue, send_now
from verifier.services import record_audit

logger = logging.getLogger(__name__)

CHUNK = 50_000
SUSPECTS_SHARE, SUSPECTS_MIN, SUSPECTS_MAX = 0.01, 200, 10_000  # how many of the top triples are kept as suspects
BINS = 20
SOURCE_PREFIX = "audit:"


class AuditError(ApplicationError):
    """The audit cannot be started or go on as asked (the message says why)."""


def start_audit(*, kg: KnowledgeGraph, actor=None, queue: bool = True, chunk_size: int = CHUNK,
                structural: bool = True) -> KGAudit:
    """A new audit of the KG's current version, scored by its ready structural model if it has one (``structural``:
    False scores by the graph's statistics alone); sent to the audit workers after the commit (``queue``), else left
    for the caller to run (``run_here``)."""
    if kg.kind != KnowledgeGraph.Kind.LOCAL or kg.version == 0:
        raise AuditError(f"{kg.name} has no triples of its own to audit")
    with transaction.atomic():
        KnowledgeGraph.objects.select_for_update().get(pk=kg.pk)
        running = [a for a in KGAudit.objects.filter(kg=kg, status__in=[KGAudit.Status.QUEUED, KGAudit.Status.RUNNING])
                   if not a.is_stale]
        if running:
            raise AuditError(f"audit #{running[0].pk} of {kg.name} is still running ({running[0].progress:.0%}); wait for it")
        model = StructuralModel.objects.ready_for(kg) if structural else None
        audit = KGAudit.objects.create(
            kg=kg, kg_version=kg.version, structural_model=model, chunk_size=chunk_size, created_by=_user(actor),
            triples=kg.triples.count(), stage="queued",
            previous=KGAudit.objects.filter(kg=kg, status=KGAudit.Status.FINISHED).order_by("-pk").first())
        record_audit(actor=actor, action="kg_audit.start", obj=audit, after={"kg": kg.name, "version": kg.version})
        if queue:
            enqueue(PREPARE_AUDIT, audit.pk)
    return audit


def _user(actor):
    return actor if getattr(actor, "is_authenticated", False) else None


def _view(audit: KGAudit):
    kg = KnowledgeGraph.objects.get(pk=audit.kg_id)
    if kg.version != audit.kg_version:
        raise AuditError(f"{kg.name} changed while it was audited (version {audit.kg_version} → {kg.version}); "
                         "start a new audit")
    model = StructuralModel.objects.defer("calibration").filter(pk=audit.structural_model_id).first() \
        if audit.structural_model_id else None
    return kg, view_of(kg, model)


def _stage(audit: KGAudit, text: str, **fields) -> None:
    KGAudit.objects.filter(pk=audit.pk).update(stage=text[:200], heartbeat_at=timezone.now(), **fields)


def prepare(audit_id: int, *, send_chunks: bool = True) -> KGAudit:
    """Fit the scorer and cut the KG into chunks (once: a prepared audit is left as it is), then send the chunks."""
    audit = KGAudit.objects.get(pk=audit_id)
    if audit.status in (KGAudit.Status.FINISHED, KGAudit.Status.FAILED):
        return audit
    try:
        if not audit.scorer:
            _stage(audit, "reading the entities' names", status=KGAudit.Status.RUNNING, started_at=timezone.now())
            embed_names(KnowledgeGraph.objects.get(pk=audit.kg_id),
                        report=lambda done, total: _stage(audit, f"reading the entities' names: {done:,} of {total:,}"))
            _stage(audit, "learning what the KG's errors look like")
            kg, view = _view(audit)
            scorer, metrics = fit(view, kg)
            chunks = max(1, -(-len(view.triples) // audit.chunk_size))
            with transaction.atomic():
                AuditChunk.objects.bulk_create([AuditChunk(audit=audit, index=i) for i in range(chunks)], ignore_conflicts=True)
                KGAudit.objects.filter(pk=audit.pk).update(scorer=scorer.stored(), metrics=metrics, triples=len(view.triples),
                                                           stage=f"scoring {len(view.triples):,} triples in {chunks} chunk(s)")
    except AuditError as exc:
        return fail(audit, str(exc))
    except Exception as exc:
        logger.exception("preparing audit %s failed", audit.pk)
        return fail(audit, f"{type(exc).__name__}: {exc}")
    if send_chunks:
        for index in AuditChunk.objects.filter(audit=audit, done=False).values_list("index", flat=True):
            enqueue(AUDIT_CHUNK, audit.pk, index)
    return KGAudit.objects.get(pk=audit.pk)


_SCORERS: dict[tuple[int, str], Scorer] = {}


def _scorer(audit: KGAudit) -> Scorer:
    key = (audit.pk, str(audit.started_at))
    if key not in _SCORERS:
        _SCORERS.clear()
        _SCORERS[key] = Scorer.from_stored(audit.scorer)
    return _SCORERS[key]


def score_chunk(audit_id: int, index: int) -> bool:
    """Score one chunk (nothing when it is done or the audit ended); the last chunk finishes the audit. True when
    this call scored it."""
    audit = KGAudit.objects.get(pk=audit_id)
    chunk = AuditChunk.objects.filter(audit=audit, index=index).first()
    if chunk is None or chunk.done or audit.status not in (KGAudit.Status.RUNNING, KGAudit.Status.QUEUED):
        return False
    started = time.monotonic()
    try:
        _, view = _view(audit)
        rows = view.triples[index * audit.chunk_size:(index + 1) * audit.chunk_size]
        suspicion = _scorer(audit).suspicion(view.features(rows), rows)
    except AuditError as exc:
        fail(audit, str(exc))
        return False
    buffer = io.BytesIO()
    np.savez_compressed(buffer, rows=rows, suspicion=suspicion.astype(np.float32))
    with transaction.atomic():
        scored = AuditChunk.objects.filter(pk=chunk.pk, done=False).update(done=True, scores=buffer.getvalue(),
                                                                          seconds=time.monotonic() - started)
        if scored:
            KGAudit.objects.filter(pk=audit.pk).update(scored=F("scored") + len(rows), heartbeat_at=timezone.now())
    if scored and not AuditChunk.objects.filter(audit=audit, done=False).exists():
        finish(audit.pk)
    return bool(scored)


def scores(audit: KGAudit) -> tuple[np.ndarray, np.ndarray]:
    """Every scored triple of the audit (row ids) and its P(wrong), in the audit's order."""
    rows, values = [], []
    for blob in AuditChunk.objects.filter(audit=audit, done=True).order_by("index").values_list("scores", flat=True).iterator():
        with np.load(io.BytesIO(bytes(blob))) as data:
            rows.append(data["rows"])
            values.append(data["suspicion"])
    if not rows:
        return np.zeros((0, 3), dtype=np.int64), np.zeros(0, dtype=np.float32)
    return np.concatenate(rows), np.concatenate(values)


def finish(audit_id: int) -> KGAudit:
    """Rank every triple, keep the top ones as suspects with their reasons, summarise, compare (once)."""
    with transaction.atomic():
        audit = KGAudit.objects.select_for_update().get(pk=audit_id)
        if audit.status != KGAudit.Status.RUNNING or AuditChunk.objects.filter(audit=audit, done=False).exists():
            return audit
        _stage(audit, "ranking the suspects")
        rows, suspicion = scores(audit)
        kg, view = _view(audit)
        keep = int(min(SUSPECTS_MAX, max(SUSPECTS_MIN, round(SUSPECTS_SHARE * len(rows)))))
        order = np.argsort(-suspicion, kind="stable")[:keep]
        top, top_scores = rows[order], suspicion[order]
        features = view.features(top)
        labels = _labels(kg, top)
        before = _previous_suspects(audit)
        Suspect.objects.bulk_create([
            Suspect(audit=audit, rank=rank, head_id=h, relation_id=r, tail_id=t, suspicion=round(float(p), 4),
                    reasons=reasons.reasons(features[rank - 1], labels[(h, r, t)]), new=bool(before) and (h, r, t) not in before)
            for rank, ((h, r, t), p) in enumerate(zip(top.tolist(), top_scores.tolist(), strict=True), start=1)
        ], batch_size=2000)
        summary = _summary(rows, suspicion, top, before)
        KGAudit.objects.filter(pk=audit.pk).update(status=KGAudit.Status.FINISHED, finished_at=timezone.now(), summary=summary,
                                                   stage="finished", scored=len(rows), heartbeat_at=timezone.now())
    return KGAudit.objects.get(pk=audit_id)


def _labels(kg: KnowledgeGraph, rows: np.ndarray) -> dict[tuple[int, int, int], tuple[str, str, str]]:
    entities = dict(Entity.objects.filter(pk__in=set(rows[:, 0].tolist()) | set(rows[:, 2].tolist()))
                    .values_list("pk", "label"))
    names = dict(Entity.objects.filter(pk__in=entities).values_list("pk", "external_id"))
    relations = {pk: label or ext for pk, label, ext in Relation.objects.filter(kg=kg).values_list("pk", "label", "external_id")}
    name = lambda pk: entities.get(pk) or names.get(pk, str(pk))  # noqa: E731
    return {(h, r, t): (name(h), relations.get(r, str(r)), name(t)) for h, r, t in rows.tolist()}


def _previous_suspects(audit: KGAudit) -> set[tuple[int, int, int]]:
    if audit.previous_id is None:
        return set()
    return set(Suspect.objects.filter(audit_id=audit.previous_id).values_list("head_id", "relation_id", "tail_id"))


def _summary(rows: np.ndarray, suspicion: np.ndarray, top: np.ndarray, before: set) -> dict:
    counts, edges = np.histogram(suspicion, bins=BINS, range=(0.0, 1.0))
    relations, in_top = np.unique(top[:, 1], return_counts=True)
    likely = np.unique(rows[suspicion >= 0.5, 1], return_counts=True)
    likely_of = dict(zip(likely[0].tolist(), likely[1].tolist(), strict=True))
    per_relation = sorted(({"relation": int(r), "suspects": int(n), "likely_wrong": int(likely_of.get(int(r), 0)),
                            "triples": int((rows[:, 1] == r).sum())} for r, n in zip(relations, in_top, strict=True)),
                          key=lambda row: -row["suspects"])
    now = {tuple(t) for t in top.tolist()}
    return {"histogram": {"counts": counts.tolist(), "edges": [round(float(e), 3) for e in edges]},
            "likely_wrong": int((suspicion >= 0.5).sum()), "suspects": len(top), "per_relation": per_relation,
            "compared": {"new": len(now - before), "gone": len(before - now), "kept": len(now & before)} if before else None}


def fail(audit: KGAudit, error: str) -> KGAudit:
    KGAudit.objects.filter(pk=audit.pk).exclude(status=KGAudit.Status.FINISHED).update(
        status=KGAudit.Status.FAILED, error=error[:2000], stage="failed", finished_at=timezone.now())
    return KGAudit.objects.get(pk=audit.pk)


@dataclass
class Progress:
    done: int
    total: int
    stage: str


def run_here(audit: KGAudit, *, report=None) -> KGAudit:
    """Prepare (if needed), score every chunk still to score and finish, in this process: ``manage.py audit``, and
    the way to resume an interrupted audit without workers."""
    audit = prepare(audit.pk, send_chunks=False)
    if audit.status == KGAudit.Status.FAILED:
        return audit
    for index in AuditChunk.objects.filter(audit=audit, done=False).order_by("index").values_list("index", flat=True):
        score_chunk(audit.pk, index)
        if report is not None:
            current = KGAudit.objects.get(pk=audit.pk)
            report(Progress(current.scored, current.triples, current.stage))
    audit = KGAudit.objects.get(pk=audit.pk)
    if audit.status == KGAudit.Status.RUNNING:
        audit = finish(audit.pk)
    return audit


def resume_stale() -> list[int]:
    """Send again the chunks of audits whose workers stopped reporting (the housekeeping sweep): their ids."""
    resumed = []
    for audit in KGAudit.objects.filter(status__in=[KGAudit.Status.QUEUED, KGAudit.Status.RUNNING]):
        if not audit.is_stale:
            continue
        _stage(audit, audit.stage or "resumed")  # a fresh heartbeat: resumed once per stale period
        if not audit.scorer:
            send_now(PREPARE_AUDIT, audit.pk)
        else:
            for index in AuditChunk.objects.filter(audit=audit, done=False).values_list("index", flat=True):
                send_now(AUDIT_CHUNK, audit.pk, index)
        resumed.append(audit.pk)
    return resumed


def queue_suspects(*, audit: KGAudit, actor=None, top: int | None = None, threshold: float | None = None) -> int:
    """Queue the audit's top ``top`` suspects (or those at ``threshold`` or above) as flagged triples for the usual
    investigation and review (``source audit:<id>``); a triple already queued keeps its task. How many were queued."""
    if audit.status != KGAudit.Status.FINISHED:
        raise AuditError(f"audit #{audit.pk} is {audit.status}: its suspects are known when it has finished")
    if top is None and threshold is None:
        raise AuditError("say how many suspects to queue (the top N) or from which suspicion on")
    suspects = Suspect.objects.filter(audit=audit, task__isnull=True)
    if threshold is not None:
        suspects = suspects.filter(suspicion__gte=threshold)
    if top is not None:
        suspects = suspects.filter(rank__lte=top)
    suspects = list(suspects.order_by("rank"))
    source = f"{SOURCE_PREFIX}{audit.pk}"
    with transaction.atomic():
        VerificationTask.objects.bulk_create([
            VerificationTask(kg_id=audit.kg_id, head_id=s.head_id, relation_id=s.relation_id, tail_id=s.tail_id,
                             source=f"{source} (rank {s.rank})") for s in suspects], ignore_conflicts=True, batch_size=2000)
        tasks = {(t.head_id, t.relation_id, t.tail_id): t.pk for t in VerificationTask.objects.filter(
            kg_id=audit.kg_id, head_id__in={s.head_id for s in suspects})}
        for suspect in suspects:
            suspect.task_id = tasks.get((suspect.head_id, suspect.relation_id, suspect.tail_id))
        Suspect.objects.bulk_update(suspects, ["task"], batch_size=2000)
        record_audit(actor=actor, action="kg_audit.queue", obj=audit, after={"queued": len(suspects), "top": top,
                                                                              "threshold": threshold})
    return len(suspects)


def suspect_details(suspect: Suspect) -> dict:
    """The suspect's details (rules, model, reference KGs), read once and kept."""
    if not suspect.details:
        suspect.details = reasons.details(KnowledgeGraph.objects.get(pk=suspect.audit.kg_id), suspect)
        Suspect.objects.filter(pk=suspect.pk).update(details=suspect.details)
    return suspect.details
