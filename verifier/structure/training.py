"""The structural-model job of a KG version: hold out, train, validate, calibrate — with progress.

``request_training`` queues the job on a Celery worker (after ``load_kg``, after flagged triples that
the current model learnt were queued); ``train`` runs it in the calling process (``manage.py
train_kge``). Progress, stage and a heartbeat are written on the StructuralModel row, which the
workbench and ``/health/`` read; a job whose heartbeat stops is shown as stalled, and the same KG is
never trained by two jobs at once.
"""

from __future__ import annotations

import logging
import time
import traceback
from collections.abc import Callable
from datetime import timedelta

from django.db import transaction
from django.utils import timezone

from verifier.models import HeldOutTriple, KnowledgeGraph, StructuralModel, Triple
from verifier.structure import kge
from verifier.structure.dataset import TrainingData, training_data
from verifier.structure.fitting import calibrate_structural
from verifier.structure.scoring import pack, trained_on

logger = logging.getLogger(__name__)

HEARTBEAT_EVERY = timedelta(seconds=5)
# Share of the job's progress bar each stage takes.
STAGES = {"mining rules": (0.0, 0.02), "preparing": (0.02, 0.03), "training": (0.03, 0.9), "validating": (0.9, 0.93),
          "calibrating": (0.93, 1.0)}

Report = Callable[[float, str], None]


class TrainingError(RuntimeError):
    """The job cannot run as asked (the message says why)."""


def request_training(kg: KnowledgeGraph, *, reason: str = "", config: dict | None = None) -> StructuralModel | None:
    """Queue a job for the KG's current version unless one is already queued or running (returned None). Without
    ``config`` it trains what the ready model was trained with (a retraining without newly queued triples must
    not change the kind of model), else the default."""
    if kg.kind != KnowledgeGraph.Kind.LOCAL or kg.version == 0:
        return None
    with transaction.atomic():
        KnowledgeGraph.objects.select_for_update().get(pk=kg.pk)  # one request at a time per KG
        if _live_job(kg) is not None:
            return None
        row = StructuralModel.objects.create(kg=kg, kg_version=kg.version, stage=f"queued: {reason}" if reason else "queued",
                                             config={"kge": config if config is not None else _current_config(kg)})
        from verifier.tasks import train_structural_model  # tasks imports this module: resolved when dispatched

        transaction.on_commit(lambda: train_structural_model.delay(row.pk))
    return row


def _current_config(kg: KnowledgeGraph) -> dict:
    """The KGE settings of the KG's ready model ({} — the default — when there is none, or when they no longer
    make a configuration of this version of KGV)."""
    ready = StructuralModel.objects.ready_for(kg)
    settings = (ready.config or {}).get("kge") or {} if ready is not None else {}
    try:
        kge.KGEConfig.from_dict(settings)
    except (TypeError, ValueError) as exc:
        logger.warning("the ready model of %s has settings this version cannot train (%s): retraining with the default",
                       kg.name, exc)
        return {}
    return settings


def _live_job(kg: KnowledgeGraph) -> StructuralModel | None:
    """The KG's training job queued or running, unless its worker stopped giving signs of life."""
    return next((m for m in StructuralModel.objects.filter(kg=kg).in_flight().order_by("id") if not m.is_stale), None)


def ensure_model(kg: KnowledgeGraph, *, reason: str) -> StructuralModel | None:
    """The KG's ready model of its current version, else a training job requested (None if one is running)."""
    return StructuralModel.objects.ready_for(kg) or request_training(kg, reason=reason)


def wait_for_model(kg: KnowledgeGraph, *, triple: tuple[int, int, int] | None = None, log=print,
                   poll: float = 5.0) -> StructuralModel | None:
    """Before an evaluation, or a verification of ``triple`` (row ids, queued) in this process: the KG's ready
    model — for ``triple``, one that did not learn it. A job in flight is waited for; with none in flight the
    model is trained here (a SPARQL KG has none: None)."""
    if kg.kind != KnowledgeGraph.Kind.LOCAL:
        return None
    waiting: tuple[int, Report] | None = None
    while True:
        ready = StructuralModel.objects.ready_for(kg)
        if ready is not None and (triple is None or not trained_on(ready, *triple)):
            return ready
        live = _live_job(kg)
        if live is None:
            why = "without this triple, which the ready one learnt," if ready is not None else "first"
            log(f"Training the structural model of {kg.name} {why} here (minutes)…")
            return train(kg, report=_every_tenth(log))
        if waiting is None or waiting[0] != live.pk:
            waiting = (live.pk, _every_tenth(log))
            log(f"Waiting for structural model #{live.pk} of {kg.name}, trained by a worker (progress also at /health/)…")
        waiting[1](live.progress, live.stage)
        time.sleep(poll)


