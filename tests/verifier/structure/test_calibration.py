"""Calibration of scores into probabilities, on hand-made score sets, and the calibration error."""

import warnings

import numpy as np
import pytest

from verifier.structure.calibration import (
    BoostedCalibrator,
    CrossFitted,
    RelationCalibrator,
    expected_calibration_error,
    fit_best,
    fit_relation_calibrator,
    fold_assignment,
    reliability_bins,
)


def _scores(rng, n, true_mean, false_mean):
    x_true = rng.normal(true_mean, 1.0, size=(n, 2))
    x_false = rng.normal(false_mean, 1.0, size=(n, 2))
    return np.vstack([x_true, x_false]), np.array([True] * n + [False] * n)


def test_a_relation_whose_scores_sit_elsewhere_gets_its_own_scaling():
    rng = np.random.default_rng(0)
    # Relation "a": true triples score around 2, false around -2. Relation "b": both shifted down by 4,
    # so a shared threshold would call every "b" triple false.
    xa, ya = _scores(rng, 200, 2.0, -2.0)
    xb, yb = _scores(rng, 200, -2.0, -6.0)
    x = np.vstack([xa, xb])
    labels = np.concatenate([ya, yb])
    relations = ["a"] * len(ya) + ["b"] * len(yb)
    calibrator = fit_relation_calibrator(x, relations, labels, feature_names=["s1", "s2"], c=1.0)
    accuracy_b = np.mean([(calibrator.probability(row, "b") >= 0.5) == y for row, y in zip(xb, yb, strict=True)])
    assert accuracy_b > 0.9
    assert calibrator.probability([-2.0, -2.0], "b") > 0.8  # a true-looking "b" score
    assert calibrator.probability([-2.0, -2.0], "a") < 0.2  # the same score is a false-looking "a" score


def test_an_unseen_relation_falls_back_on_the_shared_fit_and_the_fit_survives_serialisation():
    rng = np.random.default_rng(1)
    x, labels = _scores(rng, 150, 1.5, -1.5)
    calibrator = fit_relation_calibrator(x, ["a"] * len(labels), labels, feature_names=["s1", "s2"])
    restored = type(calibrator).from_dict(calibrator.to_dict())
    assert restored.probability([3.0, 3.0], "unseen") > 0.9
    assert restored.probability([-3.0, -3.0], "unseen") < 0.1
    assert restored.probability([0.5, 0.1], "a") == pytest.approx(calibrator.probability([0.5, 0.1], "a"))


def test_each_relation_counts_as_a_balanced_prior_whatever_its_label_mix():
    rng = np.random.default_rng(2)
    # 90% of relation "a"'s examples are false, but the scores carry no information: P(true) must stay near 0.5.
    x = rng.normal(0.0, 1.0, size=(400, 2))
    labels = np.array([True] * 40 + [False] * 360)
    calibrator = fit_relation_calibrator(x, ["a"] * 400, labels, feature_names=["s1", "s2"])
    assert calibrator.probability([0.0, 0.0], "a") == pytest.approx(0.5, abs=0.1)


def test_a_feature_constant_up_to_float_noise_neither_divides_by_zero_nor_weighs():
    # A KG without text gives every triple the same text features; 0.1 repeated has a spread of 1e-17.
    rng = np.random.default_rng(3)
    x = np.column_stack([np.r_[rng.normal(1, 1, 100), rng.normal(-1, 1, 100)], np.full(200, 0.1)])
    calibrator = fit_relation_calibrator(x, ["a"] * 200, [True] * 100 + [False] * 100, feature_names=["s", "text"])
    restored = RelationCalibrator.from_dict(calibrator.to_dict())
    assert restored.scale[1] == 1.0
    assert restored.probability([2.0, 0.1], "a") > 0.8
    assert restored.probability([2.0, 0.1], "a") == pytest.approx(restored.probability([2.0, 0.7], "a"), abs=1e-3)


def test_calibration_needs_both_labels():
    with pytest.raises(ValueError, match="both true and false"):
        fit_relation_calibrator(np.zeros((4, 2)), ["a"] * 4, [True] * 4, feature_names=["s1", "s2"])


def test_expected_calibration_error_by_hand():
    # Bin 0.9-1.0: confidence 0.95 ×4, 3 right (0.75) → |0.75 − 0.95| = 0.2, weight 4/8.
    # Bin 0.6-0.7: confidence 0.65 ×4, 2 right (0.5) → 0.15, weight 4/8.
    confidence = [0.95] * 4 + [0.65] * 4
    right = [True, True, True, False, True, True, False, False]
    assert expected_calibration_error(confidence, right) == pytest.approx(0.5 * 0.2 + 0.5 * 0.15)
    bins = reliability_bins(confidence, right)
    assert [(b["low"], b["n"], b["accuracy"]) for b in bins] == [(0.6, 4, 0.5), (0.9, 4, 0.75)]
    assert expected_calibration_error([0.8] * 10, [True] * 8 + [False] * 2) == pytest.approx(0.0)


