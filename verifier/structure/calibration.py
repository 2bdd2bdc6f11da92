"""From scores to probabilities, per relation, and how well probabilities are calibrated.

``RelationCalibrator`` is Platt scaling per relation with shrinkage: one logistic regression
(scikit-learn) over the score features, plus a per-relation intercept and per-relation slopes that the
L2 penalty pulls towards the shared fit. A relation with plenty of labelled triples gets its own
scaling; a relation with few (or none) falls back on what all relations share. Each relation's
positives and negatives weigh the same in total, so the probabilities assume a balanced prior — each
verdict 50% likely before the evidence, as the method's judgment criteria say — and each relation weighs
as many (true, false) pairs as it can form, min(#true, #false): a relation with one negative says as
little about the fit as it would in a relation-matched test set, instead of as much as one with hundreds.

``BoostedCalibrator`` is the non-linear alternative: gradient-boosted trees (scikit-learn's
HistGradientBoostingClassifier) over the same features with the relation as a categorical feature,
each triple weighed as above. Where features interact — a rule's support says more when the embedding
is unsure, a mention settles an occupation but not a citizenship — trees weigh them jointly. A fit
keeps whichever of the two predicts its labelled triples better out of fold (``fit_best``): trees need a
few hundred labelled triples, so a small KG keeps the Platt scaling.

``CrossFitted`` keeps, beside the calibration fitted on every labelled triple, one fitted without each
fold of them (cross-fitting): a triple the calibration was fitted on is scored by the fold variant that
never saw it, so labelled triples serve both the fit and an honest evaluation.

``expected_calibration_error`` and ``reliability_bins`` follow the usual definition: predictions binned
by confidence into 10 equal-width bins, ECE = Σ (n_bin / n) · |accuracy_bin − mean confidence_bin|.
"""

from __future__ import annotations

import base64
import functools
import pickle
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

C_GRID = (0.03, 0.1, 0.3, 1.0, 3.0)
CONSTANT_SPREAD = 1e-6  # a feature spread below this is a constant: standardised by 1, not divided by noise
FOLDS = 5
SEED = 0
MAX_CATEGORIES = 250  # the trees' categorical feature takes at most 255 values: rarer relations share "missing"
TREES = {"max_iter": 200, "learning_rate": 0.05, "max_leaf_nodes": 15, "l2_regularization": 1.0}


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

    def probabilities(self, x: np.ndarray, relations: Sequence[str]) -> np.ndarray:
        return np.array([self.probability(row, relation) for row, relation in zip(x, relations, strict=True)])

    def to_dict(self) -> dict:
        return {"features": self.features, "mean": self.mean, "scale": self.scale, "intercept": self.intercept,
                "weights": self.weights, "relations": self.relations, "c": self.c}

    @classmethod
    def from_dict(cls, data: dict) -> RelationCalibrator:
        return cls(**data)


@dataclass
class BoostedCalibrator:
    features: list[str]
    relations: dict[str, int]  # relation → its category code (relations outside it are a missing category)
    trees: object  # a fitted sklearn.ensemble.HistGradientBoostingClassifier
    _compiled: object = field(default=None, init=False, repr=False, compare=False)

    def probability(self, x: Sequence[float], relation: str) -> float:
        return float(self.probabilities(np.asarray(x, dtype=float)[None, :], [relation])[0])

    def probabilities(self, x: np.ndarray, relations: Sequence[str]) -> np.ndarray:
        import treelite.gtil

        codes = np.array([self.relations.get(str(r), np.nan) for r in relations], dtype=float)
        design = np.column_stack([np.asarray(x, dtype=float), codes])
        return treelite.gtil.predict(self.compiled(), design, nthread=1).reshape(len(design), -1)[:, -1]

    def compiled(self):
        """The trees as a Treelite model, which predicts what scikit-learn's ``predict_proba`` does (the same
        probabilities to rounding) in about 0.1 ms for one triple: scikit-learn walks its 200 trees one Python
        call at a time, 2–3 ms a triple on the tools' per-call path. Converted once per loaded calibration."""
        if self._compiled is None:
            import treelite.sklearn

            self._compiled = treelite.sklearn.import_model(self.trees)
        return self._compiled

    def to_dict(self) -> dict:
        # The trees are pickled: they are read back only from the project's own database, by the same
        # pinned scikit-learn that fitted them (a new version recalibrates: train_kge --recalibrate).
        return {"kind": "boosted", "features": self.features, "relations": self.relations,
                "trees": base64.b64encode(pickle.dumps(self.trees)).decode("ascii")}

    @classmethod
    def from_dict(cls, data: dict) -> BoostedCalibrator:
        return cls(list(data["features"]), dict(data["relations"]), pickle.loads(base64.b64decode(data["trees"])))  # noqa: S301


