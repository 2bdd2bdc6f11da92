"""How likely a triple is wrong, learnt without labels from the KG itself.

The KG's own facts are the positives and corruptions of them the negatives, four kinds (``SHARES``): an element
(head, relation or tail) replaced by a random one and an entirely random triple — the noise automatic extraction
leaves — and, one in ten, an entity of the same type in place of the head or the tail or a value the relation
takes for entities of the head's type: the errors that look most right. Those plausible corruptions are kept few:
many facts look like them (a second value of a near-functional relation, an end little else supports), and given
an equal share they teach the trees to rank such facts above the noise; one in ten keeps what they teach about
plausible errors without that. Gradient-boosted trees (scikit-learn) weigh the features
(verifier/kg_audit/features.py) jointly; the KG's facts include its own errors, which the trees learn to place
among the corruptions they resemble.

Two classifiers are fitted, each on the triples of one half (by a hash of the triple), and every triple is scored
by the one fitted on the other half: no triple's score comes from a fit that saw it.
"""

from __future__ import annotations

import base64
import pickle
import random
from dataclasses import dataclass

import numpy as np
from sklearn.ensemble import HistGradientBoostingClassifier
from sklearn.metrics import roc_auc_score

from verifier.kg_audit.features import FEATURES, AuditView
from verifier.models import KnowledgeGraph
from verifier.structure.calibration import one_thread
from verifier.structure.fitting import corruptions
from verifier.structure.folds import fold_of

SHARES = {"replaced": 0.45, "random": 0.45, "same type": 0.05, "popular": 0.05}  # of the corruptions
KINDS = tuple(SHARES)
FACTS = 60_000  # facts sampled to learn from (as many corruptions beside them)
TREES = {"max_iter": 300, "learning_rate": 0.08, "max_leaf_nodes": 31, "l2_regularization": 1.0, "min_samples_leaf": 40}
SEED = 0


@dataclass
class TrainingSet:
    rows: np.ndarray  # (n, 3) row-id triples
    labels: np.ndarray  # True: a fact of the KG
    kinds: np.ndarray  # "fact" or one of KINDS


def _random_corruptions(view: AuditView, facts: np.ndarray, n: int, rng: np.random.Generator, *, whole: bool) -> np.ndarray:
    """``n`` triples the KG lacks: facts with one element replaced at random (``whole``: random in every element)."""
    out = []
    while sum(len(chunk) for chunk in out) < n:
        want = 2 * n
        if whole:
            made = np.stack([rng.choice(view.entity_rows, want), rng.choice(view.relation_rows, want),
                             rng.choice(view.entity_rows, want)], axis=1)
        else:
            made = facts[rng.integers(len(facts), size=want)].copy()
            element = rng.integers(3, size=want)
            made[element == 0, 0] = rng.choice(view.entity_rows, (element == 0).sum())
            made[element == 1, 1] = rng.choice(view.relation_rows, (element == 1).sum())
            made[element == 2, 2] = rng.choice(view.entity_rows, (element == 2).sum())
        keep = (made[:, 0] != made[:, 2]) & ~view.graph.in_kg(view.to_indices(made))
        out.append(made[keep])
        if len(view.entity_rows) < 3:
            break
    return np.concatenate(out)[:n] if out else np.zeros((0, 3), dtype=np.int64)


def training_set(view: AuditView, kg: KnowledgeGraph, *, facts: int = FACTS, seed: int = SEED) -> TrainingSet:
    rng = np.random.default_rng(seed)
    sampled = view.triples[np.sort(rng.choice(len(view.triples), min(facts, len(view.triples)), replace=False))]
    share = {kind: max(1, round(len(sampled) * fraction)) for kind, fraction in SHARES.items()}
    order = [tuple(map(int, t)) for t in sampled]
    random.Random(seed).shuffle(order)
    plausible = share["same type"]
    made = {
        "replaced": _random_corruptions(view, view.triples, share["replaced"], rng, whole=False),
        "random": _random_corruptions(view, view.triples, share["random"], rng, whole=True),
        "same type": np.array([row[:3] for row in corruptions(kg, order[:plausible])], dtype=np.int64).reshape(-1, 3),
        "popular": np.array([row[:3] for row in corruptions(kg, order[plausible:plausible + share["popular"]],
                                                            scheme="popular")], dtype=np.int64).reshape(-1, 3),
    }
    negatives = np.concatenate(list(made.values()))
    kinds = np.concatenate([np.full(len(sampled), "fact")] + [np.full(len(made[k]), k) for k in KINDS])
    rows = np.concatenate([sampled, negatives])
    return TrainingSet(rows, kinds == "fact", kinds)


@dataclass
class Scorer:
    """Two classifiers over the FEATURES that vary (``columns``; a KG without a structural model has no embedding
    columns); a triple is scored by the one fitted without its half."""

    classifiers: list[HistGradientBoostingClassifier]
    columns: list[int]

    def suspicion(self, features: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """P(wrong) of each triple (odds of right and wrong taken as even)."""
        half = fold_of(rows, 2)
        features = features[:, self.columns]
        out = np.zeros(len(rows))
        with one_thread():
            for k, classifier in enumerate(self.classifiers):
                chosen = half == k
                if chosen.any():
                    out[chosen] = classifier.predict_proba(features[chosen])[:, 0]  # classes [False, True]
        return out

    def stored(self) -> dict:
        # Pickled: read back only from the project's own database, by the pinned scikit-learn that fitted it.
        return {"features": FEATURES, "columns": self.columns,
                "classifiers": [base64.b64encode(pickle.dumps(c)).decode("ascii") for c in self.classifiers]}

    @classmethod
    def from_stored(cls, data: dict) -> Scorer:
        if list(data.get("features") or []) != FEATURES:
            raise ValueError("the audit was fitted on other features; start a new audit")
        return cls([pickle.loads(base64.b64decode(c)) for c in data["classifiers"]], list(data["columns"]))  # noqa: S301


def fit(view: AuditView, kg: KnowledgeGraph, *, facts: int = FACTS) -> tuple[Scorer, dict]:
    """The scorer, and how well it tells the KG's facts from each kind of corruption out of fold (ROC AUC)."""
    data = training_set(view, kg, facts=facts)
    features = view.features(data.rows)
    columns = [i for i in range(features.shape[1]) if len(np.unique(features[~np.isnan(features[:, i]), i])) > 1]
    features = features[:, columns]
    half = fold_of(data.rows, 2)
    classifiers, out_of_fold = [], np.zeros(len(data.rows))
    with one_thread():
        for k in (0, 1):
            trained_on = half != k
            classifier = HistGradientBoostingClassifier(random_state=SEED, **TREES)
            classifier.fit(features[trained_on], data.labels[trained_on])
            classifiers.append(classifier)
            out_of_fold[~trained_on] = classifier.predict_proba(features[~trained_on])[:, 1]
    metrics = {"facts": int(data.labels.sum()), "corruptions": {k: int((data.kinds == k).sum()) for k in KINDS}, "auc": {}}
    for kind in KINDS:
        chosen = (data.kinds == "fact") | (data.kinds == kind)
        if (data.kinds == kind).any():
            metrics["auc"][kind] = round(float(roc_auc_score(data.labels[chosen], out_of_fold[chosen])), 4)
    metrics["auc"]["all"] = round(float(roc_auc_score(data.labels, out_of_fold)), 4)
    metrics["embedding"] = view.loaded is not None
    metrics["names"] = view.names is not None
    metrics["features"] = [FEATURES[i] for i in columns]
    return Scorer(classifiers, columns), metrics
