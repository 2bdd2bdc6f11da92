"""The verdict step of every mode: the answer given (the model's, a vote's, a tool's), weighed with the run's evidence
where the mode weighs, its explanation and the evidence it cites."""

from __future__ import annotations

from dataclasses import asdict

from verifier.agent.parsing import FinalAnswer
from verifier.agent.profile import Context
from verifier.agent.steps import VerdictStep
from verifier.agent.weighing import BRIEF_MODES, decided, dispute_reason, evidence_from, summary, unweighed, weighed_keys


def verdict_step(ctx: Context, final: FinalAnswer, *, forced: bool, by_evidence: bool, impression: str = "",
                 answer_logit: float | None = None, note: str = "") -> VerdictStep:
    """The verdict of ``final``. ``by_evidence``: the weighed evidence decides (the compact profile), else the answer
    stands and the weighing gives its confidence; ``impression``: the plan's, which stands in for an abstention when
    abstaining is off; ``answer_logit``: the verdict probe's log-odds."""
    valid, _ = ctx.support.check(final.cited)
    verdict = final.verdict
    if verdict == "not_enough_evidence" and not ctx.config.abstain and impression:
        verdict = impression
        note = note or "Abstention is off; the initial impression stands."
    explanation, confidence, assessment = final.explanation, None, {}
    if ctx.config.mode in BRIEF_MODES or (ctx.config.mode == "agent" and verdict in ("correct", "incorrect")):
        verdict, explanation, confidence, assessment, weighed = _weighed(ctx, verdict, explanation, by_evidence, answer_logit)
        assessment["disputed_reason"] = dispute_reason(verdict, assessment["structural_probability"])
        valid = list(dict.fromkeys([*valid, *weighed]))
    return VerdictStep(verdict=verdict, explanation=explanation, cited=valid, forced=forced, confidence=confidence,
                       assessment=assessment, note=note)


def _weighed(ctx: Context, answer: str, explanation: str, by_evidence: bool,
             answer_logit: float | None) -> tuple[str, str, float | None, dict, list[str]]:
    """The model's answer weighed with the run's evidence: (verdict, explanation, confidence, assessment, the
    evidence keys of the weighed signals, which the verdict cites).

    The paper profile keeps the model's answer as the verdict; the compact profile's verdict is the weighed
    decision, because a small model cannot weigh evidence (it says Correct to most claims) but reads and
    judges sentences well. Without a fitted weighing the answer stands, with no confidence (the evidence
    mode, which has no answer, then has no verdict either). ``assessment["decided_by"]`` says which decided a
    weighed verdict: "model" or "evidence"."""
    evidence = evidence_from(((k.key, k.kind, k.payload) for k in ctx.support.items.values()), answer, answer_logit)
    assessment = {**asdict(evidence), "p_true": None, "confidence_model": None, "confidence_fold": None}
    weights = ctx.weights()
    if weights is None:
        if not answer:
            explanation = "No fitted weighing is in force (manage.py calibrate), so the evidence alone decides nothing."
        return answer or "not_enough_evidence", explanation, None, assessment, []
    p_true = weights.probability(evidence)
    assessment.update(p_true=round(p_true, 4), confidence_model=weights.model_id, confidence_fold=weights.fold,
                      unweighed=unweighed(evidence, weights))
    cited = weighed_keys(evidence, weights)
    if answer and not by_evidence:
        assessment["decided_by"] = "model"
        return answer, explanation, p_true if answer == "correct" else 1 - p_true, assessment, cited
    assessment["decided_by"] = "evidence"
    verdict, confidence = decided(p_true)
    weighing = summary(evidence, p_true, weights)
    if not answer:  # a brief mode: the explanation says what was weighed
        explanation = f"{explanation}, {weighing}."
    elif verdict != answer:
        explanation = f"The evidence outweighs the model's answer ({answer.title()}: {explanation}): {weighing}."
    else:  # the verdict is the weighing's, which agrees with the model: say what it weighed
        explanation = f"{explanation.strip().rstrip('.')}; {weighing}."
    return verdict, explanation, confidence, assessment, cited