def _every_tenth(log) -> Report:
    """A progress report for a log: a line each time another tenth of the job is done."""
    reported = -1.0

    def report(fraction: float, text: str) -> None:
        nonlocal reported
        if fraction - reported >= 0.1:
            reported = fraction
            log(f"  {fraction:.0%} {text}")

    return report


def retrain_if_learnt(kg: KnowledgeGraph, triples: list[tuple[int, int, int]]) -> int:
    """Newly queued triples that the KG's current model learnt (KG triples it was not trained without)
    make its scores about them worthless: a model trained without them is requested once the caller's
    transaction commits (their tasks are then queued). Returns how many were learnt."""
    learnt = len(learnt_triples(kg, triples))
    if learnt:
        transaction.on_commit(lambda: request_training(kg, reason=f"{learnt} newly queued triple(s) were in the training set"))
    return learnt


def training_to_await(kg: KnowledgeGraph, triple: tuple[int, int, int], *, since) -> StructuralModel | None:
    """The training job a verification of ``triple`` (row ids) should wait for before it starts, else None.

    The structural evidence is what a verdict rests on, so a run does not start while the model that can
    score its triple is being made: the KG's first model, or — when the ready model learnt this very triple
    (a flagged KG fact) — a model trained without it, requested here if none is in flight. A run waits for
    one attempt only: when a job requested after ``since`` (the run's creation) failed, it starts without."""
    if kg.kind != KnowledgeGraph.Kind.LOCAL or kg.version == 0:
        return None
    live = _live_job(kg)
    ready = StructuralModel.objects.ready_for(kg)
    if ready is None or not trained_on(ready, *triple):
        return live if ready is None else None
    if live is not None:
        return live
    if StructuralModel.objects.filter(kg=kg, status=StructuralModel.Status.FAILED, created_at__gte=since).exists():
        return None
    return request_training(kg, reason="a queued triple was in the training set")


def learnt_triples(kg: KnowledgeGraph, triples: list[tuple[int, int, int]]) -> set[tuple[int, int, int]]:
    """Those of ``triples`` (row ids) the KG's ready model was trained with."""
    model = StructuralModel.objects.ready_for(kg)
    if model is None or not triples:
        return set()
    wanted = set(triples)
    heads = {h for h, _, _ in wanted}
    in_kg = {t for t in Triple.objects.filter(kg=kg, head_id__in=heads).values_list("head_id", "relation_id", "tail_id")
             if t in wanted}
    if not in_kg:
        return set()
    held = set(HeldOutTriple.objects.filter(model=model, head_id__in=heads).values_list("head_id", "relation_id", "tail_id"))
    return in_kg - held


def _start(kg: KnowledgeGraph, row: StructuralModel | None) -> StructuralModel:
    with transaction.atomic():
        KnowledgeGraph.objects.select_for_update().get(pk=kg.pk)
        others = [m for m in StructuralModel.objects.filter(kg=kg).in_flight() if row is None or m.pk != row.pk]
        for other in others:
            if not other.is_stale and other.status == StructuralModel.Status.TRAINING:
                raise TrainingError(f"the structural model of {kg.name} is already being trained (model {other.pk}, "
                                    f"{other.progress:.0%}); wait for it")
            other.status, other.error = StructuralModel.Status.FAILED, "replaced by a newer training job"
            other.finished_at = timezone.now()
            other.save(update_fields=["status", "error", "finished_at"])
            _release_runs(other)  # they wait for this job instead
        if row is None:
            row = StructuralModel.objects.create(kg=kg, kg_version=kg.version, config={"kge": _current_config(kg)})
        row.status, row.kg_version, row.progress, row.error = StructuralModel.Status.TRAINING, kg.version, 0.0, ""
        row.started_at = row.heartbeat_at = timezone.now()
        row.save()
        HeldOutTriple.objects.filter(model=row).delete()  # a re-delivered job starts over
    return row


