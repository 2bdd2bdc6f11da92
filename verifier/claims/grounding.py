"""Which of the model's triples a claim states: the pseudo-subgraph read back against the sentence it came from.

A small model asked for a claim's triples adds some the claim never makes ("Douglas Adams was born in Cambridge"
also became "Douglas Adams || country of origin || unknown_1"), and a part the claim does not state must never
decide its verdict. So a triple is kept only when

- every entity it names is named in the claim (its label or an alias, as verifier/claims/decompose.py finds
  them), and it does not link an entity to itself;
- the claim states its relation (verifier/claims/lexicon.py: the label, the label's words, a cue; a *weak* cue
  such as the copula of "X is a singer" only when both entities are of the kinds the relation links in the KG);
- with two named entities, they are of the kinds the relation links (each side shares a type with an entity on
  that side of one of the relation's KG triples), written the way round that fits;
- each ``unknown_i`` is tied through kept triples to an entity the claim names, and an unknown in a single triple
  (an existence claim) has an indefinite phrase of the claim to stand for ("a city", "something", "has children")
  and does not repeat a triple that names the entity.

A triple whose two entities are named but whose relation the claim does not state is read with the one relation
the claim does state between them, if there is exactly one ("Paul McCartney is not a singer" written with
"member of sports team" is read as occupation); otherwise it is left out. Every triple left out is kept with the
reason, for the claim's page.

Whether a triple is denied is read from the sentence, not taken from the model: each negation ("not", "never",
"no longer", "n't", "no", "neither", "nor") denies the triple whose relation cue or named object follows it most
closely; a claim without one denies nothing.

Text that is no claim at all is refused before any model is asked (:func:`not_a_claim`).
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field, replace

from verifier.claims.lexicon import RelationCues, cues
from verifier.claims.subgraph import Named, PseudoTriple, is_unknown
from verifier.models import Entity, KnowledgeGraph, Relation, Triple

MIN_WORDS = 3
MASK = "§"
_WORD = re.compile(r"[^\W\d_]{2,}", re.UNICODE)  # a word of two letters or more
NEGATION = re.compile(r"\b(?:no longer|not(?! only)|never|neither|nor|none|no)\b|n't\b")
# What an unknown of an existence claim stands for: an indefinite phrase the claim does not name.
INDEFINITE = re.compile(rf"\b(?:something|someone|somebody|somewhere|anything|anyone|(?:a|an|some|any|no|another|has|have|had)"
                        rf"\s+(?!{MASK})\w+)")


class ClaimRefused(Exception):
    """Text the KG cannot check as a claim; the message says why, for the claim's page."""


def not_a_claim(text: str) -> str | None:
    """Why ``text`` is no claim to decompose (too short, a question, no words), or None."""
    words = _WORD.findall(text)
    if len(words) < MIN_WORDS:
        return (f"not a claim: a claim is a sentence stating something about entities of the KG, and this has "
                f"{len(words)} word{'s' if len(words) != 1 else ''}")
    if text.rstrip().endswith("?"):
        return "not a claim: this is a question; state what is to be checked (\"Douglas Adams was born in Cambridge.\")"
    return None


@dataclass(frozen=True)
class LeftOut:
    written: str  # the triple as the model wrote it
    reason: str

    def as_dict(self) -> dict:
        return {"written": self.written, "reason": self.reason}


@dataclass
class Grounded:
    triples: list[PseudoTriple]  # the triples the claim states, denied where it denies them
    relations: dict[str, Named]  # relation label → relation, with those a triple was re-read with
    left_out: list[LeftOut] = field(default_factory=list)


def _lowered(text: str) -> str:
    """``text`` lower-cased, character for character (positions stay those of ``text``)."""
    return "".join(c.lower() if len(c.lower()) == 1 else c for c in text)


def _name_pattern(name: str) -> re.Pattern | None:
    """A name as the claim may write it: case-insensitive, or as written for three letters or fewer ("UK", not "uk")."""
    if len(name) > 3:
        return re.compile(rf"(?<!\w){re.escape(name)}(?!\w)", re.IGNORECASE)
    if name.isupper() and len(name) >= 2:
        return re.compile(rf"(?<!\w){re.escape(name)}(?!\w)")
    return None


