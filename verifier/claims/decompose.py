"""Claim → pseudo-subgraph over one KG, with the configured model, keeping only the triples the claim states.

Text that is no claim (verifier/claims/grounding.not_a_claim) or that names no entity of the KG is refused before
any model is asked. What a small model can get wrong is settled before it writes: the entities the claim mentions
are found by name (every word span of the claim against the KG's labels and aliases) and given as the KG writes
them; only the relations that bear on the claim are offered (those the claim states by their words —
verifier/claims/lexicon.py — and the two closest by meaning, or the six closest); NOT is offered only when the
claim says not, no, never or neither. On a llama.cpp endpoint a GBNF grammar keeps every name the model writes
among those (an entity the claim does not name becomes unknown_i) and writes at most one triple per entity found;
elsewhere each name is checked against the KG and the model gets one repair round naming what it wrote that the
KG does not have. What the model wrote is then read back against the sentence (verifier/claims/grounding.py): a
triple the claim does not state is left out with the reason, one written the wrong way round is turned, and
whether a triple is denied is read from the claim's own negations.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from django.db.models.expressions import RawSQL
from django.db.models.functions import Lower

from verifier.agent.llm import LLM
from verifier.claims import subgraph
from verifier.claims.grounding import (
    LABEL,
    NEGATION,
    STRONG,
    WEAK,
    ClaimRefused,
    LeftOut,
    Reading,
    ground,
    named_apart,
    not_a_claim,
)
from verifier.claims.lexicon import cues
from verifier.claims.subgraph import Named, PseudoTriple, SubgraphError
from verifier.kg.store import PostgresKG
from verifier.memory import encoder
from verifier.models import Entity, KnowledgeGraph, Relation

MAX_SPAN_WORDS = 16  # the longest names of CoDEx run to 13 words
MAX_TOKENS = 160
RELATIONS_OFFERED = 6
SIMILAR_ALSO_OFFERED = 2
_WORD = re.compile(r"[\w'’.-]+", re.UNICODE)


@dataclass
class Decomposition:
    written: str  # the model's reply
    triples: list[PseudoTriple]  # the triples the claim states, names as written
    entities: dict[str, Named]  # written entity name → the KG entity (unknowns absent)
    relations: dict[str, Named]  # written relation label → the KG relation
    mentioned: list[Named] = field(default_factory=list)  # what name search found in the claim
    left_out: list[LeftOut] = field(default_factory=list)  # what the model wrote that the claim does not state
    prompt_tokens: int = 0
    completion_tokens: int = 0
    model: str = ""


def spans(text: str, longest: int = MAX_SPAN_WORDS) -> set[str]:
    """Every run of 1..longest consecutive words of ``text``, lower-cased, trailing punctuation removed; a word
    ending in a possessive ("Adams's") is taken both with and without it."""
    words = [w.strip(".'’") for w in _WORD.findall(text)]
    words = [w for w in words if w]
    found = set()
    for sequence in {tuple(words), tuple(re.sub(r"['’]s$", "", w) for w in words)}:
        found |= {" ".join(sequence[i:j]).lower() for i in range(len(sequence))
                  for j in range(i + 1, min(i + longest, len(sequence)) + 1)}
    return found


def mentioned_entities(kg: KnowledgeGraph, text: str) -> list[Named]:
    """The KG entities whose label or alias is a word span of ``text``, longest names first (a label shared by
    several entities keeps the best-connected one; verifier/claims/grounding.named_apart drops those named only
    inside a longer name or by words that are another entity's label)."""
    found = spans(text)
    rows = (Entity.objects.filter(kg=kg).annotate(lowered=Lower("label")).filter(lowered__in=found)
            .order_by("-degree", "id").values_list("id", "external_id", "label"))
    # Aliases of three letters or fewer ("UK", "US") match only as written: "in" or "us" are words, not states.
    acronyms = [w for w in (w.strip(".'’") for w in _WORD.findall(text)) if 2 <= len(w) <= 3 and w.isupper()]
    alias_hit = RawSQL("EXISTS (SELECT 1 FROM unnest(aliases) a WHERE (length(a) > 3 AND lower(a) = ANY(%s)) OR a = ANY(%s))",
                       [[s for s in found if len(s) > 3], acronyms])
    by_alias = (Entity.objects.filter(kg=kg).alias(hit=alias_hit).filter(hit=True)
                .order_by("-degree", "id").values_list("id", "external_id", "label", "aliases"))
    named: dict[str, Named] = {}
    written: dict[int, list[str]] = {}
    for pk, external_id, label in rows:
        named.setdefault(label.lower(), Named(pk, external_id, label))
    for pk, external_id, label, aliases in by_alias:
        if any((len(a) > 3 and a.lower() in found) or a in acronyms for a in aliases):
            named.setdefault(label.lower(), Named(pk, external_id, label))
            written[pk] = [label, *aliases]
    for entity in named.values():
        written.setdefault(entity.pk, [entity.label])
    apart = named_apart(text, {n.pk: written[n.pk] for n in named.values()})
    return sorted((n for n in named.values() if n.pk in apart), key=lambda n: (-len(n.label), n.label))


def _relations(kg: KnowledgeGraph) -> dict[str, tuple[Named, str]]:
    return {(r.label or r.external_id): (Named(r.pk, r.external_id, r.label or r.external_id), r.description)
            for r in Relation.objects.filter(kg=kg).order_by("label", "id")}


def offered_relations(kg: KnowledgeGraph, claim: str, limit: int = RELATIONS_OFFERED,
                      mentioned: list[Named] | None = None) -> list[str]:
    """The relation labels that bear on the claim: those it states by their words (verifier/claims/lexicon.py,
    the names it mentions masked; the most explicitly stated first) and the SIMILAR_ALSO_OFFERED closest to the claim by meaning
    ("founded in" is no label), or with none stated the ``limit`` closest."""
    mentioned = mentioned_entities(kg, claim) if mentioned is None else mentioned
    names = {pk: [label, *aliases] for pk, label, aliases in
             Entity.objects.filter(pk__in=[m.pk for m in mentioned]).values_list("id", "label", "aliases")}
    reading = Reading(claim, names)
    rows = list(Relation.objects.filter(kg=kg).order_by("label", "id").values_list("label", "external_id", "aliases",
                                                                                    "embedding"))
    strength = {(label or ext): next((kind for kind, _ in reading.stated(cues(ext, label or ext, tuple(aliases)),
                                                                          tuple(names))), "")
                for label, ext, aliases, _ in rows}
    stated = [name for kind in (LABEL, STRONG, WEAK) for name, found in strength.items() if found == kind]
    embedded = [(label or ext, vector) for label, ext, _, vector in rows if vector is not None and (label or ext) not in stated]
    if embedded:
        query = encoder.encode_one(claim)
        embedded.sort(key=lambda pair: -float(query @ pair[1]))
    return [*stated, *(label for label, _ in embedded)][:len(stated) + SIMILAR_ALSO_OFFERED if stated else limit]


def decompose(kg: KnowledgeGraph, claim: str, llm: LLM) -> Decomposition:
    """The triples the claim states, every name mapped to the KG, and what the model wrote beyond them. Raises
    ClaimRefused for text that is no claim or names no entity of the KG (no model asked), SubgraphError for a
    reply that is no pseudo-subgraph over the KG even after the repair round."""
    if refusal := not_a_claim(claim):
        raise ClaimRefused(refusal)
    mentioned = mentioned_entities(kg, claim)
    if not mentioned:
        raise ClaimRefused("the claim names no entity of the KG (by its label or an alias), so the KG cannot represent it")
    relations = _relations(kg)
    offered = offered_relations(kg, claim, mentioned=mentioned)
    messages = subgraph.prompt(claim, [(label, relations[label][1]) for label in offered], [n.label for n in mentioned])
    grammar = None
    allowed = {n.label: n for n in mentioned}
    if getattr(llm, "supports_grammar", False):
        # A claim about k named entities is at most k triples (a tree over them and its unknowns is k + u - 1).
        grammar = subgraph.grammar(allowed, offered, negation=bool(NEGATION.search(claim.lower())), parts=len(mentioned))
    completion = llm.complete(messages, grammar=grammar, max_tokens=MAX_TOKENS, temperature=0)
    tokens = [completion.prompt_tokens, completion.completion_tokens]
    written = completion.text.strip()
    try:
        triples = subgraph.parse(written)
        entities, relation_map, problems = _mapped(kg, triples, relations, allowed)
    except SubgraphError as error:
        triples, problems = [], [str(error)]
    if problems:
        repair = [*messages, {"role": "assistant", "content": written},
                  {"role": "user", "content": "Not usable: " + "; ".join(problems) + ". Write the triples again, "
                                              "using only names the knowledge graph has."}]
        completion = llm.complete(repair, grammar=grammar, max_tokens=MAX_TOKENS, temperature=0)
        tokens = [tokens[0] + completion.prompt_tokens, tokens[1] + completion.completion_tokens]
        written = completion.text.strip()
        triples = subgraph.parse(written)
        entities, relation_map, problems = _mapped(kg, triples, relations, allowed)
        if problems:
            raise SubgraphError("; ".join(problems))
    grounded = ground(kg, claim, triples, entities, relation_map, mentioned)
    return Decomposition(written, grounded.triples, entities, grounded.relations, mentioned, grounded.left_out,
                         tokens[0], tokens[1], completion.model)


def _mapped(kg: KnowledgeGraph, triples: list[PseudoTriple], relations: dict[str, tuple[Named, str]],
            allowed: dict[str, Named]) -> tuple[dict[str, Named], dict[str, Named], list[str]]:
    """Written names → KG entities (the grammar's choice for a label several entities share) and relations, and
    what could not be mapped (with suggestions)."""
    backend = PostgresKG(kg)
    by_label = {label.lower(): named for label, (named, _) in relations.items()}
    entities: dict[str, Named] = {}
    relation_map: dict[str, Named] = {}
    problems: list[str] = []
    for name in dict.fromkeys(n for t in triples for n in (t.head, t.tail) if not subgraph.is_unknown(n)):
        if name in allowed:
            entities[name] = allowed[name]
            continue
        exact = [c for c in backend.find_entities(name, limit=3) if c.match in ("exact", "alias", "id")]
        if exact:
            entity = Entity.objects.filter(kg=kg, external_id=exact[0].id).values_list("id", "external_id", "label").get()
            entities[name] = Named(*entity)
            continue
        guesses = ", ".join(c.label for c in backend.find_entities(name, limit=3))
        problems.append(f"'{name}' is not an entity of the KG" + (f" (did you mean {guesses}?)" if guesses else ""))
    for label in dict.fromkeys(t.relation for t in triples):
        if label.lower() in by_label:
            relation_map[label] = by_label[label.lower()]
            continue
        close = backend.find_relations(label, limit=1)
        if close and close[0].score >= 0.8:
            relation_map[label] = next(n for n, _ in relations.values() if n.external_id == close[0].id)
        else:
            problems.append(f"'{label}' is not a relation of the KG")
    if not any(not subgraph.is_unknown(n) for t in triples for n in (t.head, t.tail)):
        problems.append("every entity is unknown: name at least one entity of the claim")
    return entities, relation_map, problems
