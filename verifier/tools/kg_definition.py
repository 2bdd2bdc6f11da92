"""KG_Definition: the profile of an entity (label, description, types, aliases) or of a relation
(label, description, aliases, domain and range)."""

from __future__ import annotations

from verifier.kg.base import EntityProfile, Ref, RelationProfile
from verifier.tools.base import EvidenceItem, ToolContext, ToolResult
from verifier.tools.names import Resolved, resolve_entity, resolve_relation
from verifier.tools.registry import tool


def _refs(refs: list[Ref]) -> str:
    return "; ".join(f"{r.name} ({r.id})" if r.label else r.id for r in refs) or "(none recorded)"


def entity_text(profile: EntityProfile) -> str:
    lines = [
        f"Entity Profile: {profile.id}",
        f"Label: {profile.label or '(no label)'}",
        f"Description: {profile.description or '(no description)'}",
        f"Type: {_refs(profile.types)}",
        f"Aliases: {', '.join(profile.aliases) or '(none)'}",
    ]
    return "\n".join(lines)


def relation_text(profile: RelationProfile) -> str:
    lines = [
        f"Relation Profile: {profile.id}",
        f"Label: {profile.label or '(no label)'}",
        f"Description: {profile.description or '(no description)'}",
        f"Aliases: {', '.join(profile.aliases) or '(none)'}",
        f"Subject Constraint (Domain): {_refs(profile.domain)}",
        f"Object Constraint (Range): {_refs(profile.range)}",
    ]
    if profile.schema_source == "derived":
        lines.append("Note: this KG declares no schema for the relation; domain and range are the most common "
                     "types of its observed subjects and objects.")
    return "\n".join(lines)


@tool("KG_Definition", category="kg")
def kg_definition(ctx: ToolContext, name: str) -> ToolResult:
    """Describe an entity (label, description, types, aliases) or a relation (label, description,
    domain and range), to check what a name refers to and what a relation allows.

    Args:
        name: an entity or relation, by label or id (e.g. "Douglas Adams", "Q42", "country of citizenship")
    """
    relation = resolve_relation(ctx, name)
    relation_is_exact = isinstance(relation, Resolved) and not relation.note
    if not relation_is_exact:
        entity = resolve_entity(ctx, name)
        if isinstance(entity, Resolved):
            profile = ctx.kg.entity(entity.id)
            if profile is not None:
                text = entity_text(profile)
                source = f"{ctx.kg.name} ({ctx.kg.version})"
                item = EvidenceItem("definition", text, {"entity": profile.id, "label": profile.label}, source)
                return ToolResult(_with_note(text, entity.note), [item])
        if not isinstance(relation, Resolved):
            return ToolResult(entity.message if not isinstance(entity, Resolved) else relation.message, ok=False)
    profile = ctx.kg.relation(relation.id)
    if profile is None:
        return ToolResult(f"The relation {relation.id} has no profile in {ctx.kg.name}.", ok=False)
    text = relation_text(profile)
    item = EvidenceItem("definition", text, {"relation": profile.id, "label": profile.label}, f"{ctx.kg.name} ({ctx.kg.version})")
    return ToolResult(_with_note(text, relation.note), [item])


def _with_note(text: str, note: str) -> str:
    return f"({note})\n{text}" if note else text
