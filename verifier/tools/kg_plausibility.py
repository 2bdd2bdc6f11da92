"""KG_Plausibility: how plausible a triple is by the graph's embedding model and the entities' own text, as
one calibrated probability, with the ranks of the tail and the head among their type-compatible
competitors, the alternatives the model prefers, what the entities described like the head hold, and
whether either entity's text names the other, and what the KG's reference KGs hold between the two."""

from __future__ import annotations

from verifier.structure.evidence import PlausibilityReport, SideRanking, TextEvidence, Unavailable
from verifier.tools.base import EvidenceItem, ToolContext, ToolResult
from verifier.tools.names import Resolved, resolve_entity, resolve_relation
from verifier.tools.registry import tool

REST_SHOWN = 0.99  # below this share left by the KG's stated values, the others' probabilities say "of the rest"


def _alternatives(side: SideRanking) -> str:
    """The model's alternatives. Where the KG's stated values take more than 1% of the probability, the others' are
    their share of what is left ("Canada (0.47 of the rest)"): a stated value at 1.00 would show every other as 0.00."""
    rest = " of the rest" if side.rest < REST_SHOWN else ""
    shown = [f"{c.label} ({c.probability:.2f}{', in the KG' if c.in_kg else rest})" for c in side.alternatives]
    return "; ".join(shown) or "none"


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _neighbours_line(text: TextEvidence, head: Resolved, relation: Resolved, tail: Resolved) -> str:
    if not text.neighbours:
        return f"No entity with a known {relation.label} has a text to compare with {head.label}'s"
    holding = (f"{len(text.holders)} {'has' if len(text.holders) == 1 else 'have'} {tail.label} ({text.share:.0%} by "
               f"similarity): {', '.join(text.holders)}" if text.holders else f"none has {tail.label}")
    return f"Of the {text.neighbours} entities described most like {head.label} with a known {relation.label}, {holding}"


def observation(report: PlausibilityReport, head: Resolved, relation: Resolved, tail: Resolved, source: str) -> ToolResult:
    model = report.model
    ids = {"head": head.id, "relation": relation.id, "tail": tail.id, "labels": [head.label, relation.label, tail.label],
           "model": model.pk, "kg_version": model.kg_version, "fold": report.fold}
    # The claim in words, never in edge notation: the anti-leakage proof flags the triple under test written as an edge.
    claim = f"{head.label} · {relation.label} · {tail.label}"
    if report.probability is None:
        verdict_line = f"Plausibility of {claim}: uncalibrated (the model has no calibration yet)"
    else:
        verdict_line = f"Plausibility of {claim}: {report.probability:.2f} (calibrated probability that it is true)"
    tail_line = (f"{tail.label} ranks {_ordinal(report.tail.rank)} of {report.tail.candidates} type-compatible candidates for "
                 f"({head.label}, {relation.label}, ?); the model prefers: {_alternatives(report.tail)}")
    head_line = (f"{head.label} ranks {_ordinal(report.head.rank)} of {report.head.candidates} type-compatible candidates for "
                 f"(?, {relation.label}, {tail.label}); the model prefers: {_alternatives(report.head)}")
    text = report.text
    neighbours_line = _neighbours_line(text, head, relation, tail)
    named_line = (f"The text about {head.label} {'names' if text.tail_named else 'does not name'} {tail.label}; the text "
                  f"about {tail.label} {'names' if text.head_named else 'does not name'} {head.label}")
    items = [
        EvidenceItem("plausibility", verdict_line, {**ids, "probability": report.probability, "features": report.features,
                                                    "embedding_probability": report.embedding_probability}, source),
        *[EvidenceItem("plausibility", finding.text(head.label, relation.label, tail.label),
                       {**ids, "side": "reference", "reference": finding.reference, "covered": finding.covered,
                        "stated": finding.stated, "head_values": finding.head_values, "links": finding.links}, source)
          for finding in (report.reference.findings if report.reference else [])],
        EvidenceItem("plausibility", tail_line, {**ids, "side": "tail", "rank": report.tail.rank,
                                                 "candidates": report.tail.candidates}, source),
        EvidenceItem("plausibility", neighbours_line, {**ids, "side": "described", "share": round(text.share, 3),
                                                       "neighbours": text.neighbours, "holders": text.holders}, source),
        EvidenceItem("plausibility", named_line, {**ids, "side": "named", "tail_named": text.tail_named,
                                                  "head_named": text.head_named}, source),
        EvidenceItem("plausibility", head_line, {**ids, "side": "head", "rank": report.head.rank,
                                                 "candidates": report.head.candidates}, source),
    ]
    header = (f"Structural evidence from {model.description}, network {report.fold + 1} of {model.folds} (trained without "
              f"this triple), and the entities' text (a score, not a fact stated by the KG):")
    return ToolResult("\n".join([header, *(item.text for item in items)]), items)


@tool("KG_Plausibility", category="structural")
def kg_plausibility(ctx: ToolContext, head: str, relation: str, tail: str) -> ToolResult:
    """How plausible the KG's embedding model finds a triple: a calibrated probability, the tail's and the
    head's rank among type-compatible candidates, and the alternatives the model prefers.

    Args:
        head: the subject entity, by label or id
        relation: the relation, by label or id
        tail: the object entity, by label or id
    """
    if ctx.structure is None:
        return ToolResult("KG_Plausibility needs a local KG with a trained structural model; this KG is a remote endpoint.",
                          ok=False)
    parts = [resolve_entity(ctx, head), resolve_relation(ctx, relation), resolve_entity(ctx, tail)]
    for part in parts:
        if not isinstance(part, Resolved):
            return ToolResult(part.message, ok=False)
    h, r, t = parts
    report = ctx.structure.plausibility(h.id, r.id, t.id)
    if isinstance(report, Unavailable):
        return ToolResult(report.message, ok=False)
    notes = "".join(f"({p.note})\n" for p in parts if p.note)
    result = observation(report, h, r, t, f"{ctx.kg.name} ({ctx.kg.version}), structural model {report.model.pk}")
    result.text = notes + result.text
    return result
