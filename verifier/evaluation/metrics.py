"""The figures of an evaluation, computed exactly from one outcome per (triple, repeat).

Plain Python, no Django, so every figure can be checked by hand:

- accuracy, precision, recall, F1 with True as the positive class. A prediction is "positive" only
  when the verdict is Correct; an abstention ("Not enough evidence"), an unparsable answer and a failed
  run are all wrong. An empty denominator gives 0 (no positive prediction → precision 0).
- answer rate = share of outcomes with a Correct/Incorrect verdict; conditional accuracy = accuracy
  over those (None when nothing was answered). Both matter when abstention is allowed.
- reliability over repeated runs: per triple, H = entropy (bits) of the distribution of its answers
  over the repeats, reliability = 1 − H / log2 K with K = 4 answer classes (Correct, Incorrect, Not
  enough evidence, no answer); averaged over triples. 1 means every repeat answered alike, 0 that the
  answers spread evenly over all four classes. None with a single repeat.
- calibration: the expected calibration error of the runs' confidences (probability that the verdict is
  right) over 10 equal-width bins, and the bins of the reliability diagram.
- accuracy per relation; averages per verification of turns (model turns: ReAct thoughts including
  the mandatory judgment, and baseline answers), tool calls, tokens, cost and latency; each tool's
  share of all tool calls; memories retrieved per verification; and how many runs saw the triple under
  test as a KG edge (must be 0).
"""

from __future__ import annotations

import math
import statistics
from collections import Counter, defaultdict
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass, field

from verifier.structure.calibration import expected_calibration_error, reliability_bins

CORRECT, INCORRECT, ABSTAIN = "correct", "incorrect", "not_enough_evidence"
NO_ANSWER = "no_answer"  # an unparsable answer or a failed run
ANSWER_CLASSES = (CORRECT, INCORRECT, ABSTAIN, NO_ANSWER)


@dataclass(frozen=True)
class Outcome:
    """One verification of one labelled triple (one repeat)."""

    triple: Hashable
    relation: str
    expected: bool
    verdict: str | None  # correct / incorrect / not_enough_evidence; None: no readable answer
    failed: bool = False  # the run itself failed (no answer at all)
    turns: int = 0
    tool_calls: Mapping[str, int] = field(default_factory=dict)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    latency_s: float = 0.0
    memories: int = 0  # memory-bank entries that guided the run
    leaked: bool = False  # the triple under test appeared as a KG edge in an observation
    model_saw_it: bool = False  # a structural model that scored it had been trained on it
    fitted: bool = False  # the triple was used to fit a calibration, the confidence model or a memory
    confidence: float | None = None  # the run's calibrated probability that its verdict is right

    @property
    def answer(self) -> str:
        return self.verdict if self.verdict in (CORRECT, INCORRECT, ABSTAIN) else NO_ANSWER

    @property
    def right(self) -> bool:
        return self.answer == (CORRECT if self.expected else INCORRECT)


def _ratio(numerator: float, denominator: float) -> float:
    return numerator / denominator if denominator else 0.0


def confusion(outcomes: Iterable[Outcome]) -> dict[str, dict[str, int]]:
    """Counts by gold label ("true"/"false") and answer class."""
    table = {gold: dict.fromkeys(ANSWER_CLASSES, 0) for gold in ("true", "false")}
    for outcome in outcomes:
        table["true" if outcome.expected else "false"][outcome.answer] += 1
    return table


def classification(outcomes: list[Outcome]) -> dict:
    table = confusion(outcomes)
    tp, fn_answered = table["true"][CORRECT], table["true"][INCORRECT]
    fp, tn = table["false"][CORRECT], table["false"][INCORRECT]
    n = len(outcomes)
    positives = sum(table["true"].values())
    precision = _ratio(tp, tp + fp)
    recall = _ratio(tp, positives)
    answered = tp + fn_answered + fp + tn
    return {
        "n": n,
        "positives": positives,
        "negatives": n - positives,
        "confusion": table,
        "accuracy": _ratio(tp + tn, n),
        "precision": precision,
        "recall": recall,
        "f1": _ratio(2 * precision * recall, precision + recall),
        "answer_rate": _ratio(answered, n),
        "conditional_accuracy": (tp + tn) / answered if answered else None,
        "abstained": table["true"][ABSTAIN] + table["false"][ABSTAIN],
        "no_answer": table["true"][NO_ANSWER] + table["false"][NO_ANSWER],
        "failed_runs": sum(1 for o in outcomes if o.failed),
    }


def entropy(counts: Iterable[int]) -> float:
    """Shannon entropy in bits of a distribution given by counts."""
    values = [c for c in counts if c > 0]
    total = sum(values)
    return -sum((c / total) * math.log2(c / total) for c in values) if total else 0.0


def reliability(outcomes: Iterable[Outcome]) -> dict | None:
    """Mean over repeated triples of 1 − H/log2 K (K = the 4 answer classes); None without repeats."""
    answers: dict[Hashable, list[str]] = defaultdict(list)
    for outcome in outcomes:
        answers[outcome.triple].append(outcome.answer)
    k = len(ANSWER_CLASSES)
    scores = [1 - entropy(Counter(given).values()) / math.log2(k) for given in answers.values() if len(given) > 1]
    if not scores:
        return None
    return {"mean": statistics.fmean(scores), "triples": len(scores),
            "fully_consistent": sum(1 for s in scores if math.isclose(s, 1.0))}


def per_relation(outcomes: Iterable[Outcome]) -> list[dict]:
    """Accuracy per relation, most frequent relation first."""
    totals: Counter[str] = Counter()
    right: Counter[str] = Counter()
    for outcome in outcomes:
        totals[outcome.relation] += 1
        right[outcome.relation] += outcome.right
    ordered = sorted(totals, key=lambda r: (-totals[r], r))
    return [{"relation": r, "n": totals[r], "right": right[r], "accuracy": right[r] / totals[r]} for r in ordered]


