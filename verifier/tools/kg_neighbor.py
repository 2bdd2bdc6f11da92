"""KG_Neighbor: an entity's one-hop facts, ranked by how close their relation is to a query relation."""

from __future__ import annotations

import numpy as np

from verifier.kg.base import Edge
from verifier.memory import encoder
from verifier.tools import render
from verifier.tools.base import EvidenceItem, ToolContext, ToolResult
from verifier.tools.names import Resolved, resolve_entity, resolve_relation
from verifier.tools.registry import tool

TOP_K = 20
SCAN_LIMIT = 2000  # edges read from a backend that cannot rank by itself


def ranked_edges(ctx: ToolContext, entity_id: str, relation_id: str | None, relation_label: str) -> list[Edge]:
    """Top edges by cosine(query relation, edge relation); the backend ranks when it can (pgvector)."""
    rank = getattr(ctx.kg, "ranked_edges", None)
    if rank is not None:
        return rank(entity_id, relation_id, limit=TOP_K, exclude=ctx.exclude)
    edges = [e for e in ctx.kg.edges(entity_id, limit=SCAN_LIMIT) if e.ids not in ctx.exclude]
    if not relation_label or not edges:
        return edges[:TOP_K]
    labels = sorted({e.relation.name for e in edges})
    vectors = encoder.encode_recurring([relation_label, *labels])
    similarity = dict(zip(labels, vectors[1:] @ vectors[0], strict=True))
    order = np.argsort([-similarity[e.relation.name] for e in edges], kind="stable")
    return [edges[i] for i in order[:TOP_K]]


@tool("KG_Neighbor", category="kg")
def kg_neighbor(ctx: ToolContext, entity: str, relation: str | None = None) -> ToolResult:
    """List up to 20 facts (one-hop triples, both directions) about an entity, the ones whose relation
    is closest in meaning to the given relation first.

    Args:
        entity: the entity, by label or id
        relation: the relation to rank by (defaults to the relation under verification)
    """
    resolved = resolve_entity(ctx, entity)
    if not isinstance(resolved, Resolved):
        return ToolResult(resolved.message, ok=False)
    relation_id, relation_label, notes = None, "", [resolved.note]
    if relation:
        rel = resolve_relation(ctx, relation)
        if isinstance(rel, Resolved):
            relation_id, relation_label, notes = rel.id, rel.label, [*notes, rel.note]
        else:
            relation_label = relation  # rank by the words given, even if no relation has that name
    elif ctx.query is not None:
        relation_id, relation_label = ctx.query.relation, ctx.query.relation_label
    edges = ranked_edges(ctx, resolved.id, relation_id, relation_label)
    name = f"{resolved.label} ({resolved.id})" if resolved.label else resolved.id
    if not edges:
        return ToolResult(f"No facts about {name} were found in {ctx.kg.name} (other than the triple under verification).")
    ranking = f", closest to [{relation_label}] first" if relation_label else ""
    header = f"Facts about {name}{ranking} ({len(edges)} shown; the triple under verification is withheld):"
    lines = [render.edge_from(resolved.id, e) for e in edges]
    source = f"{ctx.kg.name} ({ctx.kg.version})"
    items = [
        EvidenceItem("triple", render.triple(e), {"head": e.head.id, "relation": e.relation.id, "tail": e.tail.id,
                                                   "labels": [e.head.name, e.relation.name, e.tail.name]}, source,
                     display=line)
        for e, line in zip(edges, lines, strict=True)
    ]
    notes = [n for n in notes if n]
    prefix = "".join(f"({n})\n" for n in notes)
    return ToolResult(prefix + header + "\n" + "\n".join(lines), items)
