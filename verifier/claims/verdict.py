"""A claim's verdict from its parts: one rule, plain Python.

Each part is a triple the claim asserts (or denies, ``negated``). A part is *supported* when its triple's
standing verdict agrees with the claim (Correct for an asserted triple, Incorrect for a denied one), *refuted*
when it disagrees, *not enough evidence* when its verdict is "not enough evidence" or its run ended without a
verdict (failed or cancelled), *open* while it has none of these. A part whose unknown no KG entity resolves is
refuted when asserted ("… a city that lies in Poland": none does) and supported when denied (existence read
closed-world).

The claim is settled only when every part is: open while any part is open; then Refuted when a part is refuted,
"not enough evidence" when a part is and none is refuted, Supported when every part is supported. Its confidence
is the probability that every part holds as claimed, from the parts' calibrated confidences, taken as
independent: P(claim) = Π P(part holds as claimed); the verdict's confidence is P(claim) for Supported and
1 − P(claim) for Refuted. It is unknown (None) while the claim is open or not settled by the evidence, and when a
part has a verdict without a confidence.

A reviewer's decision on the claim as a whole (accept or override) stands over what the parts give, with
confidence 1; the latest decision counts, and the verdict from the parts is kept beside it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

SUPPORTED, REFUTED, OPEN, NOT_ENOUGH = "supported", "refuted", "open", "not_enough_evidence"
REFUSED = "refused"  # no verdict: the text is no claim the KG can check (the claim's status says so)
VERDICT_TEXT = {"correct": "Correct", "incorrect": "Incorrect", "not_enough_evidence": "not enough evidence"}
CLAIM_VERDICT_LABEL = {SUPPORTED: "Supported", REFUTED: "Refuted", OPEN: "Open", NOT_ENOUGH: "Not enough evidence",
                       REFUSED: "Refused"}


@dataclass(frozen=True)
class PartOutcome:
    text: str  # the part's triple as the claim reads it ("NOT …" for a denied one)
    negated: bool
    verdict: str  # the triple's standing verdict: correct / incorrect / not_enough_evidence / "" (none yet)
    confidence: float | None  # probability that the verdict is right
    resolved: bool = True
    cited: tuple[str, ...] = ()  # the evidence keys its run cites
    run_id: int | None = None
    ended_without_verdict: bool = False  # no standing verdict, and its latest run failed or was cancelled

    @property
    def state(self) -> str:
        if not self.resolved:
            return SUPPORTED if self.negated else REFUTED
        if self.verdict == "not_enough_evidence" or (not self.verdict and self.ended_without_verdict):
            return NOT_ENOUGH
        if self.verdict not in ("correct", "incorrect"):
            return OPEN
        return SUPPORTED if (self.verdict == "correct") != self.negated else REFUTED

    @property
    def state_label(self) -> str:
        return "not enough evidence" if self.state == NOT_ENOUGH else self.state

    @property
    def verdict_text(self) -> str:
        return VERDICT_TEXT.get(self.verdict, "")

    @property
    def p_holds(self) -> float | None:
        """Probability that the part holds as the claim says (None when unknown)."""
        if not self.resolved or self.confidence is None or self.verdict not in ("correct", "incorrect"):
            return None
        return self.confidence if self.state == SUPPORTED else 1 - self.confidence


@dataclass(frozen=True)
class ClaimVerdict:
    verdict: str  # supported / refuted / not_enough_evidence / open / refused
    confidence: float | None
    justification: str
    from_parts: str = ""  # the verdict the parts give, whatever a reviewer decided
    decided_by: str = ""  # the reviewer whose decision on the claim stands ("": none)

    @property
    def label(self) -> str:
        return CLAIM_VERDICT_LABEL.get(self.verdict, self.verdict)

    @property
    def overridden(self) -> bool:
        return bool(self.decided_by) and self.verdict != self.from_parts


@dataclass(frozen=True)
class ClaimDecision:
    """A reviewer's standing decision on a whole claim."""

    verdict: str  # supported / refuted
    reviewer: str
    reason: str = ""


def claim_verdict(parts: list[PartOutcome], decision: ClaimDecision | None = None) -> ClaimVerdict:
    computed = _from_parts(parts)
    if decision is None:
        return computed
    said = f" ({decision.reason})" if decision.reason else ""
    return ClaimVerdict(decision.verdict, 1.0,
                        f"{decision.reviewer} decided the claim is {decision.verdict}{said}. From its parts: "
                        f"{computed.verdict}. {computed.justification}", from_parts=computed.verdict,
                        decided_by=decision.reviewer)


def _from_parts(parts: list[PartOutcome]) -> ClaimVerdict:
    if not parts:
        return ClaimVerdict(OPEN, None, "The claim has no parts yet.", from_parts=OPEN)
    states = [p.state for p in parts]
    verdict = next(state for state in (OPEN, REFUTED, NOT_ENOUGH, SUPPORTED) if state in states)
    probabilities = [p.p_holds for p in parts if p.resolved]
    p_claim = math.prod(probabilities) if probabilities and None not in probabilities else None
    if verdict in (OPEN, NOT_ENOUGH):
        confidence = None
    elif p_claim is None:
        confidence = None
    else:
        confidence = round(p_claim if verdict == SUPPORTED else 1 - p_claim, 4)
    return ClaimVerdict(verdict, confidence, _justification(parts, verdict), from_parts=verdict)


def _because(part: PartOutcome) -> str:
    if not part.resolved:
        return f"{part.text}: no entity of the KG fits" + (" (as the claim says)" if part.negated else "")
    cited = f" [{', '.join(part.cited)}]" if part.cited else ""
    run = f" (run {part.run_id})" if part.run_id else ""
    shown = VERDICT_TEXT.get(part.verdict, "its run ended without a verdict" if part.ended_without_verdict else "not verified yet")
    return f"{part.text}: {shown}{run}{cited}"


def _justification(parts: list[PartOutcome], verdict: str) -> str:
    if verdict == SUPPORTED:
        lead = "Every part holds as the claim says"
    elif verdict == REFUTED:
        lead = "A part does not hold as the claim says"
    elif verdict == NOT_ENOUGH:
        lead = "No part refutes the claim, but the evidence does not settle every part"
    else:
        lead = "Not every part has a verdict yet"
    deciding = [p for p in parts if p.state == verdict] if verdict in (REFUTED, NOT_ENOUGH) else parts
    return f"{lead}: " + "; ".join(_because(p) for p in deciding) + "."
