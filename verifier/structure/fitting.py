"""What the structural calibration is fitted on, and the fit.

Labelled data comes first: a dataset that ships verified negatives (CoDEx-S validation) gives all of its
labelled triples, and type-constrained corruptions of a quarter of its positives beside them — verified
negatives are plausible ones, which the networks rank about as high as true triples, so a calibration fitted
on them alone would give a low rank little weight and call an easy corruption true. A dataset with validation
positives only (FB15k-237) gives those and a type-constrained corruption of each as the negatives (Tabacof &
Costabello, 2019).

A KG without labels is calibrated on its own triples: a sample of the facts it states (each scored by the
network that never learnt it, so they score as unseen true triples do) against corruptions of the same facts,
half with an entity of the same type in place of the head or the tail, half with a value the relation takes
for entities of the head's type (the popular wrong answers a KG's errors tend to be). A KG's facts include its
own errors; at the rates extraction leaves (a few percent) they blur the fit a little and do not bias it.

The calibration is cross-fitted: the triples are split into folds (seeded, stratified by relation and
label), and beside the calibration fitted on all of them one is fitted without each fold. Each triple is
recorded as a FitTriple with its fold, and the plausibility scores it with the calibration that left its
fold out, so an evaluation may draw it: its probability comes from a fit that never saw it (the
cross-validated figures the fit reports are exactly those probabilities). Every other triple gets the
calibration fitted on all.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from verifier.benchmarks.datasets import kg_triple_set, negative_sampler, read_rows, validation_dataset
from verifier.models import FitTriple, KnowledgeGraph, MinedRule, StructuralModel, VerificationTask
from verifier.structure.calibration import (
    BoostedCalibrator,
    CrossFitted,
    calibration_error,
    cross_fit,
    fit_best,
    fit_relation_calibrator,
    fold_assignment,
    matched_weights,
)
from verifier.structure.dataset import kg_triples
from verifier.structure.reference import reference_ids
from verifier.structure.rule_evidence import RULE_FEATURES
from verifier.structure.rules import mine_rules
from verifier.structure.scoring import EMBEDDING_FEATURES, FEATURES, RULES, LoadedModel

LabelledRows = list[tuple[int, int, int, bool]]  # (head, relation, tail) row ids and the label
SEED = 0
# Beside verified negatives, corruptions of this share of the positives: verified negatives are all plausible, so
# without some easy errors beside them the fit would learn to ignore a low rank and call an easy corruption true.
CORRUPTED_SHARE = 0.25
# A KG without labels: how many of its facts the calibration samples (spread over its relations).
FACTS_SAMPLED = 4000


def queued_triples(kg: KnowledgeGraph) -> set[tuple[int, int, int]]:
    """The KG's flagged triples: never drawn as a corruption (a curator's flagged triple may well be true)."""
    return set(VerificationTask.objects.filter(kg=kg).values_list("head_id", "relation_id", "tail_id"))


def labelled_dataset(kg: KnowledgeGraph):
    """The dataset entry (verifier/benchmarks/datasets.py) of this KG's validation split, if its files are
    present. Never a test split: those only benchmark."""
    dataset = validation_dataset(kg.name)
    if dataset is None or not all((settings.KGV_DATA_DIR / path).is_file() for path in dataset.files()):
        return None
    return dataset


def _triples_in(kg: KnowledgeGraph, path: str) -> set[tuple[int, int, int]]:
    """The (head, relation, tail) row ids of a dataset file's triples."""
    return {(r.head_id, r.relation_id, r.tail_id) for r in read_rows(kg, settings.KGV_DATA_DIR / path)}


def labelled_triples(kg: KnowledgeGraph) -> set[tuple[int, int, int]]:
    """The triples of the KG's labelled validation split (positives and verified negatives; empty without
    one). A corruption made to stand for a false triple must not be one of them: a true one would be
    labelled false."""
    dataset = labelled_dataset(kg)
    if dataset is None:
        return set()
    return _triples_in(kg, dataset.positives) | _verified_negatives(kg, dataset)


@dataclass
class FitSet:
    """The labelled triples a structural calibration is fitted on, one row per triple, and where they come
    from; a negative is either verified by hand (``verified``) or a type-constrained corruption."""

    rows: LabelledRows
    source: str
    verified: set[tuple[int, int, int]] = field(default_factory=set)
    made_by: dict[tuple[int, int, int], str] = field(default_factory=dict)  # a corruption → how it was made, if known

    @cached_property
    def triples(self) -> np.ndarray:
        return np.array([r[:3] for r in self.rows], dtype=np.int64).reshape(-1, 3)

    @cached_property
    def labels(self) -> np.ndarray:
        return np.array([r[3] for r in self.rows], dtype=bool)

    @cached_property
    def relations(self) -> list[str]:
        return [str(r[1]) for r in self.rows]

    @cached_property
    def kinds(self) -> np.ndarray:
        """Each row's kind: "true", "verified", or how its corruption was made ("corruptions" when not told)."""
        return np.array(["true" if y else "verified" if (h, r, t) in self.verified else self.made_by.get((h, r, t), "corruptions")
                         for h, r, t, y in self.rows])


