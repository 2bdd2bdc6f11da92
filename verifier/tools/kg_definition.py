"""KG_Definition: the profile of an entity (label, description, types, aliases) or of a relation
(label, description, aliases, domain and range)."""

from __future__ import annotations

from verifier.kg.base import EntityProfile, RelationProfile
from verifier.tools.base import EvidenceItem, ToolContext, ToolResult
from verifier.tools.names import Resolved, resolve_entity, resolve_relation
from verifier.tools.registry import tool


@tool("KG_Definition", category="kg")
def kg_definition(ctx: ToolContext, name: str) -> ToolResult:
    """Describe an entity (label, description, types, aliases) or a relation (label, description,
    domain and range), to check what a name refers to and what a relation allows.

    Args:
        name: an entity or relation, by label or id (e.g. "Douglas Adams", "Q42", "country of citizenship")
    """
    query = ctx.query
    if query is not None and name.casefold() in {query.relation.casefold(), query.relation_label.casefold()}:
        return _relation_result(ctx, resolve_relation(ctx, name))
    # An exact entity name wins; otherwise a relation name; otherwise a fuzzy entity match.
    entity = resolve_entity(ctx, name)
    if isinstance(entity, Resolved) and not entity.note:
        return _entity_result(ctx, entity)
    relation = resolve_relation(ctx, name)
    if isinstance(relation, Resolved) and (not relation.note or not isinstance(entity, Resolved)):
        return _relation_result(ctx, relation)
    if isinstance(entity, Resolved):
        return _entity_result(ctx, entity)
    return ToolResult(entity.message, ok=False)


def _entity_result(ctx: ToolContext, entity: Resolved) -> ToolResult:
    return _profile_result(ctx, "entity", entity, ctx.kg.entity, EntityProfile.text)


def _relation_result(ctx: ToolContext, relation) -> ToolResult:
    if not isinstance(relation, Resolved):
        return ToolResult(relation.message, ok=False)
    return _profile_result(ctx, "relation", relation, ctx.kg.relation, RelationProfile.text)


def _profile_result(ctx: ToolContext, kind: str, resolved: Resolved, lookup, render) -> ToolResult:
    profile = lookup(resolved.id)
    if profile is None:
        return ToolResult(f"The {kind} {resolved.id} has no profile in {ctx.kg.name}.", ok=False)
    text = render(profile)
    item = EvidenceItem("definition", text, {kind: profile.id, "label": profile.label, **_summary(profile)}, _source(ctx),
                        display=text.splitlines()[0])
    return ToolResult(_with_note(text, resolved.note), [item])


def _summary(profile: EntityProfile | RelationProfile) -> dict:
    """The profile's fields in the item's payload, for a compact rendering (verifier/agent/brief.py)."""
    if isinstance(profile, RelationProfile):
        return {"description": profile.description, "domain": [r.name for r in profile.domain],
                "range": [r.name for r in profile.range]}
    return {"description": profile.description, "types": [r.name for r in profile.types], "aliases": profile.aliases[:5]}


def _source(ctx: ToolContext) -> str:
    return f"{ctx.kg.name} ({ctx.kg.version})"


def _with_note(text: str, note: str) -> str:
    return f"({note})\n{text}" if note else text
