"""Claim → pseudo-subgraph over one KG, with the configured model.

What a small model can get wrong is settled before it writes: the entities the claim mentions are found by name
(every word span of the claim against the KG's labels and aliases) and given as the KG writes them; only the
relations that bear on the claim are offered (the labels the claim uses verbatim and the two closest by meaning, or
the six closest); NOT is
offered only when the claim says not, no, never or neither. On a llama.cpp endpoint a GBNF grammar keeps every name
the model writes among those (an entity the claim does not name becomes unknown_i; with no entity found by name,
every entity label of a KG of at most GRAMMAR_ENTITY_LIMIT entities) and writes at most one triple per entity
found; elsewhere each name is checked against the
KG and the model gets one repair round naming what it wrote that the KG does not have. A triple written against
its relation's schema (the subject fits the relation's range and the object its domain) is turned around.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from django.db.models.expressions import RawSQL
from django.db.models.functions import Lower

from verifier.agent.llm import LLM
from verifier.claims import subgraph
from verifier.claims.subgraph import PseudoTriple, SubgraphError
from verifier.kg.store import PostgresKG
from verifier.memory import encoder
from verifier.models import Entity, KnowledgeGraph, Relation

GRAMMAR_ENTITY_LIMIT = 5000
MAX_SPAN_WORDS = 6
MAX_TOKENS = 160
RELATIONS_OFFERED = 6
SIMILAR_ALSO_OFFERED = 2
_WORD = re.compile(r"[\w'’.-]+", re.UNICODE)
_NEGATION_CUE = re.compile(r"\b(not|no|never|neither|nor|none)\b|n't\b", re.IGNORECASE)


@dataclass(frozen=True)
class Named:
    """A KG entity or relation as the pseudo-subgraph names it."""

    pk: int
    external_id: str
    label: str


@dataclass
class Decomposition:
    written: str  # the model's reply
    triples: list[PseudoTriple]  # names as written
    entities: dict[str, Named]  # written entity name → the KG entity (unknowns absent)
    relations: dict[str, Named]  # written relation label → the KG relation
    mentioned: list[Named] = field(default_factory=list)  # what name search found in the claim
    prompt_tokens: int = 0
    completion_tokens: int = 0
    model: str = ""


def spans(text: str, longest: int = MAX_SPAN_WORDS) -> set[str]:
    """Every run of 1..longest consecutive words of ``text``, lower-cased, trailing punctuation removed."""
    words = [w.strip(".'’") for w in _WORD.findall(text)]
    words = [w for w in words if w]
    return {" ".join(words[i:j]).lower() for i in range(len(words)) for j in range(i + 1, min(i + longest, len(words)) + 1)}


def mentioned_entities(kg: KnowledgeGraph, text: str) -> list[Named]:
    """The KG entities whose label or alias is a word span of ``text``, longest names first (a label shared by
    several entities keeps the best-connected one)."""
    found = spans(text)
    rows = (Entity.objects.filter(kg=kg).annotate(lowered=Lower("label")).filter(lowered__in=found)
            .order_by("-degree", "id").values_list("id", "external_id", "label"))
    # Aliases of three letters or fewer ("UK", "US") match only as written: "in" or "us" are words, not states.
    acronyms = [w for w in _WORD.findall(text) if 2 <= len(w) <= 3 and w.isupper()]
    alias_hit = RawSQL("EXISTS (SELECT 1 FROM unnest(aliases) a WHERE (length(a) > 3 AND lower(a) = ANY(%s)) OR a = ANY(%s))",
                       [[s for s in found if len(s) > 3], acronyms])
    by_alias = (Entity.objects.filter(kg=kg).alias(hit=alias_hit).filter(hit=True)
                .order_by("-degree", "id").values_list("id", "external_id", "label", "aliases"))
    named: dict[str, Named] = {}
    for pk, external_id, label in rows:
        named.setdefault(label.lower(), Named(pk, external_id, label))
    for pk, external_id, label, aliases in by_alias:
        if any((len(a) > 3 and a.lower() in found) or a in acronyms for a in aliases):
            named.setdefault(label.lower(), Named(pk, external_id, label))
    return sorted(named.values(), key=lambda n: (-len(n.label), n.label))


def _entity_names(kg: KnowledgeGraph, mentioned: list[Named]) -> dict[str, Named]:
    """label → entity for the names the grammar allows (see the module docstring)."""
    if mentioned or Entity.objects.filter(kg=kg).count() > GRAMMAR_ENTITY_LIMIT:
        return {n.label: n for n in mentioned}
    names: dict[str, Named] = {}
    for pk, external_id, label in Entity.objects.filter(kg=kg).exclude(label="").order_by("-degree", "id").values_list(
            "id", "external_id", "label"):
        names.setdefault(label, Named(pk, external_id, label))
    return names


def _relations(kg: KnowledgeGraph) -> dict[str, tuple[Named, str]]:
    return {(r.label or r.external_id): (Named(r.pk, r.external_id, r.label or r.external_id), r.description)
            for r in Relation.objects.filter(kg=kg).order_by("label", "id")}


def offered_relations(kg: KnowledgeGraph, claim: str, limit: int = RELATIONS_OFFERED) -> list[str]:
    """The relation labels that bear on the claim: those it uses verbatim (a label inside a longer one it uses
    is left out) and the SIMILAR_ALSO_OFFERED closest to the claim by meaning ("founded in" is no label), or with
    no label used verbatim the ``limit`` closest."""
    lowered = f" {' '.join(_WORD.findall(claim.lower()))} "
    rows = list(Relation.objects.filter(kg=kg).values_list("label", "external_id", "embedding"))
    verbatim = [label for label, _, _ in rows if label and f" {label.lower()} " in lowered]
    verbatim = [v for v in verbatim if not any(v != w and v.lower() in w.lower() for w in verbatim)]
    embedded = [(label or ext, vector) for label, ext, vector in rows if vector is not None and (label or ext) not in verbatim]
    if embedded:
        query = encoder.encode_one(claim)
        embedded.sort(key=lambda pair: -float(query @ pair[1]))
    return [*verbatim, *(label for label, _ in embedded)][:len(verbatim) + SIMILAR_ALSO_OFFERED if verbatim else limit]


def decompose(kg: KnowledgeGraph, claim: str, llm: LLM) -> Decomposition:
    """The claim's pseudo-subgraph with every name mapped to the KG; raises SubgraphError with what was wrong."""
    mentioned = mentioned_entities(kg, claim)
    relations = _relations(kg)
    offered = offered_relations(kg, claim)
    messages = subgraph.prompt(claim, [(label, relations[label][1]) for label in offered], [n.label for n in mentioned])
    grammar = None
    allowed = _entity_names(kg, mentioned)
    if getattr(llm, "supports_grammar", False) and allowed:
        # A claim about k named entities is at most k triples (a tree over them and its unknowns is k + u - 1).
        grammar = subgraph.grammar(allowed, offered, negation=bool(_NEGATION_CUE.search(claim)),
                                   parts=len(mentioned) if mentioned else subgraph.MAX_PARTS)
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
    triples = [_oriented(t, entities, relation_map) for t in triples]
    return Decomposition(written, triples, entities, relation_map, mentioned, tokens[0], tokens[1], completion.model)


def _oriented(triple: PseudoTriple, entities: dict[str, Named], relations: dict[str, Named]) -> PseudoTriple:
    """The triple turned around when only the reverse fits its relation's declared domain and range."""
    if triple.head not in entities or triple.tail not in entities:
        return triple
    relation = Relation.objects.filter(pk=relations[triple.relation].pk).values_list("domain", "range").get()
    domain, range_ = set(relation[0]), set(relation[1])
    if not domain or not range_:
        return triple
    types = dict(Entity.objects.filter(pk__in=[entities[triple.head].pk, entities[triple.tail].pk]).values_list("id", "types"))
    head, tail = set(types.get(entities[triple.head].pk, [])), set(types.get(entities[triple.tail].pk, []))
    if not (head & domain and tail & range_) and (tail & domain and head & range_):
        return PseudoTriple(triple.tail, triple.relation, triple.head, triple.negated)
    return triple


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
