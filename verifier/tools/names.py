"""Name → id resolution for tool arguments: exact id, label or alias, then fuzzy, then by meaning.

Ambiguous names are not guessed: the observation lists the candidates with their descriptions and asks
for the id, which the model can then pass back.
"""

from __future__ import annotations

from dataclasses import dataclass

from verifier.kg.base import WRITTEN_WITH_ID, Candidate
from verifier.tools.base import ToolContext

MAX_CANDIDATES = 5
# A fuzzy or semantic match is taken alone only when it is good and clearly ahead of the next one.
MIN_CONFIDENT_SCORE = 0.45
MIN_LEAD = 0.15


@dataclass(frozen=True)
class Resolved:
    id: str
    label: str
    note: str = ""  # how a non-exact match was made, shown to the model


@dataclass(frozen=True)
class Unresolved:
    message: str


def _describe(candidate: Candidate) -> str:
    description = f" ({candidate.description})" if candidate.description else ""
    return f"{candidate.id}: {candidate.label}{description}"


def _decide(text: str, kind: str, candidates: list[Candidate], kg_name: str) -> Resolved | Unresolved:
    if not candidates:
        return Unresolved(f"No {kind} named {text!r} was found in {kg_name}. Check the spelling or use an id.")
    top = candidates[0]
    if top.match == "id":
        return Resolved(top.id, top.label)
    exact = [c for c in candidates if c.match in ("exact", "alias")]
    if len(exact) == 1:
        note = f"{text!r} matched the alias of {top.id}" if exact[0].match == "alias" else ""
        return Resolved(exact[0].id, exact[0].label, note)
    if not exact:
        second = candidates[1].score if len(candidates) > 1 else 0.0
        if top.score >= MIN_CONFIDENT_SCORE and top.score - second >= MIN_LEAD:
            return Resolved(top.id, top.label, f"{text!r} was read as {top.label!r} ({top.id}, {top.match} match {top.score:.2f})")
    shown = exact or candidates
    listing = "\n".join(f"  - {_describe(c)}" for c in shown[:MAX_CANDIDATES])
    return Unresolved(f"{text!r} is ambiguous in {kg_name}; candidates:\n{listing}\nCall the tool again with the id of the one you mean.")


def resolve_entity(ctx: ToolContext, text: str) -> Resolved | Unresolved:
    written = WRITTEN_WITH_ID.fullmatch(text.strip())
    if written:
        # A name copied from an observation with its id: the id says which entity. An unknown id leaves the
        # label, unless the whole text is itself a label ("Op. 9 [live]").
        by_id = [c for c in ctx.kg.find_entities(written["id"], limit=1) if c.match == "id"]
        if by_id:
            return Resolved(by_id[0].id, by_id[0].label)
        if not any(c.match in ("exact", "alias") for c in ctx.kg.find_entities(text, limit=1)):
            text = written["label"]
    query = ctx.query
    if query is not None:
        # The entities of the triple under test are meant whenever their own names are used.
        for entity_id, label in ((query.head, query.head_label), (query.tail, query.tail_label)):
            if text == entity_id or (label and text.casefold() == label.casefold()):
                return Resolved(entity_id, label)
    return _decide(text, "entity", ctx.kg.find_entities(text, limit=MAX_CANDIDATES), ctx.kg.name)


def resolve_relation(ctx: ToolContext, text: str) -> Resolved | Unresolved:
    query = ctx.query
    if query is not None and (text == query.relation or text.casefold() == query.relation_label.casefold()):
        return Resolved(query.relation, query.relation_label)
    return _decide(text, "relation", ctx.kg.find_relations(text, limit=MAX_CANDIDATES), ctx.kg.name)
