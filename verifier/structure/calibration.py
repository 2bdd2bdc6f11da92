"""From scores to probabilities, per relation, and how well probabilities are calibrated.

``RelationCalibrator`` is Platt scaling per relation with shrinkage: one logistic regression
(scikit-learn) over the score features, plus a per-relation intercept and per-relation slopes that the
L2 penalty pulls towards the shared fit. A relation with plenty of labelled triples gets its own
scaling; a relation with few (or none) falls back on what all relations share. Each relation's
positives and negatives weigh the same in total, so the probabilities assume a balanced prior — each
verdict 50% likely before the evidence, as the method's judgment criteria say — and each relation weighs
as many (true, false) pairs as it can form, min(#true, #false): a relation with one negative says as
little about the fit as it would in a relation-matched test set, instead of as much as one with hundreds.

``CrossFitted`` keeps, beside the calibration fitted on every labelled triple, one fitted without each
fold of them (cross-fitting): a triple the calibration was fitted on is scored by the fold variant that
never saw it, so labelled triples serve both the fit and an honest evaluation.

``expected_calibration_error`` and ``reliability_bins`` follow the usual definition: predictions binned
by confidence into 10 equal-width bins, ECE = Σ (n_bin / n) · |accuracy_bin − mean confidence_bin|.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

C_GRID = (0.03, 0.1, 0.3, 1.0, 3.0)
FOLDS = 5
SEED = 0


@dataclass
class RelationCalibrator:
    features: list[str]
    mean: list[float]
    scale: list[float]
    intercept: float
    weights: list[float]
    relations: dict[str, list[float]]  # relation → [intercept offset, slope offsets…]
    c: float = 1.0

    def logit(self, x: Sequence[float], relation: str) -> float:
        z = (np.asarray(x, dtype=float) - self.mean) / self.scale
        value = self.intercept + float(np.dot(self.weights, z))
        offsets = self.relations.get(str(relation))
        if offsets is not None:
            value += offsets[0] + float(np.dot(offsets[1:], z))
        return value

    def probability(self, x: Sequence[float], relation: str) -> float:
        return float(1.0 / (1.0 + np.exp(-np.clip(self.logit(x, relation), -30, 30))))

    def to_dict(self) -> dict:
        return {"features": self.features, "mean": self.mean, "scale": self.scale, "intercept": self.intercept,
                "weights": self.weights, "relations": self.relations, "c": self.c}

    @classmethod
    def from_dict(cls, data: dict) -> RelationCalibrator:
        return cls(**data)


@dataclass
class CrossFitted:
    """A calibration fitted on all its labelled triples (``full``) and, per fold, one fitted without that fold."""

    full: RelationCalibrator
    folds: list[RelationCalibrator] = field(default_factory=list)

    def probability(self, x: Sequence[float], relation: str, fold: int | None = None) -> float:
        """P(true) of a triple; ``fold``: the fold it was fitted in (None for a triple the calibration never saw)."""
        return self.calibrator(fold).probability(x, relation)

    def calibrator(self, fold: int | None) -> RelationCalibrator:
        return self.folds[fold] if fold is not None and 0 <= fold < len(self.folds) else self.full

    def stored(self, name: str) -> dict:
        """The entries of StructuralModel.calibration that hold it under ``name``."""
        return {name: self.full.to_dict(), f"{name}_folds": [c.to_dict() for c in self.folds]}

    @classmethod
    def from_stored(cls, calibration: dict, name: str) -> CrossFitted | None:
        if not calibration.get(name):
            return None
        return cls(RelationCalibrator.from_dict(calibration[name]),
                   [RelationCalibrator.from_dict(c) for c in calibration.get(f"{name}_folds") or []])


def fold_assignment(relations: Sequence[str], labels: np.ndarray, folds: int = FOLDS) -> np.ndarray | None:
    """Each labelled triple's fold, stratified by relation and label (seeded; a stratum too small to spread
    over the folds joins its label's stratum), or None with too few of either label for ``folds`` folds."""
    from sklearn.model_selection import StratifiedKFold

    labels = np.asarray(labels, dtype=bool)
    if min(int(labels.sum()), int((~labels).sum())) < folds:
        return None
    strata = [f"{r}:{int(y)}" for r, y in zip(relations, labels, strict=True)]
    sizes = Counter(strata)
    strata = [s if sizes[s] >= folds else str(int(y)) for s, y in zip(strata, labels, strict=True)]
    out = np.zeros(len(labels), dtype=np.int64)
    splitter = StratifiedKFold(n_splits=folds, shuffle=True, random_state=SEED)
    for k, (_, held) in enumerate(splitter.split(np.zeros(len(labels)), strata)):
        out[held] = k
    return out


def cross_fit(x: np.ndarray, relations: Sequence[str], labels: Sequence[bool], *, feature_names: Sequence[str],
              folds: np.ndarray) -> tuple[list[RelationCalibrator], np.ndarray]:
    """(per fold a calibrator fitted without it, each triple's out-of-fold probability)."""
    x = np.asarray(x, dtype=float)
    labels = np.asarray(labels, dtype=bool)
    relations = [str(r) for r in relations]
    calibrators, out = [], np.zeros(len(labels))
    for k in range(int(folds.max()) + 1):
        fit, held = np.flatnonzero(folds != k), np.flatnonzero(folds == k)
        calibrator = fit_relation_calibrator(x[fit], [relations[i] for i in fit], labels[fit], feature_names=feature_names)
        out[held] = [calibrator.probability(x[i], relations[i]) for i in held]
        calibrators.append(calibrator)
    return calibrators, out