def structural_fit_set(model: StructuralModel) -> FitSet:
    """The labelled triples for calibrating ``model`` (see the module docstring)."""
    kg = model.kg
    dataset = labelled_dataset(kg)
    verified = _verified_negatives(kg, dataset)
    rows, source, made_by = _labelled_rows(model, dataset, verified)
    unique: dict[tuple[int, int, int], tuple[int, int, int, bool]] = {}
    for row in rows:  # one fold per triple: two corruptions may coincide
        unique.setdefault(row[:3], row)
    return FitSet(list(unique.values()), source, verified, made_by)


def _verified_negatives(kg: KnowledgeGraph, dataset) -> set[tuple[int, int, int]]:
    """The row triples of the KG's dataset's verified negatives (empty when it ships none)."""
    if dataset is None or not dataset.negatives:
        return set()
    return _triples_in(kg, dataset.negatives)


def _labelled_rows(model: StructuralModel, dataset, verified: set[tuple[int, int, int]]) -> tuple[LabelledRows, str, dict]:
    kg = model.kg
    if dataset is not None:
        rows = dict.fromkeys(_triples_in(kg, dataset.positives), True)
        if not dataset.negatives:
            positives = sorted(rows)
            return [(*p, True) for p in positives] + corruptions(kg, positives, also_true=set(rows)), \
                f"{dataset.positives} and type-constrained corruptions of it", {}
        for triple in verified:
            rows.setdefault(triple, False)
        labelled = sorted((*k, y) for k, y in rows.items())
        positives = [row[:3] for row in labelled if row[3]]
        corrupted = random.Random(SEED).sample(positives, round(CORRUPTED_SHARE * len(positives)))
        return labelled + corruptions(kg, sorted(corrupted), also_true=set(rows)), \
            f"the labelled {dataset.positives} / {dataset.negatives} and type-constrained corruptions of a quarter of its positives", {}
    positives = sampled_facts(kg, FACTS_SAMPLED)
    half = len(positives) // 2
    # A small dense KG may have entities that each play roles of their own: its types then corrupt few facts, and
    # the relation's roles (any entity the KG holds in that role) corrupt nearly all; the scheme corrupting more wins.
    by_type, by_role = (corruptions(kg, positives[:half], scheme=scheme) for scheme in ("auto", "role"))
    same_kind = by_role if len(by_role) > len(by_type) else by_type
    popular = corruptions(kg, positives[half:], scheme="popular")
    kind = "entities in the same role" if same_kind is by_role else "same-type entities"
    made_by = {row[:3]: kind for row in same_kind} | {row[:3]: "popular values" for row in popular}
    return [(*p, True) for p in positives] + same_kind + popular, \
        f"facts the KG states and corruptions of them ({kind}, values popular for the type)", made_by


def sampled_facts(kg: KnowledgeGraph, n: int, *, seed: int = SEED) -> list[tuple[int, int, int]]:
    """Up to ``n`` of the KG's triples, each relation giving its share (at least one), in a seeded order."""
    triples = kg_triples(kg)
    if len(triples) <= n:
        chosen = np.arange(len(triples))
    else:
        rng = np.random.default_rng(seed)
        order = rng.permutation(len(triples))
        first = np.unique(triples[order, 1], return_index=True)[1]  # one of each relation
        rest = np.setdiff1d(order, order[first], assume_unique=True)[:max(0, n - len(first))]
        chosen = np.concatenate([order[first], rng.permutation(rest)])
    order = random.Random(seed)
    picked = [tuple(map(int, row)) for row in triples[np.sort(chosen)]]
    order.shuffle(picked)
    return picked


def calibration_triples(kg: KnowledgeGraph) -> LabelledRows:
    """The labelled triples the KG's current structural calibration was fitted on (``_record``): each one's
    structural probability is given by the fit that left its fold out."""
    return [tuple(row) for row in FitTriple.objects.filter(kg=kg, purpose=FitTriple.Purpose.STRUCTURAL_CALIBRATION)
            .order_by("pk").values_list("head_id", "relation_id", "tail_id", "label")]