def test_a_relation_weighs_as_many_pairs_as_it_can_form():
    from verifier.structure.calibration import matched_weights

    relations = ["a"] * 4 + ["b"] * 4 + ["c"] * 2
    labels = np.array([1, 1, 1, 0, 1, 0, 0, 0, 1, 1])
    weights = matched_weights(relations, labels)
    # "a" forms one pair (3 true, 1 false), "b" one pair (1 true, 3 false), "c" none (no false example).
    per_group = {}
    for r, y, w in zip(relations, labels.tolist(), weights, strict=True):
        per_group[(r, y)] = per_group.get((r, y), 0.0) + w
    assert per_group[("a", 1)] == pytest.approx(per_group[("a", 0)]) == pytest.approx(per_group[("b", 1)])
    assert per_group[("c", 1)] == 0.0
    with pytest.raises(ValueError, match="same relation"):
        matched_weights(["a", "b"], np.array([1, 0]))


def _interacting(rng, n):
    """Two features that decide only together: a triple is true when its rule support holds (s2 > 0) or,
    without support, when the embedding is sure (s1 > 1.5); no linear threshold separates that."""
    x = np.column_stack([rng.uniform(-3, 3, n), rng.uniform(-1, 1, n)])
    return x, (x[:, 1] > 0) | (x[:, 0] > 1.5)


@pytest.mark.slow
def test_boosted_trees_are_kept_where_features_interact_and_survive_serialisation():
    rng = np.random.default_rng(2)
    x, labels = _interacting(rng, 1200)
    relations = ["a"] * len(labels)
    folds = np.arange(len(labels)) % 5
    calibration, out_of_fold = fit_best(x, relations, labels, feature_names=["s1", "s2"], folds=folds)
    assert isinstance(calibration.full, BoostedCalibrator)
    assert len(calibration.folds) == 5
    assert np.mean((out_of_fold >= 0.5) == labels) > 0.95
    restored = CrossFitted.from_stored(calibration.stored("structural"), "structural")
    assert restored.probability([2.5, -0.8], "a") > 0.9  # sure embedding, no support
    assert restored.probability([-2.5, -0.8], "a") < 0.1  # neither
    assert restored.probability([-2.5, 0.8], "a") > 0.9  # support alone
    assert restored.probability([0.3, 0.2], "a", fold=3) == pytest.approx(calibration.folds[3].probability([0.3, 0.2], "a"))
    assert 0.0 <= restored.probability([0.3, 0.2], "never seen") <= 1.0


def test_a_few_linear_triples_keep_the_platt_scaling():
    rng = np.random.default_rng(3)
    x, labels = _scores(rng, 30, 1.0, -1.0)
    folds = np.arange(len(labels)) % 5
    calibration, _ = fit_best(x, ["a"] * len(labels), labels, feature_names=["s1", "s2"], folds=folds)
    assert isinstance(calibration.full, RelationCalibrator)


@pytest.mark.slow
def test_the_compiled_trees_give_scikit_learns_probabilities():
    """The tools score with the trees compiled by Treelite: the same probabilities as scikit-learn's own
    predict_proba, for known relations, a relation the fit never saw and a missing feature value."""
    rng = np.random.default_rng(4)
    x, labels = _interacting(rng, 1500)
    relations = [f"r{i % 7}" for i in range(len(labels))]
    folds = np.arange(len(labels)) % 5
    calibration, _ = fit_best(x, relations, labels, feature_names=["s1", "s2"], folds=folds)
    trees = calibration.full
    assert isinstance(trees, BoostedCalibrator)
    queries = rng.normal(0.0, 1.5, size=(300, 2))
    queries[::10, 1] = np.nan
    asked = [f"r{i % 9}" for i in range(len(queries))]  # r7 and r8: never seen
    codes = np.array([trees.relations.get(r, np.nan) for r in asked], dtype=float)
    expected = trees.trees.predict_proba(np.column_stack([queries, codes]))[:, 1]
    assert np.allclose(trees.probabilities(queries, asked), expected, atol=1e-9)
    assert trees.probability(queries[3], asked[3]) == pytest.approx(expected[3], abs=1e-9)
    assert len(np.unique(expected)) >= 10 and expected.min() < 0.1 < 0.9 < expected.max()  # many leaves, both verdicts


def test_folds_spread_a_label_whose_small_relations_together_are_still_too_few():
    """Kinships' calibration: the relations with fewer true triples than folds, pooled, were still fewer than the
    folds, and scikit-learn warned on the user's console. They join the label's largest stratum instead."""
    relations = ["parent"] * 20 + ["uncle"] * 3
    labels = np.array([True] * 10 + [False] * 10 + [True] * 3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        folds = fold_assignment(relations, labels)
    assert sorted(set(folds.tolist())) == [0, 1, 2, 3, 4]
    assert all(labels[folds == k].any() and (~labels[folds == k]).any() for k in range(5))
