"""Metrics against hand-computed cases."""

import math

import pytest

from verifier.evaluation.metrics import Outcome, classification, compute, confusion, entropy, mcnemar_p, per_relation, reliability


def outcome(triple, expected, verdict, *, relation="r", failed=False, **kwargs):
    return Outcome(triple=triple, relation=relation, expected=expected, verdict=verdict, failed=failed, **kwargs)


# Six true triples: 3 Correct, 1 Incorrect, 1 unparsable, 1 abstention. Four false triples: 1 Correct, 2 Incorrect, 1 failed run.
MIXED = [
    outcome(1, True, "correct"), outcome(2, True, "correct"), outcome(3, True, "correct"),
    outcome(4, True, "incorrect"), outcome(5, True, None), outcome(6, True, "not_enough_evidence"),
    outcome(7, False, "correct"), outcome(8, False, "incorrect"), outcome(9, False, "incorrect"),
    outcome(10, False, None, failed=True),
]


def test_confusion_matrix_by_gold_label_and_answer_class():
    assert confusion(MIXED) == {
        "true": {"correct": 3, "incorrect": 1, "not_enough_evidence": 1, "no_answer": 1},
        "false": {"correct": 1, "incorrect": 2, "not_enough_evidence": 0, "no_answer": 1},
    }


def test_accuracy_precision_recall_f1_count_refusals_and_unparsable_answers_as_wrong():
    figures = classification(MIXED)
    assert figures["n"] == 10 and figures["positives"] == 6 and figures["negatives"] == 4
    assert figures["accuracy"] == pytest.approx(5 / 10)  # TP 3 + TN 2
    assert figures["precision"] == pytest.approx(3 / 4)  # TP 3 of 4 predicted Correct
    assert figures["recall"] == pytest.approx(3 / 6)  # TP 3 of 6 true triples
    assert figures["f1"] == pytest.approx(2 * 0.75 * 0.5 / 1.25)  # 0.6
    assert figures["answer_rate"] == pytest.approx(7 / 10)  # 3 + 1 + 1 + 2 answered Correct/Incorrect
    assert figures["conditional_accuracy"] == pytest.approx(5 / 7)
    assert (figures["abstained"], figures["no_answer"], figures["failed_runs"]) == (1, 2, 1)


def test_no_positive_prediction_gives_zero_precision_and_f1_and_nothing_answered_gives_no_conditional_accuracy():
    figures = classification([outcome(1, True, "not_enough_evidence"), outcome(2, False, None)])
    assert figures["accuracy"] == 0 and figures["precision"] == 0 and figures["recall"] == 0 and figures["f1"] == 0
    assert figures["answer_rate"] == 0 and figures["conditional_accuracy"] is None


def test_entropy_in_bits():
    assert entropy([4]) == 0
    assert entropy([2, 2]) == pytest.approx(1.0)
    assert entropy([1, 1, 1, 1]) == pytest.approx(2.0)
    assert entropy([2, 1]) == pytest.approx(-(2 / 3) * math.log2(2 / 3) - (1 / 3) * math.log2(1 / 3))


def test_reliability_is_one_minus_entropy_over_log2_of_the_four_answer_classes_averaged_over_triples():
    runs = (
        [outcome("a", True, "correct")] * 4  # all alike: H = 0 → 1
        + [outcome("b", True, v) for v in ("correct", "incorrect", "correct", "incorrect")]  # H = 1 bit → 1 − 1/2
        + [outcome("c", False, v) for v in ("correct", "incorrect", "not_enough_evidence", None)]  # H = 2 bits → 0
    )
    figures = reliability(runs)
    assert figures["mean"] == pytest.approx((1 + 0.5 + 0) / 3)
    assert figures["triples"] == 3 and figures["fully_consistent"] == 1


def test_reliability_with_three_repeats_and_none_without_repeats():
    runs = [outcome("a", True, v) for v in ("correct", "correct", "incorrect")]
    h = -(2 / 3) * math.log2(2 / 3) - (1 / 3) * math.log2(1 / 3)
    assert reliability(runs)["mean"] == pytest.approx(1 - h / 2)  # K = 4 classes, log2 K = 2 → ≈ 0.5409
    assert reliability([outcome("a", True, "correct"), outcome("b", False, "correct")]) is None