class _Reporter:
    """Writes progress to the row (throttled) and to an optional callback (a progress bar)."""

    def __init__(self, row: StructuralModel, echo: Report | None):
        self.row, self.echo, self.last = row, echo, 0.0

    def __call__(self, stage: str, fraction: float = 0.0, detail: str = "") -> None:
        low, high = STAGES[stage]
        overall = low + (high - low) * min(1.0, max(0.0, fraction))
        text = f"{stage}: {detail}" if detail else stage
        if self.echo is not None:
            self.echo(overall, text)
        now = time.monotonic()
        if now - self.last >= HEARTBEAT_EVERY.total_seconds() or fraction >= 1.0:
            self.last = now
            StructuralModel.objects.filter(pk=self.row.pk).update(progress=overall, stage=text[:100], heartbeat_at=timezone.now())


def train(kg: KnowledgeGraph, *, config: kge.KGEConfig | None = None, row: StructuralModel | None = None,
          report: Report | None = None) -> StructuralModel:
    """Run the whole job for the KG's current version; the ready model is returned (older ones superseded).
    A KG that is a known dataset reports the MRR on its validation split, so that every model of it — a
    retraining too — reports the same figure, and on the part of it early stopping never ranked."""
    row = _start(kg, row)
    progress = _Reporter(row, report)
    try:
        progress("preparing", 0.0, "reading triples")
        data = training_data(kg)
        if len(data.train) == 0:
            raise TrainingError(f"{kg.name} has no triples to train on")
        config = config or (kge.KGEConfig.from_dict(row.config["kge"]) if (row.config or {}).get("kge")
                            else kge.default_config(len(data.train), data.num_entities))
        _hold_out(row, data)
        known = data.known
        trained = kge.train(config, data.train, num_entities=data.num_entities, num_relations=data.num_relations,
                            validation=data.stopping, known=known,
                            progress=lambda fraction, detail: progress("training", fraction, detail))
        metrics = {"validation": trained.validation, "epochs": trained.epochs, "training_seconds": round(trained.seconds, 1),
                   "stopped_because": trained.stopped_because, "cut_short": trained.cut_short, "history": trained.history,
                   "training_triples": len(data.train), "held_out": _held_out_counts(data)}
        if len(data.validation):
            progress("validating", 0.0, "dataset validation split")
            metrics["dataset_validation"] = kge.link_prediction(trained.model, data.validation, known)
            metrics["dataset_validation_unranked"] = kge.link_prediction(trained.model, data.unranked, known)
        row.weights = pack(trained.model, data.entity_rows, data.relation_rows)
        row.config = {"kge": config.to_dict()}
        row.metrics, row.training_digest, row.training_triples = metrics, data.digest, len(data.train)
        row.save(update_fields=["weights", "config", "metrics", "training_digest", "training_triples"])
        progress("calibrating", 0.0, "mining rules from the triples the network learns, fitting probabilities per relation")
        try:
            calibrate_structural(row)
        except ValueError as exc:  # a KG too small (or too untyped) to calibrate: its scores stay uncalibrated
            logger.warning("the structural model of %s is not calibrated: %s", kg.name, exc)
            row.metrics = {**row.metrics, "calibration": {"error": str(exc)}}
            row.save(update_fields=["metrics"])
        progress("calibrating", 1.0, "done")
    except KeyboardInterrupt:  # Ctrl-C (or SIGTERM, see train_kge) on a foreground training: no job left "training"
        _fail(row, "interrupted before it finished")
        raise
    except Exception as exc:
        logger.exception("training the structural model of %s failed", kg.name)
        _fail(row, f"{type(exc).__name__}: {exc}")
        if isinstance(exc, TrainingError | ValueError):
            raise TrainingError(str(exc)) from exc
        raise TrainingError(f"training failed: {exc}\n{traceback.format_exc(limit=3)}") from exc
    with transaction.atomic():
        _make_current(kg, row)
    _release_runs(row)
    row.refresh_from_db()
    return row


def cut_short_warning(row: StructuralModel) -> str:
    """What to do when the time budget, not the held-out MRR, ended a model's training, or ""."""
    metrics = row.metrics or {}
    if not metrics.get("cut_short"):
        return ""
    minutes = ((row.config or {}).get("kge") or {}).get("max_minutes") or 15
    rise = [f"{step['mrr']:.3f}" for step in metrics.get("history", [])[-2:]]
    epochs = metrics["epochs"]
    return (f"The {minutes:g}-minute budget ended the training of structural model #{row.pk} of {row.kg.name} after "
            f"{epochs} epoch{'s' if epochs != 1 else ''} while its held-out MRR was still rising ({' → '.join(rise)} at the last "
            f"validation); a machine busy with other work fits fewer epochs into the budget. To train it for longer: "
            f"manage.py train_kge {row.kg.name} --config '{{\"max_minutes\": {2 * minutes:g}}}'")


