"""A claim's verdict from its parts: one rule, plain Python.

Each part is a triple the claim asserts (or denies, ``negated``). A part is *supported* when its triple's
standing verdict agrees with the claim (Correct for an asserted triple, Incorrect for a denied one), *refuted*
when it disagrees, *open* while it has no verdict. A part whose unknown no KG entity resolves is refuted when
asserted ("… a city that lies in Poland": none does) and supported when denied (existence read closed-world).

The claim is Supported when every part is supported, Refuted as soon as one part is refuted, open otherwise.
Its confidence is the probability that every part holds as claimed, from the parts' calibrated confidences,
taken as independent: P(claim) = Π P(part holds as claimed); the verdict's confidence is P(claim) for
Supported and 1 − P(claim) for Refuted. It is unknown (None) when a part has a verdict without a confidence.

A reviewer's decision on the claim as a whole (accept or override) stands over what the parts give, with
confidence 1; the latest decision counts, and the verdict from the parts is kept beside it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

SUPPORTED, REFUTED, OPEN = "supported", "refuted", "open"
VERDICT_TEXT = {"correct": "Correct", "incorrect": "Incorrect", "not_enough_evidence": "not enough evidence"}


@dataclass(frozen=True)
class PartOutcome:
    text: str  # the part's triple as the claim reads it ("NOT …" for a denied one)
    negated: bool
    verdict: str  # the triple's standing verdict: correct / incorrect / not_enough_evidence / "" (none yet)
    confidence: float | None  # probability that the verdict is right
    resolved: bool = True
    cited: tuple[str, ...] = ()  # the evidence keys its run cites
    run_id: int | None = None

    @property
    def state(self) -> str:
        if not self.resolved:
            return SUPPORTED if self.negated else REFUTED
        if self.verdict not in ("correct", "incorrect"):
            return OPEN
        return SUPPORTED if (self.verdict == "correct") != self.negated else REFUTED

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
    verdict: str  # supported / refuted / open
    confidence: float | None
    justification: str
    from_parts: str = ""  # the verdict the parts give, whatever a reviewer decided
    decided_by: str = ""  # the reviewer whose decision on the claim stands ("": none)

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
    verdict = REFUTED if REFUTED in states else OPEN if OPEN in states else SUPPORTED
    probabilities = [p.p_holds for p in parts if p.resolved]
    p_claim = math.prod(probabilities) if probabilities and None not in probabilities else None
    if verdict == OPEN:
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
    shown = VERDICT_TEXT.get(part.verdict, "not verified yet")
    return f"{part.text}: {shown}{run}{cited}"


def _justification(parts: list[PartOutcome], verdict: str) -> str:
    if verdict == SUPPORTED:
        lead = "Every part holds as the claim says"
    elif verdict == REFUTED:
        lead = "A part does not hold as the claim says"
    else:
        lead = "Not every part has a verdict yet"
    deciding = [p for p in parts if p.state == REFUTED] if verdict == REFUTED else parts
    return f"{lead}: " + "; ".join(_because(p) for p in deciding) + "."
