"""The verdict step of every mode: the answer given (the model's, a vote's, a tool's), weighed with the run's evidence
where the mode weighs, its explanation and the evidence it cites.

The explanation never repeats the language model's words unchecked. A verdict the weighed evidence decided is
explained by that evidence: the weighing's signals and the keys of the items they came from. A verdict that is the
model's answer is explained by those of its sentences the evidence they cite holds (verifier/agent/grounding.py),
or by its answer and citations alone. An answer given while the data the model read held an instruction (or that
repeats one) is not taken: the evidence decides without it, or no verdict is given.
"""

from __future__ import annotations

import re
from dataclasses import asdict

from verifier.agent.grounding import OWN, Grounding, Reading
from verifier.agent.parsing import FinalAnswer
from verifier.agent.profile import Context
from verifier.agent.steps import VERDICT_LABELS, VerdictStep
from verifier.agent.weighing import BRIEF_MODES, decided, dispute_reason, evidence_from, summary, unweighed, weighed_keys

ANSWER = "the language model's own answer"
_ONLY_KEYS = re.compile(r"^[\s\[\]E\d.,;]*$")


def verdict_step(ctx: Context, final: FinalAnswer, *, forced: bool, by_evidence: bool, impression: str = "",
                 answer_logit: float | None = None, note: str = "") -> VerdictStep:
    """The verdict of ``final``. ``by_evidence``: the weighed evidence decides (the compact profile), else the answer
    stands and the weighing gives its confidence; ``impression``: the plan's, which stands in for an abstention when
    abstaining is off; ``answer_logit``: the verdict probe's log-odds."""
    valid, _ = ctx.support.check(final.cited)
    answer = final.verdict
    if answer == "not_enough_evidence" and not ctx.config.abstain and impression:
        answer = impression
        note = note or "Abstention is off; the initial impression stands."
    explanation, withheld = final.explanation, ""
    if final.by_model:
        grounding = Grounding.of_run(ctx.claim, ctx.support.items, ctx.memories)
        reading = grounding.check(final.explanation)
        withheld = _withheld(reading, grounding)
        explanation = _in_its_words(answer, reading, valid)
    if answer not in ("correct", "incorrect"):
        withheld = ""
    if ctx.config.mode in BRIEF_MODES or (ctx.config.mode == "agent" and answer in ("correct", "incorrect")):
        return _weighed(ctx, answer, explanation, valid, by_evidence=by_evidence, withheld=withheld,
                        answer_logit=answer_logit, forced=forced, note=note)
    if withheld:
        return VerdictStep(verdict="not_enough_evidence", explanation=_withheld_text(answer, withheld) + ".", forced=forced,
                           note=note)
    return VerdictStep(verdict=answer, explanation=explanation, cited=valid, forced=forced, note=note)


def _withheld(reading: Reading, grounding: Grounding) -> str:
    """Why the model's answer is not taken, or "": it repeats an instruction, or the data it read held one."""
    if reading.adopted:
        return next(part.reason for part in reading.parts if part.reason and part.status == "adopted")
    if grounding.instructions:
        places = sorted({where if where.startswith(("the", "a ")) else f"[{where}]" for where, _ in grounding.instructions})
        return f"the data it read holds text worded as an instruction ({', '.join(places)})"
    return ""


def _in_its_words(answer: str, reading: Reading, cited: list[str]) -> str:
    """The model's explanation as it may stand: its grounded sentences, or its answer and citations alone."""
    if reading.grounded and not _ONLY_KEYS.match(reading.grounded):
        return reading.grounded
    keys = "".join(f"[{key}]" for key in cited)
    label = VERDICT_LABELS.get(answer, answer)
    said = f"The language model answered {label}" + (f", citing {keys}" if keys else "") + "."
    if reading.withheld or reading.count(OWN):
        said += " Its reasons are not shown: no evidence it cites holds them (its words are in the steps above)."
    return said


def _withheld_text(answer: str, reason: str) -> str:
    return f"{ANSWER[0].upper()}{ANSWER[1:]} ({VERDICT_LABELS[answer]}) is withheld: {reason}"


def _weighed(ctx: Context, answer: str, explanation: str, cited: list[str], *, by_evidence: bool, withheld: str,
             answer_logit: float | None, forced: bool, note: str) -> VerdictStep:
    """The answer weighed with the run's evidence.

    The paper profile keeps the model's answer as the verdict; the compact profile's verdict is the weighed
    decision, because a small model cannot weigh evidence (it says Correct to most claims) but reads and judges
    sentences well. A withheld answer is left out of the weighing. Without a fitted weighing the answer stands, with
    no confidence (the evidence mode, which has no answer, and a withheld answer then have no verdict).
    ``assessment["decided_by"]`` says which decided a weighed verdict: "model" or "evidence"."""
    weighed_answer = "" if withheld else answer
    evidence = evidence_from(((k.key, k.kind, k.payload) for k in ctx.support.items.values()), weighed_answer,
                             None if withheld else answer_logit)
    assessment = {**asdict(evidence), "p_true": None, "confidence_model": None, "confidence_fold": None}
    if withheld:
        assessment["withheld_answer"] = {"answer": answer, "reason": withheld}
    weights = ctx.weights()
    verdict, confidence, keys = weighed_answer or "not_enough_evidence", None, cited
    if weights is None:
        if withheld:
            explanation = f"{_withheld_text(answer, withheld)}; no fitted weighing is in force to decide from the evidence alone."
            keys = []
        elif not answer:
            explanation = "No fitted weighing is in force (manage.py calibrate), so the evidence alone decides nothing."
    else:
        p_true = weights.probability(evidence)
        assessment.update(p_true=round(p_true, 4), confidence_model=weights.model_id, confidence_fold=weights.fold,
                          unweighed=unweighed(evidence, weights))
        if weighed_answer and not by_evidence:
            assessment["decided_by"] = "model"
            confidence = p_true if answer == "correct" else 1 - p_true
            keys = list(dict.fromkeys([*cited, *weighed_keys(evidence, weights)]))
        else:
            assessment["decided_by"] = "evidence"
            verdict, confidence = decided(p_true)
            explanation = _from_the_evidence(answer, verdict, explanation, summary(evidence, p_true, weights), withheld)
            keys = weighed_keys(evidence, weights)
    assessment["disputed_reason"] = dispute_reason(verdict, assessment["structural_probability"])
    return VerdictStep(verdict=verdict, explanation=explanation, cited=keys, forced=forced, confidence=confidence,
                       assessment=assessment, note=note)


def _from_the_evidence(answer: str, verdict: str, opening: str, weighing: str, withheld: str) -> str:
    """The explanation of a verdict the weighed evidence decided: what was weighed, and where the model's answer stands."""
    if withheld:
        return f"{_withheld_text(answer, withheld)}. The evidence decides: {weighing}."
    if not answer:  # a brief mode: the product's own opening, then what was weighed
        return f"{opening}, {weighing}."
    stance = "agrees with" if verdict == answer else "outweighs"
    return f"The weighed evidence {stance} {ANSWER} ({VERDICT_LABELS[answer]}): {weighing}."