def _record(kg: KnowledgeGraph, rows: LabelledRows, folds: np.ndarray | None) -> None:
    """The KG's structural fit triples become exactly ``rows``, each with its fold."""
    purpose = FitTriple.Purpose.STRUCTURAL_CALIBRATION
    FitTriple.objects.filter(kg=kg, purpose=purpose).delete()
    FitTriple.objects.bulk_create([
        FitTriple(kg=kg, purpose=purpose, head_id=h, relation_id=r, tail_id=t, label=y,
                  fold=None if folds is None else int(folds[i]))
        for i, (h, r, t, y) in enumerate(rows)], ignore_conflicts=True, batch_size=5000)


def corruptions(kg: KnowledgeGraph, positives: list[tuple[int, int, int]], *, also_true: set[tuple[int, int, int]] = frozenset(),
                limit: int | None = None, scheme: str = "auto") -> LabelledRows:
    """One type-constrained negative per positive (the evaluation harness's sampler, under its type ``scheme``),
    never a KG triple, a queued one or one of ``also_true``; a positive with no same-type replacement has none.
    With ``limit``, the positives are corrupted in order until that many negatives are made."""
    in_kg = kg_triple_set(kg)
    sampler, _ = negative_sampler(kg, scheme, in_kg, in_kg | queued_triples(kg) | set(also_true))
    rng = random.Random(SEED)
    negatives = []
    for triple in positives:
        if limit is not None and len(negatives) >= limit:
            break
        negative = sampler.corrupt(triple, rng)
        if negative is not None:
            negatives.append((*negative.triple, False))
    return negatives


def calibrate_structural(model: StructuralModel) -> dict:
    """Fit the per-relation calibration of ``model`` and store it with its cross-validated error, the KG's rules
    mined again first."""
    mine_rules(model.kg)
    fit_set = structural_fit_set(model)
    rows, labels, relations = fit_set.rows, fit_set.labels, fit_set.relations
    if not rows or len(set(labels.tolist())) < 2:
        raise ValueError(f"no calibration data for {model.kg.name}: it needs true triples and corruptions of them")
    folds = fold_assignment(relations, labels)
    references = reference_ids(model.kg)
    features = LoadedModel(model, references=references).features(fit_set.triples)
    structural, metrics = _cross_fitted(features, relations, labels, FEATURES, folds, best=True, kinds=fit_set.kinds)
    metrics = {"source": fit_set.source, "n": len(rows), "positives": int(labels.sum()), "kind": _kind(structural),
               "folds": 0 if folds is None else int(folds.max()) + 1, **metrics}
    calibration = {key: value for key, value in (model.calibration or {}).items()
                   if not key.startswith(("structural", "rules", "embedding"))}
    calibration.update(structural.stored("structural"))
    calibration["references"] = references
    # The embedding classifier alone (the network's scores, Platt-scaled per relation, the CoDEx protocol's baseline):
    # what the text and the rules add over it, measured by the `embedding` evaluation mode on the same triples.
    embedding, metrics["embedding"] = _cross_fitted(features[:, :len(EMBEDDING_FEATURES)], relations, labels,
                                                    EMBEDDING_FEATURES, folds)
    calibration.update(embedding.stored("embedding"))
    rules = _calibrate_rules(model, features[:, RULES], relations, labels, folds)
    if rules is not None:
        calibration.update(rules[0].stored("rules"))
        metrics["rules"] = rules[1]
    model.calibration, model.calibrated_at = calibration, timezone.now()
    model.metrics = {**(model.metrics or {}), "calibration": metrics}
    with transaction.atomic():
        _record(model.kg, rows, folds)
        model.save(update_fields=["calibration", "calibrated_at", "metrics"])
    return metrics


def _calibrate_rules(model: StructuralModel, features: np.ndarray, relations: list[str], labels: np.ndarray,
                     folds: np.ndarray | None) -> tuple[CrossFitted, dict] | None:
    """The same labelled triples' rule evidence (``features``: their RULE_FEATURES, as the plausibility's
    features carry them) mapped to a probability, cross-fitted on the same folds: (the calibration, its
    metrics), or None when the KG has no mined rules."""
    if not MinedRule.objects.filter(kg=model.kg, kg_version=model.kg_version).exists():
        return None
    calibration, metrics = _cross_fitted(features, relations, labels, RULE_FEATURES, folds)
    return calibration, {"n": len(labels), **metrics}