class Reading:
    """The claim as the checks read it: where each entity is named, and the words left once the names used by
    the triples (and every name of two words or more) are masked and the negations blanked."""

    def __init__(self, text: str, names: dict[int, list[str]], used: set[int]):
        self.text = text
        self.spans: dict[int, list[tuple[int, int]]] = {}
        for pk, written in names.items():
            patterns = [p for p in (_name_pattern(n) for n in written if n) if p is not None]
            self.spans[pk] = sorted({m.span() for p in patterns for m in p.finditer(text)})
        masked = list(_lowered(text))
        for pk, spans in self.spans.items():
            for start, end in spans:
                if pk in used or " " in text[start:end].strip():
                    masked[start:end] = MASK * (end - start)
        masked_text = "".join(masked)
        self.negations = [m.start() for m in NEGATION.finditer(masked_text)]
        self.words = NEGATION.sub(lambda m: " " * len(m.group()), masked_text)
        self.indefinite = bool(INDEFINITE.search(self.words))

    def named(self, pk: int) -> bool:
        return bool(self.spans.get(pk))

    def stated(self, relation_cues: RelationCues) -> tuple[str, list[int]]:
        """("strong" | "weak" | "", where the cues are): how the claim states a relation."""
        for strength, patterns in (("strong", relation_cues.strong), ("weak", relation_cues.weak)):
            found = [p for pattern in patterns for m in pattern.finditer(self.words) for p in (m.start(), m.end() - 1)]
            if strength == "strong" and relation_cues.stems:
                starts = [[m.start() for m in re.finditer(rf"\b{re.escape(stem)}", self.words)] for stem in relation_cues.stems]
                if all(starts):
                    found += [p for positions in starts for p in positions]
            if found:
                return strength, sorted(found)
        return "", []


class _Fit:
    """Whether an entity is of a kind a relation links on a side: it shares a type with an entity on that side of
    one of the relation's triples in the KG (an entity without types fits anything)."""

    def __init__(self, entity_pks: set[int]):
        self.types = dict(Entity.objects.filter(pk__in=entity_pks).values_list("id", "types"))
        self.known: dict[tuple[int, int, str], bool] = {}

    def __call__(self, relation: int, entity: int, side: str) -> bool:
        key = (relation, entity, side)
        if key not in self.known:
            types = self.types.get(entity) or []
            self.known[key] = not types or Triple.objects.filter(relation_id=relation, **{f"{side}__types__overlap": types}).exists()
        return self.known[key]


@dataclass
class _Candidate:
    triple: PseudoTriple
    positions: list[int]  # where the sentence states it: its relation's cues and its named object


def _relations(kg: KnowledgeGraph) -> dict[int, tuple[Named, RelationCues]]:
    return {pk: (Named(pk, ext, label or ext), cues(ext, label or ext, tuple(aliases)))
            for pk, ext, label, aliases in Relation.objects.filter(kg=kg).values_list("id", "external_id", "label", "aliases")}


def _names(pks: set[int]) -> dict[int, list[str]]:
    return {pk: [label, *aliases] for pk, label, aliases in Entity.objects.filter(pk__in=pks).values_list("id", "label", "aliases")}


def ground(kg: KnowledgeGraph, text: str, triples: list[PseudoTriple], entities: dict[str, Named],
           relations: dict[str, Named], mentioned: list[Named]) -> Grounded:
    """The triples of ``triples`` that ``text`` states (see the module docstring), and those left out with why."""
    used = {entities[n].pk for t in triples for n in (t.head, t.tail) if n in entities}
    reading = Reading(text, _names(used | {m.pk for m in mentioned}), used)
    table = _relations(kg)
    fit = _Fit(used)
    grounded = Grounded([], dict(relations))
    candidates: list[_Candidate] = []
    for triple in triples:
        checked = _checked(triple, reading, entities, grounded.relations, table, fit)
        if isinstance(checked, str):
            grounded.left_out.append(LeftOut(triple.text(), checked))
            continue
        if checked.triple != triple and checked.triple.relation != triple.relation:
            grounded.left_out.append(LeftOut(triple.text(), f"the claim does not say '{triple.relation}'; read as "
                                                            f"{replace(checked.triple, negated=False).text()}"))
        if any(c.triple.head == checked.triple.head and c.triple.relation == checked.triple.relation
               and c.triple.tail == checked.triple.tail for c in candidates):
            if checked.triple == triple:
                grounded.left_out.append(LeftOut(triple.text(), "the same triple again"))
            continue
        candidates.append(checked)
    candidates = _tied(candidates, reading, grounded)
    grounded.triples = _with_polarity(candidates, reading)
    return grounded


