"""KG_Plausibility: how plausible the graph's embedding model finds a triple, as a calibrated probability,
with the ranks of the tail and the head among their type-compatible competitors and the alternatives
the model prefers."""

from __future__ import annotations

from verifier.structure.evidence import PlausibilityReport, SideRanking, Unavailable
from verifier.tools.base import EvidenceItem, ToolContext, ToolResult
from verifier.tools.names import Resolved, resolve_entity, resolve_relation
from verifier.tools.registry import tool


def _alternatives(side: SideRanking) -> str:
    shown = [f"{c.label} ({c.probability:.2f}{', in the KG' if c.in_kg else ''})" for c in side.alternatives]
    return "; ".join(shown) or "none"


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def observation(report: PlausibilityReport, head: Resolved, relation: Resolved, tail: Resolved, source: str) -> ToolResult:
    model = report.model
    ids = {"head": head.id, "relation": relation.id, "tail": tail.id, "labels": [head.label, relation.label, tail.label],
           "model": model.pk, "kg_version": model.kg_version}
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
    items = [
        EvidenceItem("plausibility", verdict_line, {**ids, "probability": report.probability, "features": report.features}, source),
        EvidenceItem("plausibility", tail_line, {**ids, "side": "tail", "rank": report.tail.rank,
                                                 "candidates": report.tail.candidates}, source),
        EvidenceItem("plausibility", head_line, {**ids, "side": "head", "rank": report.head.rank,
                                                 "candidates": report.head.candidates}, source),
    ]
    header = (f"Structural evidence from {model.description} (trained without this triple; a score, not a fact "
              f"stated by the KG):")
    return ToolResult("\n".join([header, verdict_line, tail_line, head_line]), items)


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
