"""The structural-model job of a KG version: one network per fold, then the calibration — with progress.

``request_training`` queues the job on the training queue (after ``load_kg``, after a change to the KG);
``train`` runs it in the calling process (``manage.py train_kge``, the training worker). Network k learns every
triple outside fold k (verifier/structure/folds.py), so every triple the KG states is scored by a network that
never saw it: importing flagged facts never needs a training. While a changed KG's model trains, the model of
its previous version keeps scoring. Progress (with the minutes left), stage and a heartbeat are written on the
StructuralModel row, which the workbench and ``/health/`` read; a job whose heartbeat stops is shown as stalled,
the same KG is never trained by two jobs at once, and a job sent again after its worker died keeps the networks
it had finished.
"""

from __future__ import annotations

import logging
import time
import traceback
from collections.abc import Callable
from datetime import timedelta

import numpy as np
from django.db import transaction
from django.utils import timezone

from verifier.models import FoldNetwork, KnowledgeGraph, Run, StructuralModel
from verifier.queueing import TRAIN_STRUCTURAL_MODEL, enqueue
from verifier.structure import kge, signals
from verifier.structure.dataset import TrainingData, training_data
from verifier.structure.fitting import calibrate_structural
from verifier.structure.folds import DEFAULT_FOLDS
from verifier.structure.scoring import pack

logger = logging.getLogger(__name__)

HEARTBEAT_EVERY = timedelta(seconds=5)
# Share of the job's progress bar each stage takes; "training" is shared equally by the networks.
STAGES = {"preparing": (0.0, 0.02), "training": (0.02, 0.9), "calibrating": (0.9, 1.0)}

Report = Callable[[float, str], None]


class TrainingError(RuntimeError):
    """The job cannot run as asked (the message says why)."""


def request_training(kg: KnowledgeGraph, *, reason: str = "", config: dict | None = None,
                     folds: int = DEFAULT_FOLDS) -> StructuralModel | None:
    """Queue a job for the KG's current version unless one is already queued or running (returned None). Without
    ``config`` it trains what the ready model was trained with (a retraining after a change must not change the kind
    of model), else the default for the KG's size."""
    if kg.kind != KnowledgeGraph.Kind.LOCAL or kg.version == 0:
        return None
    with transaction.atomic():
        KnowledgeGraph.objects.select_for_update().get(pk=kg.pk)  # one request at a time per KG
        if live_job(kg) is not None:
            return None
        row = StructuralModel.objects.create(kg=kg, kg_version=kg.version, stage=f"queued: {reason}" if reason else "queued",
                                             config={"kge": config if config is not None else _current_config(kg)},
                                             folds=folds)
        enqueue(TRAIN_STRUCTURAL_MODEL, row.pk)
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


def live_job(kg: KnowledgeGraph) -> StructuralModel | None:
    """The KG's training job queued or running, unless its worker stopped giving signs of life."""
    return next((m for m in StructuralModel.objects.filter(kg=kg).in_flight().order_by("id") if not m.is_stale), None)


def ensure_model(kg: KnowledgeGraph, *, reason: str) -> StructuralModel | None:
    """The KG's ready model, else a training job requested (None if one is running)."""
    return StructuralModel.objects.ready_for(kg) or request_training(kg, reason=reason)


def training_to_await(kg: KnowledgeGraph) -> StructuralModel | None:
    """The training a verification on this KG should wait for before it starts, else None: the KG's first model while
    it trains (a KG with a ready model of any version is scored at once; one with none and no training in flight is
    verified without structural evidence, which its tools say)."""
    if kg.kind != KnowledgeGraph.Kind.LOCAL or kg.version == 0 or StructuralModel.objects.ready_for(kg) is not None:
        return None
    return live_job(kg)


def wait_for_model(kg: KnowledgeGraph, *, log=print, poll: float = 5.0) -> StructuralModel | None:
    """Before an evaluation or a verification in this process: the KG's ready model. A job in flight is waited for;
    with none in flight and none ready, the model is trained here (a SPARQL KG has none: None)."""
    if kg.kind != KnowledgeGraph.Kind.LOCAL:
        return None
    waiting: tuple[int, Report] | None = None
    while True:
        ready = StructuralModel.objects.ready_for(kg)
        if ready is not None:
            return ready
        live = live_job(kg)
        if live is None:
            log(f"Training the structural model of {kg.name} here (minutes)…")
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


def _start(kg: KnowledgeGraph, row: StructuralModel | None, folds: int) -> StructuralModel:
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
        if row is None:
            row = StructuralModel.objects.create(kg=kg, kg_version=kg.version, config={"kge": _current_config(kg)})
        Run.objects.filter(awaiting_model__in=others).park_for(row)  # they wait for this job instead
        if row.kg_version != kg.version:  # a job sent again after the KG changed: its networks are of the old triples
            FoldNetwork.objects.filter(model=row).delete()
        row.status, row.kg_version, row.error, row.folds = StructuralModel.Status.TRAINING, kg.version, "", folds
        row.started_at = row.heartbeat_at = timezone.now()
        row.save()
    return row


