"""KG_Path: how two entities are connected, by paths of one to three edges in either direction."""

from __future__ import annotations

from verifier.tools import render
from verifier.tools.base import EvidenceItem, ToolContext, ToolResult
from verifier.tools.names import Resolved, resolve_entity
from verifier.tools.registry import tool

TOP_K = 20
MAX_HOPS = 3


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
    paths = ctx.kg.paths(a.id, b.id, max_hops=MAX_HOPS, limit=TOP_K, exclude=ctx.exclude)
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