def efficiency(outcomes: list[Outcome]) -> dict:
    n = len(outcomes)
    calls: Counter[str] = Counter()
    for outcome in outcomes:
        calls.update(outcome.tool_calls)
    total_calls = sum(calls.values())
    latencies = [o.latency_s for o in outcomes]
    return {
        "turns": _ratio(sum(o.turns for o in outcomes), n),
        "tool_calls": _ratio(total_calls, n),
        "tool_usage": {tool: {"calls": count, "share": count / total_calls} for tool, count in calls.most_common()},
        "prompt_tokens": _ratio(sum(o.prompt_tokens for o in outcomes), n),
        "completion_tokens": _ratio(sum(o.completion_tokens for o in outcomes), n),
        "cost_usd": _ratio(sum(o.cost_usd for o in outcomes), n),
        "total_cost_usd": sum(o.cost_usd for o in outcomes),
        "latency_s": _ratio(sum(latencies), n),
        "memories": _ratio(sum(o.memories for o in outcomes), n),
        "median_latency_s": statistics.median(latencies) if latencies else 0.0,
    }


SELECTIVE_THRESHOLDS = (0.6, 0.7, 0.8, 0.9, 0.95)


def calibration(outcomes: list[Outcome]) -> dict | None:
    """Expected calibration error and the reliability diagram's bins of the runs' confidences (the
    probability each run gave its verdict being right), and what deciding only above a confidence gives
    (``selective``); None when no run has a confidence."""
    rated = [o for o in outcomes if o.confidence is not None]
    if not rated:
        return None
    confidence, right = [o.confidence for o in rated], [o.right for o in rated]
    return {"n": len(rated), "ece": expected_calibration_error(confidence, right), "bins": reliability_bins(confidence, right),
            "mean_confidence": statistics.fmean(confidence), "selective": selective(confidence, right, len(outcomes))}


def selective(confidence: list[float], right: list[bool], total: int) -> list[dict]:
    """Per confidence threshold, the verdicts at or above it: their share of all ``total`` verifications
    (coverage), how many were right, and the 95% Wilson interval of that accuracy. A curator who accepts
    those verdicts and reviews the rest by hand learns here how much review the threshold saves and how
    many wrong verdicts it lets through."""
    rows = []
    for threshold in SELECTIVE_THRESHOLDS:
        kept = [r for c, r in zip(confidence, right, strict=True) if c >= threshold]
        low, high = wilson_interval(sum(kept), len(kept))
        rows.append({"threshold": threshold, "n": len(kept), "coverage": _ratio(len(kept), total),
                     "accuracy": _ratio(sum(kept), len(kept)), "low": low, "high": high})
    return rows


def wilson_interval(successes: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """The Wilson score interval of a proportion (0, 0 for n = 0)."""
    z = statistics.NormalDist().inv_cdf((1 + level) / 2)
    if n == 0:
        return 0.0, 0.0
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def mcnemar_p(only_a: int, only_b: int) -> float:
    """The exact McNemar test of two verifiers on the same triples: the two-sided binomial p of the split between
    the triples only A got right and those only B got right (1.0 when they never disagree)."""
    from scipy.stats import binomtest

    disagreements = only_a + only_b
    return float(binomtest(only_b, disagreements, 0.5).pvalue) if disagreements else 1.0


MIN_FLAGGED = 10  # fewer verifications than this are too few to call an outcome degenerate
ONE_ANSWER_SHARE = 0.95
FAILED_SHARE = 0.10
_NAMES = {CORRECT: "Correct", INCORRECT: "Incorrect", ABSTAIN: "Not enough evidence", NO_ANSWER: "no answer"}


def degenerate_outcomes(outcomes: list[Outcome], figures: dict) -> list[str]:
    """Degenerate outcomes a reader must not miss: one answer for (nearly) every triple, an accuracy below
    always giving the majority answer, many failed runs."""
    n = len(outcomes)
    if n < MIN_FLAGGED:
        return []
    found = []
    answer, count = Counter(o.answer for o in outcomes).most_common(1)[0]
    if count / n >= ONE_ANSWER_SHARE:
        found.append(f"Answered {_NAMES[answer]} for {count} of {n} verifications: the verdict barely depends on the triple.")
    majority = max(figures["positives"], figures["negatives"]) / n
    if figures["accuracy"] < majority:
        always = "Correct" if figures["positives"] >= figures["negatives"] else "Incorrect"
        found.append(f"Accuracy {figures['accuracy']:.1%} is below the majority baseline {majority:.1%} "
                     f"(always answering {always}).")
    if figures["failed_runs"] / n >= FAILED_SHARE:
        found.append(f"{figures['failed_runs']} of {n} runs failed; their triples count as wrong.")
    return found


def compute(outcomes: list[Outcome]) -> dict:
    """Every figure of the module docstring for ``outcomes`` (one per finished triple/repeat)."""
    classified = classification(outcomes)
    return {
        **classified,
        "warnings": degenerate_outcomes(outcomes, classified),
        "triples": len({o.triple for o in outcomes}),
        "reliability": reliability(outcomes),
        "calibration": calibration(outcomes),
        "per_relation": per_relation(outcomes),
        "efficiency": efficiency(outcomes),
        "leakage": {"runs_checked": len(outcomes), "runs_with_query_triple": sum(o.leaked for o in outcomes),
                    "runs_scored_by_a_model_trained_on_it": sum(o.model_saw_it for o in outcomes),
                    "triples_used_for_fitting": len({o.triple for o in outcomes if o.fitted})},
    }