class _Reporter:
    """Writes progress to the row (throttled) and to an optional callback (a progress bar), with the minutes left
    estimated from the pace so far."""

    def __init__(self, row: StructuralModel, echo: Report | None):
        self.row, self.echo, self.last = row, echo, 0.0
        self.started, self.first = time.monotonic(), None

    def __call__(self, stage: str, fraction: float = 0.0, detail: str = "") -> None:
        low, high = STAGES[stage]
        overall = low + (high - low) * min(1.0, max(0.0, fraction))
        text = f"{stage}: {detail}" if detail else stage
        if (left := self._left(overall)) is not None:
            text += f" — about {left} left"
        if self.echo is not None:
            self.echo(overall, text)
        now = time.monotonic()
        if now - self.last >= HEARTBEAT_EVERY.total_seconds() or fraction >= 1.0:
            self.last = now
            StructuralModel.objects.filter(pk=self.row.pk).update(progress=overall, stage=text[:100], heartbeat_at=timezone.now())

    def _left(self, overall: float) -> str | None:
        """The time left at the pace since the first report past the preparation, once there is a pace."""
        now = time.monotonic()
        if self.first is None:
            if overall > STAGES["preparing"][1]:
                self.first = (now, overall)
            return None
        done = overall - self.first[1]
        if done < 0.02:
            return None
        seconds = (now - self.first[0]) / done * (1.0 - overall)
        return f"{max(1, round(seconds / 60))} min" if seconds >= 60 else f"{max(5, round(seconds, -1)):.0f} s"


def train(kg: KnowledgeGraph, *, config: kge.KGEConfig | None = None, row: StructuralModel | None = None,
          report: Report | None = None, folds: int = DEFAULT_FOLDS) -> StructuralModel:
    """Run the whole job for the KG's current version; the ready model is returned (older ones superseded). A KG
    that is a known dataset also reports the MRR on its validation split, so every model of it reports the same
    figure, on the part of it early stopping never ranked."""
    if folds < 2:
        raise TrainingError("a structural model needs at least 2 folds")
    folds = row.folds if row is not None else folds
    row = _start(kg, row, folds)
    progress = _Reporter(row, report)
    try:
        progress("preparing", 0.0, "reading triples")
        data = training_data(kg, folds=folds)
        if len(data.triples) == 0:
            raise TrainingError(f"{kg.name} has no triples to train on")
        config = config or (kge.KGEConfig.from_dict(row.config["kge"]) if (row.config or {}).get("kge")
                            else kge.default_config(len(data.triples), data.num_entities, folds=folds))
        row.config, row.training_digest, row.training_triples = {"kge": config.to_dict()}, data.digest, len(data.triples)
        row.save(update_fields=["config", "training_digest", "training_triples"])
        networks = [_network(row, data, config, fold, progress) for fold in range(folds)]
        row.metrics = _metrics(networks, data)
        row.save(update_fields=["metrics"])
        progress("calibrating", 0.0, "mining rules, fitting probabilities per relation")
        try:
            calibrate_structural(row)
        except ValueError as exc:  # a KG too small (or too untyped) to calibrate: its scores stay uncalibrated
            logger.warning("the structural model of %s is not calibrated: %s", kg.name, exc)
            row.metrics = {**row.metrics, "calibration": {"error": str(exc)}}
            row.save(update_fields=["metrics"])
        progress("calibrating", 1.0, "done")
    except KeyboardInterrupt:  # Ctrl-C (or SIGTERM, see train_kge) on a foreground training: no job left "training"
        fail(row, "interrupted before it finished")
        raise
    except Exception as exc:
        logger.exception("training the structural model of %s failed", kg.name)
        fail(row, f"{type(exc).__name__}: {exc}")
        if isinstance(exc, TrainingError | ValueError):
            raise TrainingError(str(exc)) from exc
        raise TrainingError(f"training failed: {exc}\n{traceback.format_exc(limit=3)}") from exc
    with transaction.atomic():
        _make_current(kg, row)
        signals.model_ready.send(sender=StructuralModel, kg=kg, model=row)
    row.refresh_from_db()
    return row


def _network(row: StructuralModel, data: TrainingData, config: kge.KGEConfig, fold: int, progress: _Reporter) -> dict:
    """Network ``fold`` of the model (trained now, or kept from an earlier attempt of the same job): its metrics."""
    kept = FoldNetwork.objects.filter(model=row, fold=fold).values_list("metrics", flat=True).first()
    share = 1.0 / data.fold_count
    if kept is not None:
        progress("training", (fold + 1) * share, f"network {fold + 1} of {data.fold_count} kept from before")
        return kept

    def report(fraction: float, detail: str) -> None:
        progress("training", (fold + fraction) * share, f"network {fold + 1} of {data.fold_count}, {detail}")

    trained = kge.train(config, data.train(fold), num_entities=data.num_entities, num_relations=data.num_relations,
                        validation=data.stopping(fold), known=data.known, progress=report)
    metrics = {"validation": trained.validation, "epochs": trained.epochs, "training_seconds": round(trained.seconds, 1),
               "stopped_because": trained.stopped_because, "cut_short": trained.cut_short, "history": trained.history,
               "training_triples": int(len(data.train(fold)))}
    if len(data.validation):
        metrics["dataset_validation_unranked"] = kge.link_prediction(trained.model, data.unranked(), data.known)
    FoldNetwork.objects.update_or_create(model=row, fold=fold, defaults={
        "weights": pack(trained.model, data.entity_rows, data.relation_rows), "metrics": metrics})
    return metrics


