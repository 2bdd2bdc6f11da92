"""How the verdicts' confidence holds up against reviewers' decisions, and confidence models refitted on them.

A reviewer who accepts a verdict, or overrides it to Correct or Incorrect, labels the run's triple (their latest
decision on the run; "not enough evidence" labels nothing). Over a KG's reviewed runs this module reports how often
the verdicts were right at each confidence: the evaluation page's calibration figures, on the curator's own triples
instead of a benchmark's. Once enough runs are reviewed, an admin fits a candidate confidence model on them
(``confidence_fitting.fit``, cross-fitted, not put in force), compares its out-of-fold figures with the verdicts as given,
and puts it in force; the KG's finished runs are then re-weighed in the background.

Reviewers see the verdict and its confidence before they decide, so their decisions lean towards the verdict: the
figures here are an upper bound on how often the verdicts are right, and a low share of kept verdicts at a high
confidence is the signal worth acting on.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db import transaction
from django.db.models import Q

from verifier import confidence, confidence_fitting
from verifier.evaluation import metrics
from verifier.models import ConfidenceModel, KnowledgeGraph, Run
from verifier.queueing import REASSESS_CONFIDENCE, enqueue
from verifier.services import record_audit

MIN_RUNS = 20  # what confidence_fitting.fit needs, with true and false triples among them
CANDIDATES_SHOWN = 5


@dataclass
class ReviewedConfidence:
    """One KG's confidence as the workbench's confidence page shows it."""

    kg: KnowledgeGraph
    in_force: ConfidenceModel | None  # the KG's own model, else the one for every KG
    fallback: ConfidenceModel | None  # the model for every KG in force, which weighs the KG's runs without its own
    figures: dict | None  # the verdicts against reviewers' decisions (``reviewed_figures``); None: nothing reviewed
    labelled: int  # reviewed runs a refit would be fitted on
    refit_refused: str  # why a refit cannot be fitted yet ("" when it can)
    candidates: list[ConfidenceModel]  # the KG's own models not in force, newest first
    not_reweighed: int  # finished weighed runs whose confidence comes from another model than the one in force


def reviewed_figures(pairs: list[tuple[Run, bool]]) -> dict | None:
    """How often the verdicts of reviewed runs were the reviewer's (with the 95% Wilson interval) and the
    calibration of their confidences (``metrics.calibration``: ECE, reliability bins, verdicts above a threshold)."""
    if not pairs:
        return None
    outcomes = [metrics.Outcome(triple=run.task_id, relation=str(run.task.relation_id), expected=label, verdict=run.verdict,
                                confidence=run.confidence) for run, label in pairs]
    right = sum(outcome.right for outcome in outcomes)
    low, high = metrics.wilson_interval(right, len(outcomes))
    return {"n": len(outcomes), "right": right, "accuracy": right / len(outcomes), "low": low, "high": high,
            "calibration": metrics.calibration(outcomes)}


def _refit_refused(pairs: list[tuple[Run, bool]]) -> str:
    if len(pairs) < MIN_RUNS:
        return f"A refit needs at least {MIN_RUNS} reviewed runs of this KG; {len(pairs)} so far."
    if len({label for _, label in pairs}) < 2:
        return "A refit needs reviewed runs of both true and false triples; every decision so far says the same."
    return ""


def kg_confidence(kg: KnowledgeGraph) -> ReviewedConfidence:
    pairs = confidence_fitting.labelled_runs(reviews=True, kg=kg)
    in_force = confidence.active_model(kg.pk)
    not_reweighed = 0
    if in_force is not None:  # a missing key is NULL in SQL, which ~Q alone would not count
        other_model = Q(assessment__confidence_model__isnull=True) | ~Q(assessment__confidence_model=in_force.pk)
        not_reweighed = confidence.weighed_runs(Run.objects.filter(task__kg=kg)).filter(other_model).count()
    return ReviewedConfidence(
        kg=kg, in_force=in_force, fallback=confidence.active_model(None), figures=reviewed_figures(pairs), labelled=len(pairs),
        refit_refused=_refit_refused(pairs), candidates=list(ConfidenceModel.objects.filter(kg=kg, active=False)[:CANDIDATES_SHOWN]),
        not_reweighed=not_reweighed)


def every_kg() -> list[ReviewedConfidence]:
    return [kg_confidence(kg) for kg in KnowledgeGraph.objects.order_by("name")]


def refit_on_reviews(kg: KnowledgeGraph, *, actor) -> ConfidenceModel:
    """A candidate confidence model for ``kg`` fitted on its reviewed runs, not put in force. ValueError when there
    are too few of them (the message says how many)."""
    pairs = confidence_fitting.labelled_runs(reviews=True, kg=kg)
    refused = _refit_refused(pairs)
    if refused:
        raise ValueError(refused)
    with transaction.atomic():
        fitted = confidence_fitting.fit(pairs, kg=kg, source=f"{len(pairs)} reviewed runs of {kg.name}", activate=False)
        record_audit(actor=actor, action="confidence.fit", obj=fitted.model,
                     after={"kg": kg.name, "n": fitted.n, "cross_validated": fitted.cross_validated})
    return fitted.model


def put_in_force(model: ConfidenceModel, *, actor) -> None:
    """Put ``model`` in force for its KG (or every KG) and re-weigh their finished runs in the background."""
    _change(model, actor, "confidence.activate", lambda: confidence.activate(model.pk))


def stand_down(model: ConfidenceModel, *, actor) -> None:
    """Take a KG's own model out of force (the model for every KG weighs its runs again) and re-weigh them."""
    _change(model, actor, "confidence.stand_down", lambda: confidence.stand_down(model))


def _change(model: ConfidenceModel, actor, action: str, change) -> None:
    before = confidence.active_model(model.kg_id)
    with transaction.atomic():
        change()
        after = confidence.active_model(model.kg_id)
        record_audit(actor=actor, action=action, obj=model, before={"in_force": before.pk if before else None},
                     after={"in_force": after.pk if after else None})
        enqueue(REASSESS_CONFIDENCE, model.kg_id)