def _fail(row: StructuralModel, error: str) -> None:
    StructuralModel.objects.filter(pk=row.pk).update(status=StructuralModel.Status.FAILED, finished_at=timezone.now(),
                                                     error=error[:2000], stage="failed")
    _release_runs(row)


def _release_runs(row: StructuralModel) -> None:
    """The runs that waited for this job start now (verifier/runner.py)."""
    from verifier.runner import release_awaiting  # the runner imports this module

    release_awaiting(row.pk)


def _make_current(kg: KnowledgeGraph, row: StructuralModel) -> None:
    """``row`` becomes the KG's ready model. The one it replaces keeps its weights, so that it can be restored,
    when it was trained on the same KG version; every other superseded model gives them up (megabytes each)."""
    row.refresh_from_db(fields=["kg_version"])  # a reload that changed no triple may have carried it to a new version
    StructuralModel.objects.filter(kg=kg, status=StructuralModel.Status.SUPERSEDED).exclude(pk=row.pk).exclude(
        weights=None).update(weights=None)
    replaced = StructuralModel.objects.filter(kg=kg, status=StructuralModel.Status.READY).exclude(pk=row.pk)
    replaced.exclude(kg_version=row.kg_version).update(status=StructuralModel.Status.SUPERSEDED, stage="superseded", weights=None)
    replaced.update(status=StructuralModel.Status.SUPERSEDED, stage="superseded")
    StructuralModel.objects.filter(pk=row.pk).update(status=StructuralModel.Status.READY, progress=1.0, stage="ready",
                                                     finished_at=timezone.now(), heartbeat_at=timezone.now())


def restorable(kg: KnowledgeGraph) -> int | None:
    """The model ``manage.py train_kge --restore`` can make current again: the one the ready model replaced."""
    return StructuralModel.objects.filter(kg=kg, kg_version=kg.version, status=StructuralModel.Status.SUPERSEDED,
                                          weights__isnull=False).values_list("pk", flat=True).first()


def restore(kg: KnowledgeGraph, model_id: int) -> StructuralModel:
    """Make the model the ready one replaced current again (a retraining that turned out worse), calibrated again:
    the KG's rules and its calibration's fit triples were the replacing model's, mined and drawn without that
    model's held-out triples, not this one's."""
    with transaction.atomic():
        kg = KnowledgeGraph.objects.select_for_update().get(pk=kg.pk)
        row = StructuralModel.objects.defer("weights", "calibration").filter(kg=kg, pk=model_id).first()
        if row is None:
            raise TrainingError(f"{kg.name} has no structural model #{model_id}")
        if row.status == StructuralModel.Status.READY:
            raise TrainingError(f"structural model #{model_id} is already the ready model of {kg.name}")
        candidate = restorable(kg)
        if row.pk != candidate:
            why = (f"it is {row.get_status_display().lower()}" if row.status != StructuralModel.Status.SUPERSEDED
                   else "its weights were released")
            raise TrainingError(f"structural model #{model_id} cannot be restored: {why}. Restorable: "
                                f"{f'#{candidate}' if candidate else 'none'} (only the model the ready one replaced "
                                f"keeps its weights, and only while the KG stays at the version it was trained on)")
        _make_current(kg, row)
    row.refresh_from_db()
    try:
        calibrate_structural(row)
    except ValueError as exc:  # as after training: a KG too small to calibrate keeps its scores uncalibrated
        logger.warning("structural model #%s restored without a calibration: %s", row.pk, exc)
    row.refresh_from_db()
    return row


def _held_out_counts(data: TrainingData) -> dict:
    reasons = list(data.held_out.values())
    return {"queued": reasons.count("queued"), "calibration": reasons.count("calibration")}


def _hold_out(row: StructuralModel, data: TrainingData) -> None:
    HeldOutTriple.objects.bulk_create([
        HeldOutTriple(model=row, head_id=h, relation_id=r, tail_id=t, reason=reason)
        for (h, r, t), reason in data.held_out.items()
    ], batch_size=5000)