def _checked(triple: PseudoTriple, reading: Reading, entities: dict[str, Named], relations: dict[str, Named],
             table: dict[int, tuple[Named, RelationCues]], fit: _Fit) -> _Candidate | str:
    """The triple as the claim states it (turned around, or re-read with the relation the claim states), or why
    it is left out."""
    for name in (triple.head, triple.tail):
        if not is_unknown(name) and not reading.named(entities[name].pk):
            return f"'{name}' is not named in the claim"
    if triple.head == triple.tail or (triple.head in entities and triple.tail in entities
                                      and entities[triple.head].pk == entities[triple.tail].pk):
        return f"it links '{triple.head}' to itself"
    relation, relation_cues = table[relations[triple.relation].pk]
    strength, positions = reading.stated(relation_cues)
    head, tail = entities.get(triple.head), entities.get(triple.tail)
    if head is None or tail is None:  # an unknown end: the named one must fit where the cue is weak
        named, side = (head, "head") if head is not None else (tail, "tail")
        if strength == "strong" or (strength == "weak" and (named is None or fit(relation.pk, named.pk, side))):
            return _Candidate(triple, positions + _object_positions(triple, reading, entities))
        return f"the claim does not say '{triple.relation}'"
    for h, t, turned in ((head, tail, False), (tail, head, True)):
        if strength and fit(relation.pk, h.pk, "head") and fit(relation.pk, t.pk, "tail"):
            found = PseudoTriple(triple.tail, triple.relation, triple.head, triple.negated) if turned else triple
            return _Candidate(found, positions + _object_positions(found, reading, entities))
    return _reread(triple, reading, entities, relations, table, fit) or (
        f"the claim does not say '{triple.relation}'" if not strength
        else f"'{head.label}' and '{tail.label}' are not what '{triple.relation}' links in the KG")


def _object_positions(triple: PseudoTriple, reading: Reading, entities: dict[str, Named]) -> list[int]:
    return [start for start, _ in reading.spans.get(entities[triple.tail].pk, [])] if triple.tail in entities else []


def _reread(triple: PseudoTriple, reading: Reading, entities: dict[str, Named], relations: dict[str, Named],
            table: dict[int, tuple[Named, RelationCues]], fit: _Fit) -> _Candidate | None:
    """The triple with the one relation the claim states between its two named entities (strong cues before weak
    ones), either way round; None when there is none or more than one."""
    head, tail = entities[triple.head], entities[triple.tail]
    found: dict[str, list[tuple[Named, bool, list[int]]]] = defaultdict(list)
    for relation, relation_cues in table.values():
        strength, positions = reading.stated(relation_cues)
        if not strength:
            continue
        for h, t, turned in ((head, tail, False), (tail, head, True)):
            if fit(relation.pk, h.pk, "head") and fit(relation.pk, t.pk, "tail"):
                found[strength].append((relation, turned, positions))
                break
    options = found["strong"] or found["weak"]
    if len(options) != 1:
        return None
    relation, turned, positions = options[0]
    relations.setdefault(relation.label, relation)
    head_name, tail_name = (triple.tail, triple.head) if turned else (triple.head, triple.tail)
    reread = PseudoTriple(head_name, relation.label, tail_name, triple.negated)
    return _Candidate(reread, positions + _object_positions(reread, reading, entities))


def _tied(candidates: list[_Candidate], reading: Reading, grounded: Grounded) -> list[_Candidate]:
    """The candidates whose unknowns stand for something the claim describes (see the module docstring)."""
    while True:
        reason: dict[int, str] = {}
        for index, candidate in enumerate(candidates):
            triple = candidate.triple
            for unknown in (n for n in (triple.head, triple.tail) if is_unknown(n)):
                others = [c.triple for c in candidates if c is not candidate]
                if not _reaches_named(unknown, [triple, *others]):
                    reason[index] = f"{unknown} is tied to no entity the claim names"
                elif not any(unknown in (o.head, o.tail) for o in others):
                    named_end = triple.tail if triple.head == unknown else triple.head
                    if any(o.relation == triple.relation and named_end in (o.head, o.tail) and not is_unknown(o.head)
                           and not is_unknown(o.tail) for o in others):
                        reason[index] = f"it repeats a triple of the claim with {unknown} for the entity it names"
                    elif not reading.indefinite:
                        reason[index] = f"the claim describes no entity for {unknown}"
        if not reason:
            return candidates
        grounded.left_out += [LeftOut(candidates[i].triple.text(), why) for i, why in sorted(reason.items())]
        candidates = [c for i, c in enumerate(candidates) if i not in reason]


def _reaches_named(unknown: str, triples: list[PseudoTriple]) -> bool:
    seen, frontier = {unknown}, [unknown]
    while frontier:
        node = frontier.pop()
        for t in triples:
            if node in (t.head, t.tail):
                other = t.tail if t.head == node else t.head
                if not is_unknown(other):
                    return True
                if other not in seen:
                    seen.add(other)
                    frontier.append(other)
    return False


def _with_polarity(candidates: list[_Candidate], reading: Reading) -> list[PseudoTriple]:
    """The triples, each denied when a negation of the claim bears on it (see the module docstring)."""
    denied = [False] * len(candidates)
    for negation in reading.negations:
        following = [(min(p for p in c.positions if p > negation), i) for i, c in enumerate(candidates)
                     if any(p > negation for p in c.positions)]
        if following:
            denied[min(following)[1]] = True
    if reading.negations and not any(denied) and candidates:
        # No cue of any triple follows the negation: the model's own NOT, or the only triple.
        marked = [c.triple.negated for c in candidates]
        denied = marked if any(marked) else [len(candidates) == 1]
    return [replace(c.triple, negated=d) for c, d in zip(candidates, denied, strict=True)]