def _metrics(networks: list[dict], data: TrainingData) -> dict:
    """The model's figures: each network's, and their means as the model's own."""

    def mean(values) -> float:
        return round(float(np.mean(list(values))), 4)

    validation = {key: mean(n["validation"][key] for n in networks) for key in ("mrr", "hits_at_1", "hits_at_10")}
    metrics = {"validation": validation, "epochs": round(float(np.mean([n["epochs"] for n in networks])), 1),
               "training_seconds": round(sum(n["training_seconds"] for n in networks), 1),
               "stopped_because": networks[-1]["stopped_because"], "cut_short": any(n["cut_short"] for n in networks),
               "history": networks[-1]["history"], "training_triples": int(len(data.triples)), "folds": data.fold_count,
               "networks": [{k: v for k, v in n.items() if k != "history"} for n in networks]}
    unranked = [n["dataset_validation_unranked"] for n in networks if "dataset_validation_unranked" in n]
    if unranked:
        metrics["dataset_validation"] = {**{key: mean(u[key] for u in unranked) for key in ("mrr", "hits_at_1", "hits_at_10")},
                                         "triples": unranked[0]["triples"]}
    return metrics


def cut_short_warning(row: StructuralModel) -> str:
    """What to do when the time budget, not the held-out MRR, ended a network's training, or ""."""
    metrics = row.metrics or {}
    if not metrics.get("cut_short"):
        return ""
    minutes = ((row.config or {}).get("kge") or {}).get("max_minutes") or 15
    return (f"The {minutes:g}-minute budget of each network ended the training of structural model #{row.pk} of "
            f"{row.kg.name} while its held-out MRR was still rising (validation MRR {metrics['validation']['mrr']:.3f}); "
            f"a machine busy with other work fits fewer epochs into the budget. To train for longer: "
            f"manage.py train_kge {row.kg.name} --config '{{\"max_minutes\": {2 * minutes:g}}}'")


def fail(row: StructuralModel, error: str) -> None:
    StructuralModel.objects.filter(pk=row.pk).update(status=StructuralModel.Status.FAILED, finished_at=timezone.now(),
                                                     error=error[:2000], stage="failed")


def _make_current(kg: KnowledgeGraph, row: StructuralModel) -> None:
    """``row`` becomes the KG's ready model. The one it replaces keeps its networks, so that it can be restored; every
    other superseded model gives them up (megabytes each)."""
    FoldNetwork.objects.filter(model__kg=kg, model__status=StructuralModel.Status.SUPERSEDED).exclude(model=row).delete()
    StructuralModel.objects.filter(kg=kg, status=StructuralModel.Status.READY).exclude(pk=row.pk).update(
        status=StructuralModel.Status.SUPERSEDED, stage="superseded")
    StructuralModel.objects.filter(pk=row.pk).update(status=StructuralModel.Status.READY, progress=1.0, stage="ready",
                                                     finished_at=timezone.now(), heartbeat_at=timezone.now())


def restorable(kg: KnowledgeGraph) -> int | None:
    """The model ``manage.py train_kge --restore`` can make current again: the one the ready model replaced."""
    return (StructuralModel.objects.filter(kg=kg, status=StructuralModel.Status.SUPERSEDED, networks__isnull=False)
            .order_by("-pk").values_list("pk", flat=True).first())


def restore(kg: KnowledgeGraph, model_id: int) -> StructuralModel:
    """Make the model the ready one replaced current again (a retraining that turned out worse), calibrated again:
    the KG's rules may have changed since it was calibrated."""
    with transaction.atomic():
        kg = KnowledgeGraph.objects.select_for_update().get(pk=kg.pk)
        row = StructuralModel.objects.defer("calibration").filter(kg=kg, pk=model_id).first()
        if row is None:
            raise TrainingError(f"{kg.name} has no structural model #{model_id}")
        if row.status == StructuralModel.Status.READY:
            raise TrainingError(f"structural model #{model_id} is already the ready model of {kg.name}")
        candidate = restorable(kg)
        if row.pk != candidate:
            why = (f"it is {row.get_status_display().lower()}" if row.status != StructuralModel.Status.SUPERSEDED
                   else "its networks were released")
            raise TrainingError(f"structural model #{model_id} cannot be restored: {why}. Restorable: "
                                f"{f'#{candidate}' if candidate else 'none'} (only the model the ready one replaced "
                                f"keeps its networks)")
        _make_current(kg, row)
    row.refresh_from_db()
    try:
        calibrate_structural(row)
    except ValueError as exc:  # as after training: a KG too small to calibrate keeps its scores uncalibrated
        logger.warning("structural model #%s restored without a calibration: %s", row.pk, exc)
    row.refresh_from_db()
    return row
