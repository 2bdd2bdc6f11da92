"""How KG facts are written in observations (the notation of the method's papers)."""

from __future__ import annotations

from verifier.kg.base import Edge, KGPath, Ref


def node(ref: Ref) -> str:
    return f"({ref.distinct_name})"


def edge_from(anchor_id: str, edge: Edge) -> str:
    """An edge as seen from one of its ends: ``(A) -> [r] -> (B)`` or ``(A) <- [r] <- (B)``."""
    if edge.head.id == anchor_id:
        return f"{node(edge.head)} -> [{edge.relation.name}] -> {node(edge.tail)}"
    return f"{node(edge.tail)} <- [{edge.relation.name}] <- {node(edge.head)}"


def triple(edge: Edge) -> str:
    return f"{node(edge.head)} -[{edge.relation.name}]-> {node(edge.tail)}"


def path(kg_path: KGPath) -> str:
    """``(A) -[r1]-> (B) <-[r2]- (C)``: arrows show each edge's direction as walked from A."""
    first = kg_path.steps[0]
    start = first.edge.head if first.forward else first.edge.tail
    parts = [node(start)]
    for step in kg_path.steps:
        if step.forward:
            parts.append(f"-[{step.edge.relation.name}]-> {node(step.edge.tail)}")
        else:
            parts.append(f"<-[{step.edge.relation.name}]- {node(step.edge.head)}")
    return " ".join(parts)
