"""Onboarding a KG of one's own: from a file (TSV triples or N-Triples with labels and descriptions) to calibrated
verdicts in one go — load it, mine its rules, train its structural model (one network per fold, each within a
budget that follows the KG's size) and calibrate it on its own facts without labels, then weigh its verdicts by
that calibration. What was reached is stated as measured on the KG's own facts, and how long each stage took.

``manage.py onboard FILE --name NAME`` runs it here; the page (``/kgs/new/``) keeps the upload and hands it to the
training workers (``verifier.onboard_kg``), whose progress the page shows.
"""

from __future__ import annotations

import logging
import shutil
import time
from collections.abc import Callable
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from verifier import confidence
from verifier.errors import ApplicationError
from verifier.kg.loader import ImportRejected, load_source
from verifier.kg.sources import SourceError, detect_source
from verifier.models import KnowledgeGraph, Onboarding
from verifier.queueing import ONBOARD_KG, enqueue
from verifier.services import record_audit
from verifier.structure.training import TrainingError, train

logger = logging.getLogger(__name__)

# Share of the progress bar each stage takes.
STAGES = {"loading": (0.0, 0.1), "training": (0.1, 1.0)}

Report = Callable[[float, str], None]


class OnboardingError(ApplicationError):
    """The KG cannot be onboarded as asked (the message says why)."""


def uploads_dir() -> Path:
    folder = Path(settings.KGV_UPLOAD_DIR)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def request(*, path: Path, name: str, actor=None) -> Onboarding:
    """Keep ``path`` (moved into the upload folder) and hand its onboarding to the training workers."""
    if KnowledgeGraph.objects.filter(name=name).exclude(version=0).exists():
        raise OnboardingError(f"a KG named {name!r} is loaded already: choose another name")
    if Onboarding.objects.filter(name=name, status__in=[Onboarding.Status.QUEUED, Onboarding.Status.RUNNING]).exists():
        raise OnboardingError(f"{name!r} is being onboarded already")
    kept = uploads_dir() / f"{name}-{int(time.time())}{path.suffix}"
    shutil.move(str(path), kept)
    with transaction.atomic():
        user = actor if getattr(actor, "is_authenticated", False) else None
        onboarding = Onboarding.objects.create(name=name, file=str(kept), created_by=user, stage="waiting for a training worker")
        record_audit(actor=actor, action="kg.onboard", obj=onboarding, after={"name": name, "file": path.name})
        enqueue(ONBOARD_KG, onboarding.pk)
    return onboarding


def run(onboarding: Onboarding, *, report: Report | None = None) -> Onboarding:
    """Every stage in this process (the worker's task, ``manage.py onboard``)."""
    if onboarding.status in (Onboarding.Status.FINISHED, Onboarding.Status.FAILED):
        return onboarding

    def progress(stage: str, fraction: float, text: str) -> None:
        low, high = STAGES[stage]
        overall = low + (high - low) * min(1.0, max(0.0, fraction))
        Onboarding.objects.filter(pk=onboarding.pk).update(progress=overall, stage=text[:200], status=Onboarding.Status.RUNNING)
        if report is not None:
            report(overall, text)

    seconds: dict[str, float] = {}
    try:
        started = time.monotonic()
        progress("loading", 0.0, "loading the file")
        kg = _load(onboarding)
        seconds["load"] = round(time.monotonic() - started, 1)
        Onboarding.objects.filter(pk=onboarding.pk).update(kg=kg, seconds=seconds)
        started = time.monotonic()
        model = train(kg, report=lambda fraction, text: progress("training", fraction, text))
        seconds["structural model"] = round(time.monotonic() - started, 1)
        calibration = (model.metrics or {}).get("calibration") or {}
        weighing = confidence.active_model(kg.pk)  # the training put the KG's own weighing in force
    except (OnboardingError, TrainingError) as exc:
        return _fail(onboarding, str(exc))
    except Exception as exc:
        logger.exception("onboarding %s failed", onboarding.name)
        return _fail(onboarding, f"{type(exc).__name__}: {exc}")
    quality = {"validation_mrr": (model.metrics.get("validation") or {}).get("mrr"), "networks": model.folds,
               "calibration": {key: calibration.get(key) for key in ("source", "n", "kind", "cross_validated_accuracy",
                                                                      "cross_validated_matched_accuracy", "cross_validated_ece")},
               "against": calibration.get("against"), "weighing": weighing.pk if weighing and weighing.kg_id == kg.pk else None,
               "structural_model": model.pk}
    Onboarding.objects.filter(pk=onboarding.pk).update(status=Onboarding.Status.FINISHED, progress=1.0, stage="ready",
                                                       seconds=seconds, quality=quality, finished_at=timezone.now())
    _forget_upload(onboarding)
    return Onboarding.objects.get(pk=onboarding.pk)


def _load(onboarding: Onboarding) -> KnowledgeGraph:
    try:
        source = detect_source(Path(onboarding.file), name=onboarding.name)
        return load_source(source, embed=True, progress=False).kg
    except (SourceError, ImportRejected) as exc:
        raise OnboardingError(str(exc)) from None


def _fail(onboarding: Onboarding, error: str) -> Onboarding:
    Onboarding.objects.filter(pk=onboarding.pk).update(status=Onboarding.Status.FAILED, error=error[:4000], stage="failed",
                                                       finished_at=timezone.now())
    _forget_upload(onboarding)
    return Onboarding.objects.get(pk=onboarding.pk)


def _forget_upload(onboarding: Onboarding) -> None:
    """Delete the kept copy of an upload once its onboarding has ended (a command's file is the user's own: kept)."""
    kept = Path(onboarding.file)
    if kept.parent.resolve() == uploads_dir().resolve():
        kept.unlink(missing_ok=True)


def summary_lines(onboarding: Onboarding) -> list[str]:
    """What was reached and how long each stage took, as the command and the page state it."""
    quality, seconds = onboarding.quality or {}, onboarding.seconds or {}
    calibration = quality.get("calibration") or {}
    lines = [f"{onboarding.name} is ready: " + ", ".join(f"{stage} {value / 60:.1f} min" if value >= 60 else f"{stage} {value:.0f} s"
                                                       for stage, value in seconds.items())]
    if quality.get("validation_mrr") is not None:
        lines.append(f"Structural model: {quality['networks']} networks, each ranking the facts it never saw with an MRR of "
                     f"{quality['validation_mrr']:.3f} on average.")
    if calibration.get("cross_validated_accuracy") is not None:
        lines.append(f"Verdicts, measured on {calibration['n']:,} triples — {calibration['source']} —"
                     f" each scored by a fit that never saw it: {calibration['cross_validated_accuracy']:.1%} right, "
                     f"calibration error {calibration['cross_validated_ece']:.3f}.")
        for kind, figures in (quality.get("against") or {}).items():
            lines.append(f"  against {kind}: {figures['cross_validated_matched_accuracy']:.1%} right (relation-matched), "
                         f"calibration error {figures['cross_validated_ece']:.3f}")
    return lines
