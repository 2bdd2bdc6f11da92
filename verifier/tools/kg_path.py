"""KG_Path: how two entities are connected, by paths of one to three edges in either direction."""

from __future__ import annotations

import numpy as np

from verifier.kg.base import KGPath
from verifier.memory import encoder
from verifier.tools import render
from verifier.tools.base import EvidenceItem, ToolContext, ToolResult
from verifier.tools.names import Resolved, resolve_entity
from verifier.tools.registry import tool

TOP_K = 20
MAX_HOPS = 3
CANDIDATES = 60  # paths fetched before ranking
MAX_PER_MIDDLE = 2  # paths sharing the same intermediate entities, so twenty paths say twenty things


def rank_paths(paths: list[KGPath], relation_label: str) -> list[KGPath]:
    """Shortest first; within a length, paths whose relations are closest in meaning to the query
    relation first; at most MAX_PER_MIDDLE paths through the same intermediate entities."""
    if relation_label and paths:
        labels = sorted({step.edge.relation.name for p in paths for step in p.steps})
        vectors = encoder.encode_recurring([relation_label, *labels])
        closeness = dict(zip(labels, vectors[1:] @ vectors[0], strict=True))
        score = {id(p): float(np.mean([closeness[s.edge.relation.name] for s in p.steps])) for p in paths}
    else:
        score = {id(p): 0.0 for p in paths}
    ordered = sorted(paths, key=lambda p: (p.hops, -score[id(p)]))
    kept, per_middle = [], {}
    for kg_path_ in ordered:
        middle = tuple(sorted({s.edge.head.id for s in kg_path_.steps[1:]} | {s.edge.tail.id for s in kg_path_.steps[:-1]}))
        if kg_path_.hops > 1 and per_middle.get(middle, 0) >= MAX_PER_MIDDLE:
            continue
        per_middle[middle] = per_middle.get(middle, 0) + 1
        kept.append(kg_path_)
    return kept[:TOP_K]


@tool("KG_Path", category="kg")
def kg_path(ctx: ToolContext, entity_a: str, entity_b: str) -> ToolResult:
    """Find up to 20 paths of 1, 2 or 3 edges (either direction) connecting two entities, shortest first.

    Args:
        entity_a: the first entity, by label or id
        entity_b: the second entity, by label or id
    """
    resolved = []
    for text in (entity_a, entity_b):
        result = resolve_entity(ctx, text)
        if not isinstance(result, Resolved):
            return ToolResult(result.message, ok=False)
        resolved.append(result)
    a, b = resolved
    if a.id == b.id:
        return ToolResult(f"{entity_a!r} and {entity_b!r} are the same entity ({a.id}).", ok=False)
    candidates = ctx.kg.paths(a.id, b.id, max_hops=MAX_HOPS, limit=CANDIDATES, exclude=ctx.exclude)
    paths = rank_paths(candidates, ctx.query.relation_label if ctx.query else "")
    if not paths:
        return ToolResult(f"No direct, 2-hop or 3-hop paths found between {a.id} and {b.id} "
                          f"({a.label or a.id} and {b.label or b.id}).")
    source = f"{ctx.kg.name} ({ctx.kg.version})"
    items = []
    for kg_path_ in paths:
        entities = {}
        for edge in kg_path_.edges:
            entities[edge.head.id] = edge.head.name
            entities[edge.tail.id] = edge.tail.name
        payload = {"edges": [list(edge.ids) for edge in kg_path_.edges],
                   "relations": {e.relation.id: e.relation.name for e in kg_path_.edges}, "entities": entities}
        items.append(EvidenceItem("path", render.path(kg_path_), payload, source))
    header = f"Paths between {a.label or a.id} ({a.id}) and {b.label or b.id} ({b.id}), shortest first:"
    notes = "".join(f"({r.note})\n" for r in resolved if r.note)
    return ToolResult(notes + header + "\n" + "\n".join(i.text for i in items), items)