def _design(z: np.ndarray, relations: list[str], known: list[str]) -> np.ndarray:
    index = {r: i for i, r in enumerate(known)}
    k, d = len(known), z.shape[1]
    design = np.zeros((len(z), d + k * (1 + d)))
    design[:, :d] = z
    for row, relation in enumerate(relations):
        i = index.get(relation)
        if i is not None:
            base = d + i * (1 + d)
            design[row, base] = 1.0
            design[row, base + 1: base + 1 + d] = z[row]
    return design


def matched_weights(relations: list[str], labels: np.ndarray) -> np.ndarray:
    """Each (relation, label) group weighs min(#true, #false) of its relation in total (see the module
    docstring); a relation with one label only weighs nothing."""
    counts = Counter(zip(relations, labels.tolist(), strict=True))
    weights = np.array([min(counts[(r, 0)], counts[(r, 1)]) / counts[(r, y)]
                        for r, y in zip(relations, labels.tolist(), strict=True)])
    if weights.sum() == 0:
        raise ValueError("calibration needs true and false examples of the same relation")
    return weights * len(weights) / weights.sum()


def fit_relation_calibrator(x: np.ndarray, relations: Sequence[str], labels: Sequence[bool], *,
                            feature_names: Sequence[str], c: float | None = None, seed: int = 0) -> RelationCalibrator:
    """Fit on labelled score features (rows of ``x``); ``c`` (inverse L2 strength) is chosen by grouped
    cross-validated log-loss when not given."""
    from sklearn.linear_model import LogisticRegression

    x = np.asarray(x, dtype=float).reshape(len(labels), -1)
    y = np.asarray(labels, dtype=int)
    relations = [str(r) for r in relations]
    if len(set(y.tolist())) < 2:
        raise ValueError("calibration needs both true and false examples")
    mean, scale = x.mean(axis=0), x.std(axis=0)
    scale[scale == 0] = 1.0
    z = (x - mean) / scale
    known = sorted({r for r in relations if len({int(v) for v, rr in zip(y, relations, strict=True) if rr == r}) == 2})
    design = _design(z, relations, known)
    weights = matched_weights(relations, y)
    if c is None:
        c = _choose_c(design, y, weights, seed)
    model = LogisticRegression(C=c, max_iter=2000)
    model.fit(design, y, sample_weight=weights)
    coef = model.coef_[0]
    d = z.shape[1]
    per_relation = {r: coef[d + i * (1 + d): d + (i + 1) * (1 + d)].round(6).tolist() for i, r in enumerate(known)}
    return RelationCalibrator(list(feature_names), mean.round(6).tolist(), scale.round(6).tolist(),
                              round(float(model.intercept_[0]), 6), coef[:d].round(6).tolist(), per_relation, c)


def _choose_c(design: np.ndarray, y: np.ndarray, weights: np.ndarray, seed: int) -> float:
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import StratifiedKFold

    splits = min(5, int(np.bincount(y).min()))
    if splits < 2:
        return 1.0
    folds = StratifiedKFold(n_splits=splits, shuffle=True, random_state=seed)
    losses = {}
    for c in C_GRID:
        total = 0.0
        for fit, held in folds.split(design, y):
            model = LogisticRegression(C=c, max_iter=2000).fit(design[fit], y[fit], sample_weight=weights[fit])
            p = np.clip(model.predict_proba(design[held])[:, 1], 1e-6, 1 - 1e-6)
            total += float(-np.sum(weights[held] * (y[held] * np.log(p) + (1 - y[held]) * np.log(1 - p))))
        losses[c] = total
    return min(losses, key=losses.get)


def reliability_bins(confidence: Sequence[float], right: Sequence[bool], bins: int = 10) -> list[dict]:
    """Per equal-width confidence bin: count, mean confidence and accuracy (empty bins left out)."""
    confidence = np.asarray(confidence, dtype=float)
    right = np.asarray(right, dtype=float)
    edges = np.linspace(0.0, 1.0, bins + 1)
    which = np.clip(np.digitize(confidence, edges[1:-1], right=True), 0, bins - 1)
    table = []
    for b in range(bins):
        members = which == b
        if members.any():
            table.append({"low": round(float(edges[b]), 2), "high": round(float(edges[b + 1]), 2), "n": int(members.sum()),
                          "confidence": float(confidence[members].mean()), "accuracy": float(right[members].mean())})
    return table


def expected_calibration_error(confidence: Sequence[float], right: Sequence[bool], bins: int = 10) -> float:
    n = len(confidence)
    if n == 0:
        return 0.0
    return float(sum(b["n"] / n * abs(b["accuracy"] - b["confidence"]) for b in reliability_bins(confidence, right, bins)))


def calibration_error(probabilities: np.ndarray, labels: np.ndarray) -> float:
    """ECE of the verdicts a 0.5 threshold gives, confidence = the probability of the verdict given."""
    verdict_true = probabilities >= 0.5
    confidence = np.where(verdict_true, probabilities, 1 - probabilities)
    return expected_calibration_error(confidence, verdict_true == labels.astype(bool))
