"""Verifying labelled triples a KG supplies itself — the memory bootstrap's draw from its training triples, the
structural model's calibration triples a KG's own confidence model is fitted on — as an evaluation: its runs can be
opened like any other, and the same name continues it after an interruption. Commands drive it in their own
process (``investigate``); the workbench hands it to the worker."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from django.conf import settings

from verifier.agent.loop import MODEL_FREE_MODES
from verifier.evaluation.driver import EvaluationSpec, drive, prepare
from verifier.evaluation.workers import worker_pool
from verifier.models import Entity, Evaluation, KnowledgeGraph, Relation, StructuralModel
from verifier.structure.fitting import LabelledRows, calibration_triples


def write_benchmark(kg: KnowledgeGraph, rows: LabelledRows, path: Path) -> Path:
    """The triples as a labelled TSV file of external ids (what ``evaluate --benchmark`` reads)."""
    entities = dict(Entity.objects.filter(kg=kg).values_list("pk", "external_id"))
    relations = dict(Relation.objects.filter(kg=kg).values_list("pk", "external_id"))
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = ["head\trelation\ttail\tlabel"] + [f"{entities[h]}\t{relations[r]}\t{entities[t]}\t{str(y).lower()}"
                                                for h, r, t, y in rows]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def labelled_evaluation(kg: KnowledgeGraph, name: str, draw: Callable[[], LabelledRows], *, mode: str = "agent",
                        seed: int = 0, concurrency: int = 1) -> Evaluation:
    """The evaluation ``name`` of the triples ``draw`` returns under ``mode``: drawn only when no evaluation of that
    name exists (an interrupted one is continued, a finished one is kept)."""
    evaluation = Evaluation.objects.filter(name=name).first()
    if evaluation is None:
        rows = draw()
        path = write_benchmark(kg, rows, settings.KGV_CACHE_DIR / "labelled" / f"{name}.tsv")
        evaluation, _ = prepare(EvaluationSpec(benchmark=str(path), kg_name=kg.name, n=len(rows), seed=seed, mode=mode,
                                               concurrency=concurrency, name=name, for_fit=True))
    return evaluation


def investigate(kg: KnowledgeGraph, name: str, draw: Callable[[], LabelledRows], *, mode: str = "agent", seed: int = 0,
                concurrency: int = 1, progress: bool = True, log: Callable[[str], None] = print) -> Evaluation:
    """Verify the triples ``draw`` returns as the evaluation ``name`` (``labelled_evaluation``) in this process, with
    workers of its own if none is running."""
    return drive_here(labelled_evaluation(kg, name, draw, mode=mode, seed=seed, concurrency=concurrency),
                      concurrency=concurrency, progress=progress, log=log)


def drive_here(evaluation: Evaluation, *, concurrency: int = 1, progress: bool = True,
               log: Callable[[str], None] = print) -> Evaluation:
    """Verify a labelled evaluation to its end in this process, with workers of its own if none is running."""
    log(f"Verifying {evaluation.items.count()} labelled triples of {evaluation.kg.name} ({evaluation.name}, {evaluation.mode})…")
    with worker_pool(concurrency, log=log, needs_model=evaluation.mode not in MODEL_FREE_MODES):
        drive(evaluation, concurrency=concurrency, progress=progress, log=log)
    return evaluation


def calibration_evaluation_name(model: StructuralModel) -> str:
    """The evidence-mode evaluation of a structural model's calibration triples, named by the model and the time of
    its calibration: a recalibration draws new triples, verified again under a new name."""
    return f"confidence-{model.kg.name}-structural-{model.pk}-{model.calibrated_at:%Y%m%d%H%M%S}"


def calibration_evaluation(model: StructuralModel, *, concurrency: int = 2) -> Evaluation:
    """The evidence-mode evaluation of the calibration triples of ``model`` (the KG's ready, calibrated one), which a
    KG's own confidence model is fitted on before anything is reviewed."""
    return labelled_evaluation(model.kg, calibration_evaluation_name(model), lambda: calibration_triples(model.kg),
                               mode="evidence", concurrency=concurrency)
