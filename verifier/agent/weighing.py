"""Weighing a run's evidence into P(triple true): the features, and what a fitted weighing says.

The features come from the run's evidence items (their kind and payload — the same whether read from
the agent's support set or from stored SupportItems): the model's own answer (±1) and how sure it is of it
(the log-odds of Correct against Incorrect in a one-word verdict, when the endpoint returns
log-probabilities: a small model's binary answers lean Correct, its log-odds still rank), the logits of the
structural model's and the rule evidence's calibrated probabilities (0 with a "missing" indicator when
the run had none), how many of the sentences it read the model judged to support or contradict the
claim, whether one of them (about one end of the claim) names the other end, how close the most
relevant one is to the claim, and the model's reading of the head's article (the log-odds of its one-word
answer on the article's opening and the claim; 0 with a "missing" indicator when no model read one). The
weights are fitted on labelled runs (verifier/confidence.py); the agent gets them as a ``Weigher``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

# Modes whose verdict is always the run's evidence weighed, with no answer of a model's: the evidence brief
# alone ("evidence", no language model: a second a verification, so it labels enough runs to fit the evidence
# features) and the brief with the model's reading of the head's article ("reading", one call: a few seconds,
# so it labels enough runs to fit the reading's weight).
BRIEF_MODES = ("evidence", "reading")
WEIGHED_MODES = ("agent", *BRIEF_MODES)  # and the agent's verdict too, in the compact profile
# Append new features at the end (see ``aligned``): confidence models fitted before keep working.
FEATURES = ["agent_correct", "agent_logit", "structural_logit", "structural_missing", "rule_logit", "rule_missing",
            "supports", "contradicts", "mentioned", "relevance", "reading_logit", "reading_missing"]
# What a curator reads about a run (the lines of its explanation and of "How the confidence was reached") →
# the features each feeds. A fitted weighing may give a signal no weight (a small model's answer, which says
# Correct to nearly everything); the explanation then says so instead of presenting it as weighed.
SIGNALS = {"agent_verdict": ("agent_correct", "agent_logit"), "structural": ("structural_logit",),
           "rules": ("rule_logit",), "reading": ("reading_logit",), "supports": ("supports",),
           "contradicts": ("contradicts",), "mentioned": ("mentioned",), "relevance": ("relevance",)}
ANSWER_SIGN = {"correct": 1.0, "incorrect": -1.0}  # the model's answer as a feature; 0 when no model answered
DISPUTE_MARGIN = 0.15  # the structural probability must sit this far on the other side of 0.5
MAX_LOGIT = 6.0


def dispute_reason(verdict: str, structural_probability: float | None) -> str:
    """Why the structural probability disputes the run's ``verdict`` (it sits DISPUTE_MARGIN beyond 0.5 on the
    other side), or "".

    The verdict is the one the curator reviews: the model's answer in the paper profile, the weighed evidence
    in the compact one. A small model's answer that the weighing overrules is not disputed by the structure:
    it says Correct to nearly every claim, so flagging it would mark every claim the structure finds false —
    about four verdicts in ten, and the most reliable ones."""
    p = structural_probability
    if p is None or verdict not in ("correct", "incorrect"):
        return ""
    if (verdict == "correct" and p <= 0.5 - DISPUTE_MARGIN) or (verdict == "incorrect" and p >= 0.5 + DISPUTE_MARGIN):
        return f"The verdict is {verdict.title()}, but the structural model gives the triple a probability of {p:.2f}."
    return ""


def logit(p: float | None) -> float:
    if p is None:
        return 0.0
    p = min(max(p, 1e-6), 1 - 1e-6)
    return max(-MAX_LOGIT, min(MAX_LOGIT, math.log(p / (1 - p))))


@dataclass
class Evidence:
    agent_verdict: str  # the language model's own answer ("" in the evidence mode, which asks no model)
    agent_logit: float | None = None  # log P(Correct) − log P(Incorrect) of its one-word verdict (the probe)
    structural_probability: float | None = None
    rule_probability: float | None = None
    reading: dict = field(default_factory=lambda: {"supports": 0, "contradicts": 0, "silent": 0})
    mentioned: bool = False  # a sentence about one end of the claim names the other
    relevance: float = 0.0  # how close the most relevant sentence read is to the claim
    reading_logit: float | None = None  # the model's log-odds of Correct after reading the head's article
    structural_model: int | None = None
    keys: dict = field(default_factory=dict)  # feature → the evidence keys it came from

    def vector(self) -> list[float]:
        return [ANSWER_SIGN.get(self.agent_verdict, 0.0), self.agent_logit or 0.0,
                logit(self.structural_probability), float(self.structural_probability is None),
                logit(self.rule_probability), float(self.rule_probability is None),
                float(self.reading.get("supports", 0)), float(self.reading.get("contradicts", 0)),
                float(self.mentioned), self.relevance, self.reading_logit or 0.0, float(self.reading_logit is None)]


_YES = ("correct", "true", "yes")
_NO = ("incorrect", "false", "no", "wrong")


def probe_logit(first_token_logprobs: dict[str, float]) -> float | None:
    """log P(Correct) − log P(Incorrect) from a one-word answer's first-token alternatives (tokens reading
    Correct/True/Yes against Incorrect/False/No, "In" counting as the start of Incorrect); None when the
    endpoint sent no log-probabilities or neither side appears."""
    yes = no = 0.0
    for token, logprob in first_token_logprobs.items():
        word = token.strip().lower()
        if word.startswith(_NO) or word == "in":
            no += math.exp(logprob)
        elif word.startswith(_YES):
            yes += math.exp(logprob)
    if yes == 0.0 and no == 0.0:
        return None
    return max(-MAX_LOGIT, min(MAX_LOGIT, math.log(max(yes, 1e-9)) - math.log(max(no, 1e-9))))


def evidence_from(items: Iterable[tuple[str, str, dict]], answer: str, agent_logit: float | None = None) -> Evidence:
    """Features from (key, kind, payload) of a run's evidence items, the model's answer and its probe."""
    evidence = Evidence(answer, agent_logit)
    for key, kind, payload in items:
        if kind == "plausibility" and payload.get("probability") is not None and evidence.structural_probability is None:
            evidence.structural_probability = float(payload["probability"])
            evidence.structural_model = payload.get("model")
            evidence.keys["structural"] = [key]
        elif kind == "rule" and payload.get("probability") is not None and evidence.rule_probability is None:
            evidence.rule_probability = float(payload["probability"])
            evidence.keys["rules"] = [key]
        elif kind == "passage" and payload.get("reading_logit") is not None and evidence.reading_logit is None:
            evidence.reading_logit = float(payload["reading_logit"])
            evidence.keys["reading"] = [key]
        elif kind == "passage" and "relevance" in payload:
            if payload.get("mentions"):
                evidence.mentioned = True
                evidence.keys.setdefault("mentioned", []).append(key)
            evidence.relevance = max(evidence.relevance, float(payload["relevance"]))
            if payload.get("judgment") in evidence.reading:
                evidence.reading[payload["judgment"]] += 1
                if payload["judgment"] != "silent":
                    evidence.keys.setdefault(payload["judgment"], []).append(key)
    return evidence


@dataclass(frozen=True)
class Weights:
    """A fitted weighing: P(true) = σ(intercept + Σ coefficient · feature)."""

    coefficients: tuple[float, ...]
    intercept: float
    source: str = ""
    model_id: int | None = None
    fold: int | None = None  # cross-fitting: the fold these weights were fitted without (the triple's own)

    def weight(self, feature: str) -> float:
        return self.coefficients[FEATURES.index(feature)]

    def weighs(self, signal: str) -> bool:
        """Whether any feature of ``signal`` (a key of SIGNALS) has a weight."""
        return any(abs(self.weight(feature)) > 1e-9 for feature in SIGNALS[signal])

    def probability(self, evidence: Evidence) -> float:
        return self.probability_of(evidence.vector())

    def probability_of(self, vector) -> float:
        """P(true) of an evidence vector (``Evidence.vector``)."""
        z = self.intercept + sum(c * float(x) for c, x in zip(self.coefficients, vector, strict=True))
        return 1.0 / (1.0 + math.exp(-max(-30.0, min(30.0, z))))


def aligned(features: list[str], coefficients: list[float]) -> tuple[float, ...]:
    """A fitted model's coefficients for every feature. FEATURES only grows at its end: a model fitted before a
    feature was added (on a prefix of FEATURES) gives it weight 0, as its runs never had that evidence; a model
    fitted on anything else is refused."""
    if not features or len(features) != len(coefficients) or FEATURES[:len(features)] != list(features):
        raise ValueError(f"fitted on other features ({', '.join(map(str, features))})")
    return tuple(float(c) for c in coefficients) + (0.0,) * (len(FEATURES) - len(features))


def decided(p_true: float) -> tuple[str, float]:
    """The weighed verdict for P(true) and its confidence, the probability that the verdict is right."""
    return ("correct", p_true) if p_true >= 0.5 else ("incorrect", 1 - p_true)


Weigher = Callable[[], Weights | None]  # the weighing in force for this run, if one is fitted


def _signals(evidence: Evidence) -> list[tuple[str, str, str]]:
    """(signal, what it said in words, its evidence keys) for every signal the run has."""
    said = []
    if evidence.structural_probability is not None:
        said.append(("structural", f"structural probability {evidence.structural_probability:.2f}", _keys(evidence, "structural")))
    if evidence.rule_probability is not None:
        said.append(("rules", f"rule evidence {evidence.rule_probability:.2f}", _keys(evidence, "rules")))
    if evidence.reading_logit is not None:
        p_read = 1 / (1 + math.exp(-evidence.reading_logit))
        said.append(("reading", f"the model's reading of the head's article ({p_read:.2f} for Correct)", _keys(evidence, "reading")))
    for judgment in ("supports", "contradicts"):
        if evidence.reading.get(judgment):
            count = evidence.reading[judgment]
            said.append((judgment, f"{count} sentence(s) judged to {judgment[:-1]} the claim", _keys(evidence, judgment)))
    if evidence.mentioned:
        said.append(("mentioned", "a sentence about one end of the claim naming the other", _keys(evidence, "mentioned")))
    if evidence.relevance:
        said.append(("relevance", f"the best sentence read matching the claim at {evidence.relevance:.2f} (its similarity "
                                  f"in meaning, plus a bonus when it names the other end)", ""))
    if evidence.agent_verdict:
        said.append(("agent_verdict", f"the language model's own answer ({evidence.agent_verdict.title()})", ""))
    return said


def unweighed(evidence: Evidence, weights: Weights) -> list[str]:
    """The signals the run has that ``weights`` give no weight: read, shown, but not part of the verdict."""
    return [signal for signal, _, _ in _signals(evidence) if not weights.weighs(signal)]


def weighed_keys(evidence: Evidence, weights: Weights) -> list[str]:
    """The evidence keys of the signals ``weights`` weigh: what the weighed verdict cites."""
    return [key for signal, keys in evidence.keys.items() if signal in SIGNALS and weights.weighs(signal) for key in keys]


def summary(evidence: Evidence, p_true: float, weights: Weights) -> str:
    """The weighed decision in words: the signals the weights weigh, citing their evidence keys, then those the
    run has that carry no weight (named without keys: they are not the verdict's evidence)."""
    said = _signals(evidence)
    counted = [f"{words} {keys}".strip() for signal, words, keys in said if weights.weighs(signal)]
    ignored = [words for signal, words, _ in said if not weights.weighs(signal)]
    text = f"weighing {', '.join(counted) or 'no signal (the prior alone)'} gives a probability of {p_true:.2f} that the triple is true"
    if ignored:
        text += f"; left out, as the confidence model gives no weight to them: {', '.join(ignored)}"
    return text


def _keys(evidence: Evidence, feature: str) -> str:
    return "".join(f"[{k}]" for k in evidence.keys.get(feature, []))