def _cross_fitted(features: np.ndarray, relations: list[str], labels: np.ndarray, names: list[str],
                  folds: np.ndarray | None, *, best: bool = False, kinds: np.ndarray | None = None) -> tuple[CrossFitted, dict]:
    """The calibration on all triples and per fold, with the out-of-fold figures (none without folds);
    ``best``: per-relation Platt scaling or boosted trees, whichever predicts better out of fold; ``kinds``:
    each triple's kind ("true", "verified", "corruptions"), for the figures against each kind of negative."""
    if folds is None:
        return CrossFitted(fit_relation_calibrator(features, relations, labels, feature_names=names)), {}
    if best:
        calibration, out_of_fold = fit_best(features, relations, labels, feature_names=names, folds=folds)
        return calibration, {**out_of_fold_metrics(out_of_fold, relations, labels),
                             **_against_each_kind(out_of_fold, relations, labels, kinds)}
    calibrators, out_of_fold = cross_fit(features, relations, labels, feature_names=names, folds=folds)
    full = fit_relation_calibrator(features, relations, labels, feature_names=names)
    return CrossFitted(full, calibrators), out_of_fold_metrics(out_of_fold, relations, labels)


def _kind(calibration: CrossFitted) -> str:
    return "boosted trees" if isinstance(calibration.full, BoostedCalibrator) else "per-relation Platt scaling"


def out_of_fold_metrics(probabilities: np.ndarray, relations: list[str], labels: np.ndarray) -> dict:
    """Accuracy of out-of-fold probabilities (as drawn, and relation-matched: each relation weighing
    min(#true, #false) pairs, as a relation-matched test set would) and their ECE."""

    if not np.isfinite(probabilities).all():
        raise ValueError("the calibration gave probabilities that are not numbers; its features need checking")
    right = (probabilities >= 0.5) == labels
    matched = matched_weights(relations, labels.astype(int))
    return {"cross_validated_accuracy": round(float(right.mean()), 4),
            "cross_validated_matched_accuracy": round(float((matched * right).sum() / matched.sum()), 4),
            "cross_validated_ece": round(calibration_error(probabilities, labels), 4)}


def _against_each_kind(probabilities: np.ndarray, relations: list[str], labels: np.ndarray,
                       kinds: np.ndarray | None) -> dict:
    """{"against": {kind: out-of-fold figures of the true triples with that kind of negative}} when the negatives
    are of two kinds or more (verified ones and corruptions; same-type entities and popular values), else {}."""
    present = [] if kinds is None else sorted(set(kinds.tolist()) - {"true"})
    if len(present) < 2:
        return {}
    against = {}
    for kind in present:
        chosen = np.flatnonzero((kinds == "true") | (kinds == kind))
        against[kind] = out_of_fold_metrics(probabilities[chosen], [relations[i] for i in chosen], labels[chosen])
    return {"against": against}


def calibration_line(calibration: dict) -> str:
    """A calibration's metrics in one line (train_kge, references)."""
    line = f"calibrated on {calibration.get('n')} labelled triples ({calibration.get('source')})"
    if calibration.get("kind"):
        line += f" by {calibration['kind']}"
    if "cross_validated_ece" in calibration:
        line += (f", cross-validated accuracy {calibration['cross_validated_accuracy']:.1%} (relation-matched "
                 f"{calibration['cross_validated_matched_accuracy']:.1%}), ECE {calibration['cross_validated_ece']:.3f}")
    embedding = calibration.get("embedding") or {}
    alone = (f"; the embedding classifier alone relation-matched {embedding['cross_validated_matched_accuracy']:.1%}"
             if "cross_validated_matched_accuracy" in embedding else "")
    return line + against_each_kind_line(calibration) + alone


def against_each_kind_line(metrics: dict) -> str:
    """The out-of-fold figures against each kind of negative, as a command prints them ("" with one kind)."""
    return "".join(f"; against the {'verified negatives' if kind == 'verified' else kind} relation-matched "
                   f"{figures['cross_validated_matched_accuracy']:.1%}, ECE {figures['cross_validated_ece']:.3f}"
                   for kind, figures in (metrics.get("against") or {}).items())


def cross_validated_metrics(features: np.ndarray, fit_set: FitSet) -> dict:
    """The out-of-fold figures the structural calibration would get on these FEATURES of ``fit_set``'s
    triples — the better of per-relation Platt scaling and boosted trees, as ``calibrate_structural`` chooses —
    and which one it is (empty with too few labels)."""
    relations, labels = fit_set.relations, fit_set.labels
    folds = fold_assignment(relations, labels)
    if folds is None:
        return {}
    calibration, metrics = _cross_fitted(features, relations, labels, FEATURES, folds, best=True, kinds=fit_set.kinds)
    return {"kind": _kind(calibration), **metrics}