Calibrator = RelationCalibrator | BoostedCalibrator


@functools.cache
def _thread_pools():
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()  # inspecting the loaded libraries costs milliseconds: once per process


def one_thread():
    """The trees fit on one OpenMP thread (the calling thread's setting; other threads keep theirs). Beside a
    busy model server on the same two cores, OpenMP's spinning threads made a fit three times as long (and,
    when scikit-learn still predicted, scoring one triple p95 2.4 s instead of 2 ms); on a quiet machine one
    thread is as fast at these sizes."""
    return _thread_pools().limit(limits=1, user_api="openmp")


def calibrator_from_dict(data: dict) -> Calibrator:
    return BoostedCalibrator.from_dict(data) if data.get("kind") == "boosted" else RelationCalibrator.from_dict(data)


@dataclass
class CrossFitted:
    """A calibration fitted on all its labelled triples (``full``) and, per fold, one fitted without that fold."""

    full: Calibrator
    folds: list[Calibrator] = field(default_factory=list)

    def probability(self, x: Sequence[float], relation: str, fold: int | None = None) -> float:
        """P(true) of a triple; ``fold``: the fold it was fitted in (None for a triple the calibration never saw)."""
        return self.calibrator(fold).probability(x, relation)

    def calibrator(self, fold: int | None) -> Calibrator:
        return self.folds[fold] if fold is not None and 0 <= fold < len(self.folds) else self.full

    def stored(self, name: str) -> dict:
        """The entries of StructuralModel.calibration that hold it under ``name``."""
        return {name: self.full.to_dict(), f"{name}_folds": [c.to_dict() for c in self.folds]}

    @classmethod
    def from_stored(cls, calibration: dict, name: str) -> CrossFitted | None:
        if not calibration.get(name):
            return None
        return cls(calibrator_from_dict(calibration[name]),
                   [calibrator_from_dict(c) for c in calibration.get(f"{name}_folds") or []])


def fold_assignment(relations: Sequence[str], labels: np.ndarray, folds: int = FOLDS, seed: int = SEED) -> np.ndarray | None:
    """Each labelled triple's fold, stratified by relation and label (drawn with ``seed``; a stratum too small to spread
    over the folds joins its label's stratum of the small ones, and that one, if still too small, the label's
    largest), or None with too few of either label for ``folds`` folds."""
    from sklearn.model_selection import StratifiedKFold

    labels = np.asarray(labels, dtype=bool)
    if min(int(labels.sum()), int((~labels).sum())) < folds:
        return None
    strata = [f"{r}:{int(y)}" for r, y in zip(relations, labels, strict=True)]
    sizes = Counter(strata)
    strata = [s if sizes[s] >= folds else str(int(y)) for s, y in zip(strata, labels, strict=True)]
    sizes = Counter(strata)
    largest = {y: max((s for s, label in zip(strata, labels, strict=True) if label == y), key=sizes.__getitem__)
               for y in (False, True)}
    strata = [s if sizes[s] >= folds else largest[bool(y)] for s, y in zip(strata, labels, strict=True)]
    out = np.zeros(len(labels), dtype=np.int64)
    splitter = StratifiedKFold(n_splits=folds, shuffle=True, random_state=seed)
    for k, (_, held) in enumerate(splitter.split(np.zeros(len(labels)), strata)):
        out[held] = k
    return out


Fit = Callable[..., Calibrator]  # (x, relations, labels, *, feature_names) → a calibrator


def cross_fit(x: np.ndarray, relations: Sequence[str], labels: Sequence[bool], *, feature_names: Sequence[str],
              folds: np.ndarray, fit: Fit | None = None) -> tuple[list[Calibrator], np.ndarray]:
    """(per fold a calibrator fitted without it, each triple's out-of-fold probability); ``fit``: how a
    calibrator is fitted (per-relation Platt scaling unless given)."""
    fit = fit or fit_relation_calibrator
    x = np.asarray(x, dtype=float)
    labels = np.asarray(labels, dtype=bool)
    relations = [str(r) for r in relations]
    calibrators, out = [], np.zeros(len(labels))
    for k in range(int(folds.max()) + 1):
        kept, held = np.flatnonzero(folds != k), np.flatnonzero(folds == k)
        calibrator = fit(x[kept], [relations[i] for i in kept], labels[kept], feature_names=feature_names)
        out[held] = calibrator.probabilities(x[held], [relations[i] for i in held])
        calibrators.append(calibrator)
    return calibrators, out


