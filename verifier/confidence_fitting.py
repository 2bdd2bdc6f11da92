"""Fitting a confidence model by logistic regression (scikit-learn) on labelled runs: which runs are labelled, the
cross-fitted fit, and the comparators it reports (the structural probability alone, the model in force). The
weights it stores are read by verifier/confidence.py, which every verification uses without scikit-learn."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from django.db import transaction
from sklearn.linear_model import LogisticRegression

from verifier.agent.weighing import BRIEF_MODES, FEATURES, WEIGHED_MODES
from verifier.benchmarks.datasets import HELD_OUT_BENCHMARKS
from verifier.confidence import active_model, fit_key, put_in_force, record_fitted, stored_evidence, weights_of
from verifier.models import ConfidenceModel, Evaluation, EvaluationItem, Review, Run
from verifier.structure.calibration import expected_calibration_error, fold_assignment


def labelled_runs(*, evaluations=(), reviews: bool = False, kg=None) -> list[tuple[Run, bool]]:
    """(run, whether its triple is true) for the weighed modes' finished runs of the named evaluations (an
    agent run with an answer; every evidence- or reading-mode run, whose features need no answer) and, with ``reviews``,
    every weighed run (an investigation or the evidence weighed only) a reviewer settled as Correct or Incorrect (their
    latest verdict). Runs of a test-split benchmark are held out: naming such an evaluation is a ValueError, and
    reviews of its runs are skipped."""

    held_out = sorted(Evaluation.objects.filter(name__in=list(evaluations), benchmark__in=HELD_OUT_BENCHMARKS)
                      .values_list("name", flat=True))
    if held_out:
        raise ValueError(f"{', '.join(held_out)}: runs on a test split are held out from every fit; calibrate on "
                         "evaluations of a validation split (codex-s, fb15k-237) or of a labelled file")
    found: dict[int, tuple[Run, bool]] = {}
    of_kg = {"run__task__kg": kg} if kg is not None else {}
    items = (EvaluationItem.objects.filter(evaluation__name__in=list(evaluations), run__status=Run.Status.SUCCEEDED, **of_kg)
             .select_related("run__task__kg", "run__task__head", "run__task__relation", "run__task__tail"))
    for item in items:
        mode = item.run.config.get("mode", "agent")
        if mode in BRIEF_MODES or (mode == "agent" and item.run.verdict in ("correct", "incorrect")):
            found[item.run_id] = (item.run, item.expected_label)
    if reviews:
        settled = (Review.objects.exclude(verdict="").filter(verdict__in=["correct", "incorrect"], run__status=Run.Status.SUCCEEDED,
                                                             **of_kg)
                   .exclude(run__evaluation_items__evaluation__benchmark__in=HELD_OUT_BENCHMARKS)
                   .select_related("run__task__kg", "run__task__head", "run__task__relation", "run__task__tail")
                   .order_by("run_id", "-created_at", "-id"))
        latest: dict[int, Review] = {}
        for review in settled:
            latest.setdefault(review.run_id, review)
        for run_id, review in latest.items():
            if review.run.config.get("mode", "agent") in WEIGHED_MODES and run_id not in found:
                found[run_id] = (review.run, review.verdict == "correct")
    return list(found.values())


@dataclass
class Fit:
    model: ConfidenceModel
    n: int
    cross_validated: dict


def fit(pairs: list[tuple[Run, bool]], *, kg=None, source: str = "", activate: bool = True) -> Fit:
    """Fit, store and (``activate``) put in force a confidence model on labelled runs; their triples are recorded
    as fitted (an evaluation never draws them again). Cross-validated accuracy and ECE are reported. A model
    not put in force is a candidate, to compare with the one in force and ``activate`` later.

    Beside its own out-of-fold accuracy it reports the structural probability's alone on the same runs: a
    weighing that does not beat it adds nothing the plausibility did not already say.

    Agent, reading-mode and evidence-mode runs may be pooled: the model's features (its answer, its probe,
    its sentence judgments) are 0 in an evidence or reading run, and its reading of the head's article is
    missing from an evidence run, so each such weight is fitted on the runs that have it while every run
    informs the evidence features' weights — a few hundred one-second evidence runs and a few hundred
    few-second reading runs fit what a hundred minute-long agent runs alone could not."""

    if len(pairs) < 20 or len({label for _, label in pairs}) < 2:
        raise ValueError(f"need at least 20 labelled runs with both true and false triples (got {len(pairs)})")
    x = np.array([stored_evidence(run).vector() for run, _ in pairs])
    y = np.array([label for _, label in pairs], dtype=int)
    truth = y.astype(bool)
    answers = x[:, FEATURES.index("agent_correct")]  # ±1 where a language model answered (agent runs), else 0
    answered = answers != 0
    # Folds are drawn over triples, not runs: two runs of one triple must never sit on both sides of a fold.
    keys = [fit_key(run.task) for run, _ in pairs]
    triples = {key: (run.task.relation_id, label) for key, (run, label) in zip(keys, pairs, strict=True)}
    order = sorted(triples)
    assigned = fold_assignment([str(triples[k][0]) for k in order], np.array([triples[k][1] for k in order], dtype=bool))
    fold_of = dict(zip(order, assigned.tolist(), strict=True)) if assigned is not None else {}

    def weights(rows: np.ndarray) -> LogisticRegression:
        return LogisticRegression(C=1.0, max_iter=1000).fit(x[rows], y[rows])

    folds, out_of_fold = [], np.zeros(len(y))
    run_folds = np.array([fold_of.get(k, -1) for k in keys])
    for k in range(int(run_folds.max()) + 1):
        model_k = weights(np.flatnonzero(run_folds != k))
        held = np.flatnonzero(run_folds == k)
        out_of_fold[held] = model_k.predict_proba(x[held])[:, 1]
        folds.append({"coefficients": [round(float(c), 6) for c in model_k.coef_[0]], "intercept": round(float(model_k.intercept_[0]), 6)})
    cross_validated = {}
    if folds:
        weighed_right = (out_of_fold >= 0.5) == truth
        cross_validated = {
            "folds": len(folds),
            "ece": round(expected_calibration_error(np.maximum(out_of_fold, 1 - out_of_fold), weighed_right), 4),
            "combined_accuracy": round(float(weighed_right.mean()), 4),
            "agent_runs": int(answered.sum()),
            "agent_combined_accuracy": round(float(weighed_right[answered].mean()), 4) if answered.any() else None,
            "answer_accuracy": round(float(((answers[answered] > 0) == truth[answered]).mean()), 4) if answered.any() else None,
            **_structural_alone(x, truth, weighed_right), **_in_force_on(active_model(kg.pk if kg else None), x, keys, truth)}
    final = weights(np.arange(len(y)))
    fitted = {key: [fold_of.get(key), bool(label)] for key, (_, label) in triples.items()}
    with transaction.atomic():
        model = ConfidenceModel.objects.create(
            kg=kg, features=FEATURES, coefficients=[round(float(c), 6) for c in final.coef_[0]],
            intercept=round(float(final.intercept_[0]), 6), source=source[:500], folds=folds, fitted=fitted,
            metrics={"n": len(pairs), "positives": int(y.sum()), "cross_validated": cross_validated}, active=False)
        if activate:
            put_in_force(model)
        record_fitted(model)
    return Fit(model, len(pairs), cross_validated)


def _structural_alone(x: np.ndarray, truth: np.ndarray, weighed_right: np.ndarray) -> dict:
    """The comparator a weighing must beat, over the runs that have a structural probability: how often that
    probability alone (its stored value is out of fold for the triples its calibration was fitted on) is on the
    right side of 0.5, and how often the weighing (out of fold) is right on the same runs."""
    scored = x[:, FEATURES.index("structural_missing")] == 0
    if not scored.any():
        return {"structural_runs": 0, "structural_accuracy": None, "weighed_accuracy_on_structural_runs": None}
    right = (x[scored, FEATURES.index("structural_logit")] > 0) == truth[scored]
    return {"structural_runs": int(scored.sum()), "structural_accuracy": round(float(right.mean()), 4),
            "weighed_accuracy_on_structural_runs": round(float(weighed_right[scored].mean()), 4)}


def _in_force_on(model: ConfidenceModel | None, x: np.ndarray, keys: list[str], truth: np.ndarray) -> dict:
    """The other comparator: how the model in force for the same KGs weighs the same runs (each fitted triple of its
    own by the weights fitted without it). A candidate worth putting in force beats it here, not only on paper."""
    try:
        p_true = np.array([weights_of(model, key).probability_of(row) for key, row in zip(keys, x, strict=True)]) if model else None
    except ValueError:  # fitted on other features: it weighs nothing, and the fit that replaces it must not fail on it
        p_true = None
    if p_true is None:
        return {"in_force_model": None, "in_force_accuracy": None, "in_force_ece": None}
    right = (p_true >= 0.5) == truth
    return {"in_force_model": model.pk, "in_force_accuracy": round(float(right.mean()), 4),
            "in_force_ece": round(expected_calibration_error(np.maximum(p_true, 1 - p_true), right), 4)}
