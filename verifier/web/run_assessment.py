"""The run page's account of its verdict's confidence: the calibrated probability that the verdict is
right, whether the structural evidence disputes it, and the evidence the number was computed from
(``Run.assessment``, written by the runner; ``{}`` on runs older than the confidence model)."""

from __future__ import annotations

from dataclasses import dataclass, field

from verifier.models import Run, Verdict
from verifier.selectors import scoring_model


@dataclass(frozen=True)
class Factor:
    """One line of "How the confidence was reached"."""

    key: str
    label: str
    value: str
    evidence: tuple[str, ...] = ()  # the evidence keys (E5, …) the figure came from, linked to their rows


@dataclass(frozen=True)
class RunAssessment:
    confidence: float | None
    disputed: bool
    disputed_reason: str
    p_true: float | None
    factors: list[Factor] = field(default_factory=list)
    structural_model: str = ""  # "the structural model #4 of codex-s (version 2)", or ""
    structural_model_detail: str = ""  # its builders' description: "ComplEx model #4 of codex-s v2"
    cited_keys: frozenset[str] = frozenset()  # evidence keys with a row in the claim-vs-evidence table

    @property
    def percent(self) -> int:
        return round((self.confidence or 0.0) * 100)

    @property
    def explained(self) -> bool:
        """Whether there is anything to say below the confidence: a dispute, its evidence, a scoring model."""
        return self.disputed or bool(self.factors) or bool(self.structural_model)


def _probability(value) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _probability_text(value, missing: str) -> str:
    number = _probability(value)
    return f"{number:.2f}" if number is not None else missing


def _reading_text(reading: dict) -> str:
    counts = {name: int(reading.get(name) or 0) for name in ("supports", "contradicts", "silent")}
    if not any(counts.values()):
        return "none judged"
    return f"{counts['supports']} supporting, {counts['contradicts']} contradicting, {counts['silent']} silent"


def _keys(assessment: dict, *features: str) -> tuple[str, ...]:
    """The evidence keys a feature was read from (``assessment["keys"]``: feature → keys)."""
    keys = assessment.get("keys") if isinstance(assessment.get("keys"), dict) else {}
    return tuple(str(key) for feature in features for key in (keys.get(feature) or []))


NOT_WEIGHED = " — left out: the confidence model does not count it"
# The language model's answer is never called the verdict: the verdict is what curators review (the header's).
MODEL_ANSWER = "The language model's own answer"


def _answer_text(assessment: dict, unweighed: set[str]) -> str:
    """What the language model answered and where that answer stands: the verdict itself (the paper profile), weighed,
    not weighed, or withheld; "" when no model answered."""
    withheld = assessment.get("withheld_answer") if isinstance(assessment.get("withheld_answer"), dict) else None
    answer = (withheld or {}).get("answer") or assessment.get("agent_verdict")
    if not answer:
        return ""
    shown = dict(Verdict.choices).get(answer, answer)
    if withheld:
        return f"{shown} — withheld, not weighed: {withheld.get('reason') or 'no reason recorded'}"
    if assessment.get("decided_by") == "model":
        return f"{shown} — the verdict (the paper profile keeps the model's answer; the confidence is weighed)"
    if "agent_verdict" in unweighed or assessment.get("p_true") is None:
        return shown + (NOT_WEIGHED if "agent_verdict" in unweighed else " — not weighed: no confidence model is in force")
    return f"{shown} — weighed with the evidence below"


def factors(assessment: dict) -> list[Factor]:
    """The evidence behind the confidence, in the order it is combined; absent keys are left out, a key
    present with no value (no model, no rule) says why there is no number, and a signal the confidence model
    gives no weight (``assessment["unweighed"]``) says so."""
    rows = []
    unweighed = set(assessment.get("unweighed") or ())
    if answer := _answer_text(assessment, unweighed):
        rows.append(Factor("agent_verdict", MODEL_ANSWER, answer))
    if "structural_probability" in assessment:
        rows.append(Factor("structural_probability", "Plausibility: how well the triple fits the rest of the KG",
                           _probability_text(assessment["structural_probability"], "not available (no structural model is ready)"),
                           _keys(assessment, "structural")))
    if "rule_probability" in assessment:
        rows.append(Factor("rule_probability", "Rules the KG follows: probability that the triple is true",
                           _probability_text(assessment["rule_probability"], "no mined rule applies"), _keys(assessment, "rules")))
    if isinstance(assessment.get("reading"), dict):
        judged = {"supports", "contradicts"} & {name for name, count in assessment["reading"].items() if count}
        rows.append(Factor("reading", "Passages read", _reading_text(assessment["reading"])
                           + (NOT_WEIGHED if judged and judged <= unweighed else ""),
                           _keys(assessment, "supports", "contradicts")))
    if "p_true" in assessment:
        rows.append(Factor("p_true", "Combined probability that the triple is true",
                           _probability_text(assessment["p_true"], "not computed")))
    if "confidence_model" in assessment:
        model = assessment["confidence_model"]
        rows.append(Factor("confidence_model", "Weighed by",
                           f"confidence model #{model}" if model is not None else "no confidence model yet"))
    return rows


def run_assessment(run: Run, cited_keys: frozenset[str] = frozenset()) -> RunAssessment:
    """``cited_keys``: the evidence keys the page shows in its table (the others are in the "all retrieved"
    list), so that a factor links to where its evidence is."""
    assessment = run.assessment if isinstance(run.assessment, dict) else {}
    model = scoring_model(run.structural_model_id)
    return RunAssessment(
        confidence=run.confidence, disputed=run.disputed,
        disputed_reason=str(assessment.get("disputed_reason") or ""),
        p_true=_probability(assessment.get("p_true")), factors=factors(assessment),
        structural_model=f"the structural model #{model.pk} of {model.kg.name} (version {model.kg_version})" if model else "",
        structural_model_detail=model.description if model is not None else "", cited_keys=cited_keys,
    )
