"""What the structural calibration is fitted on, and the fit.

Labelled data comes first: a dataset that ships verified negatives (CoDEx-S validation) gives half of
its labelled triples, drawn once per KG (seeded, stratified by relation and label) and recorded as
FitTriples, so the evaluation harness never draws them. Without labelled negatives, the calibration
slice the model was trained without gives the positives and type-constrained corruptions of them the
negatives (Tabacof & Costabello, 2019), recorded the same way.
"""

from __future__ import annotations

import random
from collections import Counter, defaultdict

import numpy as np
from django.conf import settings
from django.utils import timezone

from verifier.models import FitTriple, HeldOutTriple, KnowledgeGraph, StructuralModel
from verifier.structure.calibration import fit_relation_calibrator

LabelledRows = list[tuple[int, int, int, bool]]  # (head, relation, tail) row ids and the label
SEED = 0


def labelled_dataset(kg: KnowledgeGraph):
    """The dataset entry (verifier/evaluation/datasets.py) with verified negatives for this KG, if any."""
    from verifier.evaluation.datasets import DATASETS

    for dataset in DATASETS.values():
        if dataset.kg_name == kg.name and dataset.negatives:
            return dataset
    return None


def _split_half(rows: LabelledRows, seed: int) -> LabelledRows:
    groups: dict[tuple[int, bool], list] = defaultdict(list)
    for row in rows:
        groups[(row[1], row[3])].append(row)
    rng = random.Random(seed)
    chosen = []
    for key in sorted(groups):
        members = sorted(groups[key])
        rng.shuffle(members)
        chosen += members[: len(members) // 2]
    return chosen


def _record(kg: KnowledgeGraph, rows: LabelledRows, purpose: str) -> None:
    FitTriple.objects.bulk_create([FitTriple(kg=kg, purpose=purpose, head_id=h, relation_id=r, tail_id=t, label=y)
                                   for h, r, t, y in rows], ignore_conflicts=True, batch_size=5000)


def structural_fit_set(model: StructuralModel) -> tuple[LabelledRows, str]:
    """(labelled row triples, where they come from) for calibrating ``model``."""
    kg = model.kg
    purpose = FitTriple.Purpose.STRUCTURAL_CALIBRATION
    dataset = labelled_dataset(kg)
    if dataset is not None:
        existing = list(FitTriple.objects.filter(kg=kg, purpose=purpose).values_list("head_id", "relation_id", "tail_id", "label"))
        if not existing:
            from verifier.evaluation.datasets import kg_triple_set, read_rows

            in_kg = kg_triple_set(kg)
            rows = {(r.head_id, r.relation_id, r.tail_id): True for r in read_rows(kg, settings.KGV_DATA_DIR / dataset.positives)}
            for r in read_rows(kg, settings.KGV_DATA_DIR / dataset.negatives):
                rows.setdefault((r.head_id, r.relation_id, r.tail_id), False)
            existing = _split_half([(*k, y) for k, y in rows.items() if k not in in_kg], SEED)
            _record(kg, existing, purpose)
        return [tuple(r) for r in existing], f"half of the labelled {dataset.positives} / {dataset.negatives}"
    positives = [(h, r, t, True) for h, r, t in HeldOutTriple.objects.filter(
        model=model, reason=HeldOutTriple.Reason.CALIBRATION).values_list("head_id", "relation_id", "tail_id")]
    negatives = corruptions(kg, [p[:3] for p in positives])
    rows = positives + negatives
    _record(kg, negatives, purpose)
    return rows, "the held-out calibration slice and type-constrained corruptions of it"


def corruptions(kg: KnowledgeGraph, positives: list[tuple[int, int, int]]) -> LabelledRows:
    """One type-constrained negative per positive (the evaluation harness's sampler and type scheme)."""
    from verifier.evaluation.datasets import kg_triple_set, type_keys
    from verifier.evaluation.sampling import NegativeSampler
    from verifier.models import Entity, VerificationTask

    in_kg = kg_triple_set(kg)
    keys, _ = type_keys(kg, "auto", in_kg)
    external = dict(Entity.objects.filter(kg=kg).values_list("id", "external_id"))
    queued = set(VerificationTask.objects.filter(kg=kg).values_list("head_id", "relation_id", "tail_id"))
    sampler = NegativeSampler(keys, in_kg | queued, sort_key=external.__getitem__)
    rng = random.Random(SEED)
    negatives = []
    for triple in positives:
        negative = sampler.corrupt(triple, rng)
        if negative is not None:
            negatives.append((*negative.triple, False))
    return negatives


def calibrate_structural(model: StructuralModel) -> dict:
    """Fit the per-relation calibration of ``model`` and store it with its cross-validated error."""
    from verifier.structure.scoring import FEATURES, LoadedModel

    rows, source = structural_fit_set(model)
    if not rows or len({y for *_, y in rows}) < 2:
        raise ValueError(f"no calibration data for {model.kg.name}: need held-out positives and negatives")
    triples = np.array([r[:3] for r in rows], dtype=np.int64)
    labels = np.array([r[3] for r in rows], dtype=bool)
    relations = [str(r) for r in triples[:, 1]]
    network = LoadedModel(model)
    features = network.features(triples)
    calibrator = fit_relation_calibrator(features, relations, labels, feature_names=FEATURES)
    metrics = {"source": source, "n": len(rows), "positives": int(labels.sum()), "c": calibrator.c}
    metrics.update(_cross_validated_metrics(features, relations, labels))
    rules = _calibrate_rules(model, triples, relations, labels)
    model.calibration = {**(model.calibration or {}), "structural": calibrator.to_dict(), "fitted_at": timezone.now().isoformat()}
    if rules is not None:
        model.calibration["rules"], metrics["rules"] = rules
    model.metrics = {**(model.metrics or {}), "calibration": metrics}
    model.save(update_fields=["calibration", "metrics"])
    return metrics


def _calibrate_rules(model: StructuralModel, triples: np.ndarray, relations: list[str], labels: np.ndarray):
    """The same labelled triples' rule evidence (verifier/structure/rule_evidence.py) mapped to a probability:
    (calibrator as a dict, its metrics), or None when the KG has no mined rules."""
    from verifier.models import MinedRule
    from verifier.structure.rule_evidence import RULE_FEATURES, rule_evidence, rule_features

    if not MinedRule.objects.filter(kg=model.kg, kg_version=model.kg_version).exists():
        return None
    features = np.array([rule_features(rule_evidence(model.kg, *map(int, t), limit=1)) for t in triples])
    calibrator = fit_relation_calibrator(features, relations, labels, feature_names=RULE_FEATURES)
    return calibrator.to_dict(), {"n": len(labels), **_cross_validated_metrics(features, relations, labels)}


def _cross_validated_metrics(features: np.ndarray, relations: list[str], labels: np.ndarray) -> dict:
    """Out-of-fold accuracy (as drawn, and relation-matched: each relation weighing min(#true, #false)
    pairs, as a relation-matched test set would) and ECE; empty when there is too little to cross-validate."""
    from verifier.structure.calibration import matched_weights
    from verifier.structure.training import calibration_error

    out_of_fold = _cross_validated(features, relations, labels)
    if out_of_fold is None:
        return {}
    right = (out_of_fold >= 0.5) == labels
    matched = matched_weights(relations, labels.astype(int))
    return {"cross_validated_accuracy": round(float(right.mean()), 4),
            "cross_validated_matched_accuracy": round(float((matched * right).sum() / matched.sum()), 4),
            "cross_validated_ece": round(calibration_error(out_of_fold, labels), 4)}


def _cross_validated(features: np.ndarray, relations: list[str], labels: np.ndarray, folds: int = 5) -> np.ndarray | None:
    """Out-of-fold calibrated probabilities: each triple predicted by a calibration fitted without it (None
    when there are too few of either label to cross-validate)."""
    from sklearn.model_selection import StratifiedKFold

    folds = min(folds, int(labels.sum()), int((~labels).sum()))
    if folds < 2:
        return None
    out = np.zeros(len(labels))
    splitter = StratifiedKFold(n_splits=folds, shuffle=True, random_state=SEED)
    strata = [f"{r}:{int(y)}" for r, y in zip(relations, labels, strict=True)]
    sizes = Counter(strata)
    strata = [s if sizes[s] >= folds else str(int(y)) for s, y in zip(strata, labels, strict=True)]
    for fit, held in splitter.split(features, strata):
        calibrator = fit_relation_calibrator(features[fit], [relations[i] for i in fit], labels[fit],
                                             feature_names=[str(i) for i in range(features.shape[1])])
        out[held] = [calibrator.probability(features[i], relations[i]) for i in held]
    return out