def fit_best(x: np.ndarray, relations: Sequence[str], labels: Sequence[bool], *, feature_names: Sequence[str],
             folds: np.ndarray) -> tuple[CrossFitted, np.ndarray]:
    """Cross-fit both kinds of calibrator and keep the one whose out-of-fold probabilities have the lower
    log-loss (each triple weighed as the fit weighs it): (the calibration, its out-of-fold probabilities)."""
    labels = np.asarray(labels, dtype=bool)
    weights = matched_weights([str(r) for r in relations], labels.astype(int))
    best = None
    for fit in (fit_relation_calibrator, fit_boosted_calibrator):
        calibrators, out = cross_fit(x, relations, labels, feature_names=feature_names, folds=folds, fit=fit)
        p = np.clip(out, 1e-6, 1 - 1e-6)
        loss = float(-np.sum(weights * np.where(labels, np.log(p), np.log(1 - p))))
        if best is None or loss < best[0]:
            best = (loss, fit, calibrators, out)
    _, fit, calibrators, out = best
    return CrossFitted(fit(x, relations, labels, feature_names=feature_names), calibrators), out


def fit_boosted_calibrator(x: np.ndarray, relations: Sequence[str], labels: Sequence[bool], *,
                           feature_names: Sequence[str]) -> BoostedCalibrator:
    """Gradient-boosted trees over the features and the relation (a category), each triple weighed as
    ``matched_weights`` says; a relation with one label only keeps a token weight, so its triples still
    shape the trees' splits on the other features."""
    from sklearn.ensemble import HistGradientBoostingClassifier

    x = np.asarray(x, dtype=float).reshape(len(labels), -1)
    y = np.asarray(labels, dtype=int)
    relations = [str(r) for r in relations]
    if len(set(y.tolist())) < 2:
        raise ValueError("calibration needs both true and false examples")
    frequent = [r for r, _ in Counter(relations).most_common(MAX_CATEGORIES)]
    codes = {r: i for i, r in enumerate(sorted(frequent))}
    design = np.column_stack([x, [codes.get(r, np.nan) for r in relations]])
    trees = HistGradientBoostingClassifier(categorical_features=[x.shape[1]], random_state=SEED, **TREES)
    with one_thread():
        trees.fit(design, y, sample_weight=matched_weights(relations, y) + 1e-3)
    return BoostedCalibrator(list(feature_names), codes, trees)


def _design(z: np.ndarray, relations: list[str], known: list[str]):
    """The shared features, then per known relation an indicator and the features again (zero elsewhere),
    as a sparse matrix: each row fills d + 1 + d of its d + k·(1 + d) columns, so a KG with hundreds of
    relations fits in seconds instead of hours."""
    from scipy import sparse

    index = {r: i for i, r in enumerate(known)}
    n, d = z.shape
    rows, cols, values = [], [], []
    for row, relation in enumerate(relations):
        rows.append(np.full(d, row))
        cols.append(np.arange(d))
        values.append(z[row])
        i = index.get(relation)
        if i is not None:
            base = d + i * (1 + d)
            rows.append(np.full(d + 1, row))
            cols.append(np.arange(base, base + 1 + d))
            values.append(np.concatenate([[1.0], z[row]]))
    return sparse.csr_matrix((np.concatenate(values), (np.concatenate(rows), np.concatenate(cols))),
                             shape=(n, d + len(known) * (1 + d)))


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
    # A feature constant over the labelled triples (a KG without text has no mentions) carries no weight; its
    # spread is float noise (0.1 repeated has a std of 1e-17), which the stored six decimals would make 0.
    scale[scale < CONSTANT_SPREAD] = 1.0
    z = (x - mean) / scale
    labels_of = {(r, int(v)) for r, v in zip(relations, y, strict=True)}
    known = sorted({r for r in relations if (r, 0) in labels_of and (r, 1) in labels_of})
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
