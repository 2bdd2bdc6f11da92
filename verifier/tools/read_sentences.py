"""Read_Sentences: the few sentences of the head's and the tail's text most relevant to a claim.

A small model reads three sentences well and three pages badly, so the text is cut down before it is
read: every sentence of the head's and the tail's encyclopedia passages (and the top web snippets when
a search provider is configured) is scored against the claim — meaning (cosine between the sentence
and the claim in words) plus mentions (a sentence about the head that names the tail, or the other way
round, is what a fact-checker looks for; words of the relation's label count a little) — and the best
few distinct sentences are returned, each an evidence item with its source.
"""

from __future__ import annotations

from dataclasses import dataclass

from verifier.evidence.base import EvidenceError
from verifier.evidence.corpus import sentences
from verifier.memory import encoder
from verifier.structure.entity_text import content_words, entity_names, mention_pattern
from verifier.tools.base import EvidenceItem, ToolContext, ToolResult
from verifier.tools.names import Resolved, resolve_entity, resolve_relation
from verifier.tools.registry import tool

TOP_K = 3
MENTION_BONUS = 0.35
RELATION_WORD_BONUS = 0.05
MIN_WORDS, MAX_CHARS = 4, 400


@dataclass(frozen=True)
class Sentence:
    text: str
    title: str
    source: str
    url: str
    about: str  # the entity id whose text it comes from ("" for web snippets)


def _names(ctx: ToolContext, resolved: Resolved) -> list[str]:
    profile = ctx.kg.entity(resolved.id)
    return entity_names(resolved.label, list(profile.aliases) if profile else [])


def _candidates(ctx: ToolContext, head: Resolved, tail: Resolved, claim: str) -> list[Sentence]:
    found: list[Sentence] = []
    for entity in (head, tail):
        # The entity's short description reads like a sentence ("American actor (born 1956)") and is often the
        # only text a KG has (FB15k-237).
        profile = ctx.kg.entity(entity.id)
        if profile is not None and profile.description:
            found.append(Sentence(f"{entity.label}: {profile.description}.", entity.label, f"{ctx.kg.name} description", "",
                                  entity.id))
        passages = ctx.corpus.entity_passages(entity.id) if ctx.corpus is not None else []
        if not passages and ctx.encyclopedia is not None and entity.label:
            summary = ctx.encyclopedia.summary(entity.label)
            passages = [summary] if summary is not None else []
        for passage in passages:
            found += [Sentence(s, passage.title, passage.source, passage.url, entity.id) for s in sentences(passage.text)]
    if ctx.web is not None:
        try:
            found += [Sentence(h.snippet, h.title, h.source, h.url, "") for h in ctx.web.search(claim, limit=5)]
        except EvidenceError:
            pass  # the encyclopedia sentences still stand; a web outage is not the claim's problem
    unique = {s.text: s for s in found if len(s.text.split()) >= MIN_WORDS}
    return [Sentence(s.text[:MAX_CHARS], s.title, s.source, s.url, s.about) for s in unique.values()]


@dataclass(frozen=True)
class Scored:
    score: float
    names_other_end: bool  # a sentence about one end of the claim names the other
    sentence: Sentence


def rank(candidates: list[Sentence], claim: str, head: Resolved, tail: Resolved, head_names: list[str],
         tail_names: list[str], relation_label: str) -> list[Scored]:
    """Candidates scored against the claim, best first (see the module docstring)."""
    if not candidates:
        return []
    vectors = encoder.encode_recurring([claim, *(s.text for s in candidates)])
    cosine = vectors[1:] @ vectors[0]
    mention_head, mention_tail = mention_pattern(head_names), mention_pattern(tail_names)
    words = set(content_words(relation_label))
    scored = []
    for sentence, similarity in zip(candidates, cosine, strict=True):
        other = mention_tail if sentence.about == head.id else mention_head if sentence.about == tail.id else None
        names_other = bool(other and other.search(sentence.text))
        if not sentence.about:  # a web snippet must name both
            names_other = bool(mention_head and mention_tail and mention_head.search(sentence.text)
                               and mention_tail.search(sentence.text))
        lowered = sentence.text.lower()
        bonus = MENTION_BONUS * names_other + RELATION_WORD_BONUS * sum(w in lowered for w in words)
        scored.append(Scored(float(similarity) + bonus, names_other, sentence))
    scored.sort(key=lambda scored_: -scored_.score)
    return scored


@tool("Read_Sentences", category="external")
def read_sentences(ctx: ToolContext, head: str, relation: str, tail: str) -> ToolResult:
    """Return the 3 sentences of the head's and the tail's encyclopedia text (and web snippets, when web
    search is configured) most relevant to a claim, each with its source.

    Args:
        head: the subject entity, by label or id
        relation: the relation, by label or id
        tail: the object entity, by label or id
    """
    parts = [resolve_entity(ctx, head), resolve_relation(ctx, relation), resolve_entity(ctx, tail)]
    for part in parts:
        if not isinstance(part, Resolved):
            return ToolResult(part.message, ok=False)
    h, r, t = parts
    claim = f"{h.label} {r.label} {t.label}"
    ranked = rank(_candidates(ctx, h, t, claim), claim, h, t, _names(ctx, h), _names(ctx, t), r.label)[:TOP_K]
    if not ranked:
        return ToolResult(f"No encyclopedia text about {h.label} ({h.id}) or {t.label} ({t.id}) is available.")
    shown = [f'- "{r.sentence.text}" ({r.sentence.title}, {r.sentence.source})' for r in ranked]
    items = [EvidenceItem("passage", r.sentence.text, {"entities": [e for e in (r.sentence.about,) if e] or [h.id, t.id],
                                                        "title": r.sentence.title, "url": r.sentence.url,
                                                        "relevance": round(r.score, 3), "mentions": r.names_other_end},
                          r.sentence.url or r.sentence.source, display=line)
             for r, line in zip(ranked, shown, strict=True)]
    header = f"Sentences most relevant to ({h.label}, {r.label}, {t.label}):"
    return ToolResult("\n".join([header, *shown]), items)
