"""Wiki_Evidence: encyclopedia text about one entity (summary + key attributes) or about two (the
sentences that mention both); Read_Passage: the opening of one entity's article, whole."""

from __future__ import annotations

import re

import numpy as np

from verifier.evidence.base import TextPassage
from verifier.evidence.corpus import sentences
from verifier.memory import encoder
from verifier.tools.base import EvidenceItem, ToolContext, ToolResult
from verifier.tools.names import Resolved, resolve_entity
from verifier.tools.registry import tool

SUMMARY_SENTENCES = 3
OPENING_CHARS = 1200  # Read_Passage: about 300 tokens, what a small model reads well in one call
WORD_WINDOW = 30
TOP_SENTENCES = 5


def _names(ctx: ToolContext, resolved: Resolved) -> list[str]:
    profile = ctx.kg.entity(resolved.id)
    names = {resolved.label} if resolved.label else set()
    if profile is not None:
        names |= {a for a in profile.aliases if len(a) > 2}
        if profile.label:
            names.add(re.split(r"[,(]", profile.label)[0].strip())
    return sorted((n for n in names if n), key=len, reverse=True)


def _mention(names: list[str]) -> re.Pattern:
    return re.compile(r"\b(" + "|".join(re.escape(n) for n in names) + r")\b", re.IGNORECASE)


def _passages(ctx: ToolContext, resolved: Resolved) -> list[TextPassage]:
    found = ctx.corpus.entity_passages(resolved.id) if ctx.corpus is not None else []
    if not found and ctx.encyclopedia is not None and resolved.label:
        summary = ctx.encyclopedia.summary(resolved.label)
        found = [summary] if summary is not None else []
    return found


def _item(passage: TextPassage, text: str, entities: list[str], display: str = "") -> EvidenceItem:
    return EvidenceItem("passage", text, {"entities": entities, "title": passage.title, "url": passage.url},
                        passage.url or passage.source, display=display)


def _entity_mode(ctx: ToolContext, entity: Resolved) -> ToolResult:
    profile = ctx.kg.entity(entity.id)
    passages = _passages(ctx, entity)
    attributes = []
    if profile is not None:
        attributes.append(f"Description: {profile.description or '(none)'}")
        if profile.types:
            attributes.append("Type: " + "; ".join(t.name for t in profile.types))
        if profile.aliases:
            attributes.append("Also known as: " + ", ".join(profile.aliases[:8]))
    if not passages:
        text = f"No encyclopedia text about {entity.label or entity.id} ({entity.id}) is available."
        return ToolResult("\n".join([text, *attributes]))
    passage = passages[0]
    summary = " ".join(sentences(passage.text)[:SUMMARY_SENTENCES])
    lines = [f"Summary of {passage.title} ({passage.source}{', ' + passage.url if passage.url else ''}):", summary,
             "Key attributes:", *attributes]
    return ToolResult("\n".join(lines), [_item(passage, summary, [entity.id])])


def _pair_mode(ctx: ToolContext, a: Resolved, b: Resolved) -> ToolResult:
    names_a, names_b = _names(ctx, a), _names(ctx, b)
    mention_a, mention_b = _mention(names_a), _mention(names_b)
    candidates: list[tuple[str, TextPassage]] = []
    seen: set[str] = set()
    pool = [(p, a.id) for p in _passages(ctx, a)] + [(p, b.id) for p in _passages(ctx, b)]
    if ctx.corpus is not None:
        pool += [(p, "") for p in ctx.corpus.search(f"{a.label} {b.label}", limit=10, alpha=ctx.wiki_alpha)]
    for passage, about in pool:
        for sentence in sentences(passage.text):
            if sentence in seen:
                continue
            has_a = about == a.id or mention_a.search(sentence)
            has_b = about == b.id or mention_b.search(sentence)
            # In a passage about A, "He was born in B" speaks of A; elsewhere both must be named close by.
            if about and has_a and has_b and (mention_a.search(sentence) or mention_b.search(sentence)):
                candidates.append((sentence, passage))
            elif not about and has_a and has_b and _within_window(sentence, mention_a, mention_b):
                candidates.append((sentence, passage))
            seen.add(sentence)
    label_a, label_b = a.label or a.id, b.label or b.id
    if not candidates:
        return ToolResult(f"No encyclopedia sentence mentions both {label_a} ({a.id}) and {label_b} ({b.id}).")
    question = f"{label_a} {ctx.query.relation_label if ctx.query else ''} {label_b}"
    vectors = encoder.encode([question] + [s for s, _ in candidates])
    order = np.argsort(-(vectors[1:] @ vectors[0]), kind="stable")[:TOP_SENTENCES]
    chosen = [candidates[i] for i in order]
    shown = [f"- {sentence} [{passage.title}, {passage.source}]" for sentence, passage in chosen]
    items = [_item(passage, sentence, [a.id, b.id], line) for (sentence, passage), line in zip(chosen, shown, strict=True)]
    lines = [f"Sentences mentioning both {label_a} and {label_b}:", *shown]
    return ToolResult("\n".join(lines), items)


def _within_window(sentence: str, mention_a: re.Pattern, mention_b: re.Pattern) -> bool:
    positions_a = [len(sentence[: m.start()].split()) for m in mention_a.finditer(sentence)]
    positions_b = [len(sentence[: m.start()].split()) for m in mention_b.finditer(sentence)]
    return any(abs(x - y) <= WORD_WINDOW for x in positions_a for y in positions_b)


@tool("Wiki_Evidence", category="external")
def wiki_evidence(ctx: ToolContext, entity_a: str, entity_b: str | None = None) -> ToolResult:
    """Read encyclopedia text: with one entity, its summary and key attributes; with two, the sentences
    that mention both of them.

    Args:
        entity_a: an entity, by label or id
        entity_b: a second entity, to find sentences mentioning both (optional)
    """
    first = resolve_entity(ctx, entity_a)
    if not isinstance(first, Resolved):
        return ToolResult(first.message, ok=False)
    if not entity_b:
        return _entity_mode(ctx, first)
    second = resolve_entity(ctx, entity_b)
    if not isinstance(second, Resolved):
        return ToolResult(second.message, ok=False)
    return _pair_mode(ctx, first, second)


def opening_of(text: str) -> str:
    """An article's first OPENING_CHARS characters on one line (the observation shows it under its key), cut at a word."""
    text = " ".join(text.split())
    return text if len(text) <= OPENING_CHARS else text[:OPENING_CHARS].rsplit(" ", 1)[0] + " …"


@tool("Read_Passage", category="external")
def read_passage(ctx: ToolContext, entity: str) -> ToolResult:
    """Return the opening of an entity's encyclopedia article (about 1,200 characters), with its source.

    Args:
        entity: an entity, by label or id
    """
    resolved = resolve_entity(ctx, entity)
    if not isinstance(resolved, Resolved):
        return ToolResult(resolved.message, ok=False)
    passages = _passages(ctx, resolved)
    if not passages:
        return ToolResult(f"No encyclopedia text about {resolved.label or resolved.id} ({resolved.id}) is available.")
    passage = passages[0]
    opening = opening_of(passage.text)
    header = f"Opening of {passage.title} ({passage.source}{', ' + passage.url if passage.url else ''}):"
    return ToolResult(f"{header}\n{opening}", [_item(passage, opening, [resolved.id], display=opening)])