def test_accuracy_per_relation_most_frequent_first():
    runs = [outcome(1, True, "correct", relation="born in"), outcome(2, False, "correct", relation="born in"),
            outcome(3, False, "incorrect", relation="born in"), outcome(4, True, None, relation="citizen of")]
    assert per_relation(runs) == [
        {"relation": "born in", "n": 3, "right": 2, "accuracy": pytest.approx(2 / 3)},
        {"relation": "citizen of", "n": 1, "right": 0, "accuracy": 0.0},
    ]


def test_efficiency_averages_tool_shares_and_leak_count():
    runs = [
        outcome(1, True, "correct", turns=4, tool_calls={"KG_Path": 2, "KG_Neighbor": 1}, prompt_tokens=1000,
                completion_tokens=100, cost_usd=0.002, latency_s=10.0, memories=3),
        outcome(2, False, "correct", turns=2, tool_calls={"KG_Path": 1}, prompt_tokens=500, completion_tokens=50,
                cost_usd=0.001, latency_s=4.0, leaked=True),
        outcome(3, False, "incorrect", turns=0, prompt_tokens=0, latency_s=1.0),
    ]
    figures = compute(runs)
    efficiency = figures["efficiency"]
    assert efficiency["turns"] == pytest.approx(2.0) and efficiency["tool_calls"] == pytest.approx(4 / 3)
    assert efficiency["tool_usage"] == {"KG_Path": {"calls": 3, "share": 0.75}, "KG_Neighbor": {"calls": 1, "share": 0.25}}
    assert efficiency["prompt_tokens"] == pytest.approx(500) and efficiency["completion_tokens"] == pytest.approx(50)
    assert efficiency["cost_usd"] == pytest.approx(0.001) and efficiency["total_cost_usd"] == pytest.approx(0.003)
    assert efficiency["latency_s"] == pytest.approx(5.0) and efficiency["median_latency_s"] == pytest.approx(4.0)
    assert efficiency["memories"] == pytest.approx(1.0)
    assert figures["leakage"] == {"runs_checked": 3, "runs_with_query_triple": 1, "runs_scored_by_a_model_trained_on_it": 0,
                                  "triples_used_for_fitting": 0}
    assert figures["triples"] == 3 and figures["accuracy"] == pytest.approx(2 / 3)


def test_a_degenerate_outcome_is_flagged():
    always_correct = [outcome(i, i % 2 == 0, "correct") for i in range(20)]
    flagged = compute(always_correct)["warnings"]
    assert any("Answered Correct for 20 of 20" in w for w in flagged)

    below_majority = [outcome(i, i < 15, "incorrect" if i < 15 else "correct") for i in range(20)]  # 0 right of 20
    assert any("below the majority baseline 75.0%" in w for w in compute(below_majority)["warnings"])

    failing = [outcome(i, i % 2 == 0, None, failed=i < 4) if i < 4 else outcome(i, i % 2 == 0, "correct" if i % 2 == 0 else "incorrect")
               for i in range(20)]
    assert any("4 of 20 runs failed" in w for w in compute(failing)["warnings"])


def test_a_sound_or_small_evaluation_is_not_flagged():
    true = [outcome(i, True, "correct" if i < 12 else "incorrect") for i in range(15)]  # 12 of 15 right
    false = [outcome(15 + i, False, "incorrect" if i < 12 else "correct") for i in range(15)]
    assert compute(true + false)["warnings"] == []
    assert compute([outcome(i, True, "correct") for i in range(5)])["warnings"] == []


def test_mcnemar_p_is_the_exact_two_sided_test_of_the_disagreements():
    # 73 triples only A got right against 55 only B got right: p 0.13
    assert mcnemar_p(73, 55) == pytest.approx(0.1329, abs=5e-4)
    assert mcnemar_p(2, 0) == pytest.approx(0.5)  # two disagreements, both one way: chance half the time
    assert mcnemar_p(0, 0) == 1.0
    assert mcnemar_p(20, 3) < 0.05
