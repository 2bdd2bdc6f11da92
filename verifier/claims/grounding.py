"""Which of the model's triples a claim states: the pseudo-subgraph read back against the sentence it came from.

A small model asked for a claim's triples adds some the claim never makes ("Douglas Adams was born in Cambridge"
also became "Douglas Adams || country of origin || unknown_1"), and a part the claim does not state must never
decide its verdict. So a triple is kept only when

- every entity it names is named in the claim on words of its own (its label or an alias; not only inside a
  longer name), two entities on different words, and it does not link an entity to itself;
- the claim states its relation (verifier/claims/lexicon.py: the label, the label's words, a cue), its own
  names masked; a *weak* cue, such as the copula of "X is a singer", only where it stands between the entities;
  and a relation stated in a main clause of its own ("…, and South Africa is a member of the Australia Group") is
  stated of the subject that clause names, never of an entity named elsewhere;
- with two named entities, they are of the kinds the relation links (each side shares a type with an entity on
  that side of one of the relation's KG triples), written the way round that fits;
- each ``unknown_i`` is tied through kept triples to an entity the claim names. An unknown in a single triple (an
  existence claim) needs its relation stated more than weakly and an indefinite phrase of the claim to stand for
  ("a city", "something", "has children"; each unknown of a chain takes one too), and must not repeat a triple
  that names the entity; a named triple must not cut short a chain through an unknown with the same relation.

A triple whose two entities are named but whose relation the claim does not state is read with the one relation
the claim does state between them, if there is exactly one and no triple the model wrote as stated already uses
it for one of them ("Paul McCartney is not a singer" written with "member of sports team" is read as
occupation); otherwise it is left out. A second triple of the same relation and pair is left out. Every triple
left out is kept with the reason, for the claim's page.

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
LABEL, STRONG, WEAK = "label", "strong", "weak"  # how a claim states a relation, most explicit first
UNSTATED = "the claim does not say"
_CONJUNCTION = "and|but|while|although|though|whereas|yet"
# Where a clause ends: a semicolon, colon, bracket or dash, a comma before a conjunction or relative pronoun, "but".
CLAUSE_BREAK = re.compile(rf"[;:()\u2013\u2014]|,\s*(?:{_CONJUNCTION}|who|which|whose|where|when)\b|\bbut\b")
# The breaks that open a new main clause, with a subject of its own: "…, and South Africa is a member of …".
MAIN_CLAUSE_BREAK = re.compile(rf";|,\s*(?:{_CONJUNCTION})\b|\bbut\b")
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


def _masked(text: str, spans: list[tuple[int, int]]) -> str:
    characters = list(text)
    for start, end in spans:
        characters[start:end] = MASK * (end - start)
    return "".join(characters)


def _name_pattern(name: str) -> re.Pattern | None:
    """A name as the claim may write it: case-insensitive, or as written for three letters or fewer ("UK", not "uk")."""
    if len(name) > 3:
        return re.compile(rf"(?<!\w){re.escape(name)}(?!\w)", re.IGNORECASE)
    if name.isupper() and len(name) >= 2:
        return re.compile(rf"(?<!\w){re.escape(name)}(?!\w)")
    return None


class Reading:
    """The claim as the checks read it: where each entity is named (``names``: entity → its label and aliases),
    its negations and how many indefinite phrases it has (every name masked), and the words a relation is read
    from (names of two words or more masked, negations blanked)."""

    def __init__(self, text: str, names: dict[int, list[str]]):
        self.text = text
        found: dict[int, list[tuple[int, int]]] = {}
        for pk, written in names.items():
            patterns = [p for p in (_name_pattern(n) for n in written if n) if p is not None]
            found[pk] = sorted({m.span() for p in patterns for m in p.finditer(text)})
        every = {span for spans in found.values() for span in spans}
        # Where each entity is named on its own: "writer" inside "non-fiction writer", or "America" inside "Latin
        # America", names the longer one only.
        self.spans = {pk: [(a, b) for a, b in spans if not any(c <= a and b <= d and (c, d) != (a, b) for c, d in every)]
                      for pk, spans in found.items()}
        self.found = found
        every_name = _masked(_lowered(text), [span for spans in found.values() for span in spans])
        self.negations = [m.start() for m in NEGATION.finditer(every_name)]
        self.breaks = [m.start() for m in CLAUSE_BREAK.finditer(every_name)]
        self.main_breaks = {m.start() for m in MAIN_CLAUSE_BREAK.finditer(every_name)}
        self.indefinites = len(INDEFINITE.findall(every_name))
        # The words a relation is read from: names of two words or more masked, the negations blanked.
        longer = [span for spans in found.values() for span in spans if " " in text[span[0]:span[1]].strip()]
        self.words = NEGATION.sub(lambda m: " " * len(m.group()), _masked(_lowered(text), longer))

    def named(self, pk: int) -> bool:
        return bool(self.spans.get(pk))

    def placed(self, positions: list[int], head: int | None, tail: int | None, *, weak: bool, subject: bool = True) -> bool:
        """Whether a relation's cue at ``positions`` can link the triple's entities where it stands: in the clause
        of the named object (of the named end, when the other is left unnamed) — for a weak cue also between the
        closest of the two names, or after the named subject / before the named object."""
        heads, tails = self.spans.get(head, []) if head else [], self.spans.get(tail, []) if tail else []
        if heads and tails:
            gap = min(max(a, c) - min(b, d) for a, b in heads for c, d in tails)
            closest = [(h, t) for h in heads for t in tails if max(h[0], t[0]) - min(h[1], t[1]) == gap]
            return any(self._clause(p) == self._clause(c) and (not weak or min(b, d) <= p < max(a, c))
                       and (not subject or self._subject_is_an_end(p, (head, tail)))
                       for (a, b), (c, d) in closest for p in positions)
        return (any(self._clause(p) == self._clause(a) and (not weak or p >= b) for a, b in heads for p in positions)
                or any(self._clause(p) == self._clause(a) and (not weak or p < a) for a, _ in tails for p in positions))

    def _clause(self, position: int) -> int:
        return sum(b < position for b in self.breaks)

    def _subject_is_an_end(self, position: int, ends: tuple[int, int]) -> bool:
        """False when the cue at ``position`` is in a new main clause ("…, and X is a member of Y") that names,
        before the cue, only entities other than the triple's ends: that clause says it of its own subject."""
        clause = self._clause(position)
        if not clause or self.breaks[clause - 1] not in self.main_breaks:
            return True
        opened = self.breaks[clause - 1]
        before = {pk for pk, spans in self.spans.items() if any(opened <= a < position for a, _ in spans)}
        return not before or bool(before & set(ends))

    def apart(self, first: int, second: int) -> bool:
        """Whether two entities are named by different words of the claim (one name may stand for two entities)."""
        return any(b <= c or d <= a for a, b in self.spans.get(first, []) for c, d in self.spans.get(second, []))

    def stated(self, relation_cues: RelationCues, ends: tuple[int, ...] = ()) -> list[tuple[str, list[int]]]:
        """How the claim states a relation — LABEL (its label, an alias or all its label's words), STRONG, WEAK
        (verifier/claims/lexicon.py), most explicit first, each with where — the names of the triple's own
        entities ``ends`` masked too (a name is no cue for the triple it is in: "author" is no author here)."""
        words = _masked(self.words, [span for pk in ends for span in self.found.get(pk, [])]) if ends else self.words
        stated = []
        for strength, patterns in ((LABEL, relation_cues.names), (STRONG, relation_cues.strong), (WEAK, relation_cues.weak)):
            found = [p for pattern in patterns for m in pattern.finditer(words) for p in (m.start(), m.end() - 1)]
            if strength == LABEL and relation_cues.stems:
                starts = [[m.start() for m in re.finditer(rf"\b{re.escape(stem)}", words)] for stem in relation_cues.stems]
                if all(starts):
                    found += [p for positions in starts for p in positions]
            if found:
                stated.append((strength, sorted(found)))
        return stated

    def states(self, relation_cues: RelationCues, head: int | None, tail: int | None, *,
               subject: bool = True) -> tuple[str, list[int]]:
        """How explicitly the claim states a relation between a triple's entities (None: left unnamed) with a cue
        that stands where it can link them (``placed``; ``subject=False``: whatever subject its clause names), and
        where: ("", []) when it does not."""
        ends = tuple(pk for pk in (head, tail) if pk is not None)
        return next(((strength, positions) for strength, positions in self.stated(relation_cues, ends)
                     if self.placed(positions, head, tail, weak=strength == WEAK, subject=subject)), ("", []))


def named_apart(text: str, names: dict[int, list[str]]) -> set[int]:
    """The entities of ``names`` (entity → label first, then aliases) the claim names on words of their own: not
    only inside a longer name ("Russian" in "Russian Empire"), and not only on words that are another entity's
    label when they are merely this one's alias ("Cambridge" names the city, not the university called so too)."""
    reading = Reading(text, names)
    labelled = {span for pk, written in names.items() if written and (p := _name_pattern(written[0])) is not None
                for span in (m.span() for m in p.finditer(text)) if span in reading.spans[pk]}
    kept = set()
    for pk, spans in reading.spans.items():
        label = _name_pattern(names[pk][0]) if names[pk] else None
        own_label = {m.span() for m in label.finditer(text)} if label is not None else set()
        if any(span in own_label or span not in labelled for span in spans):
            kept.add(pk)
    return kept


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
    strength: str  # how the claim states its relation: LABEL, STRONG or WEAK
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
    reading = Reading(text, _names(used | {m.pk for m in mentioned}))
    table = _relations(kg)
    fit = _Fit(used)
    grounded = Grounded([], dict(relations))
    found: dict[int, _Candidate] = {}
    reasons: dict[int, str] = {}
    for index, triple in enumerate(triples):
        checked = _checked(triple, reading, entities, relations, table, fit)
        if isinstance(checked, _Candidate):
            found[index] = checked
        else:
            reasons[index] = checked
    # A triple of two named entities whose relation the claim does not state is read with the one it does state
    # between them, unless a triple the model wrote as stated already uses that relation's words.
    direct = list(found.values())
    for index, reason in list(reasons.items()):
        triple = triples[index]
        if not reason.startswith(UNSTATED) or triple.head not in entities or triple.tail not in entities:
            continue
        reread = _reread(triple, reading, entities, grounded.relations, table, fit)
        if reread is None or any(c.triple.relation == reread.triple.relation and {c.triple.head, c.triple.tail}
                                 & {reread.triple.head, reread.triple.tail} for c in direct):
            continue
        found[index] = reread
        reasons[index] = f"{UNSTATED} '{triple.relation}'; read as {replace(reread.triple, negated=False).text()}"
    candidates: list[_Candidate] = []
    for index in sorted(found):
        candidate = found[index]
        if any(c.triple.relation == candidate.triple.relation
               and {c.triple.head, c.triple.tail} == {candidate.triple.head, candidate.triple.tail} for c in candidates):
            reasons[index] = "the same triple again" if index not in reasons else reasons[index].split(";")[0]
            continue
        candidates.append(candidate)
    grounded.left_out = [LeftOut(triples[index].text(), reason) for index, reason in sorted(reasons.items())]
    candidates = _tied(candidates, reading, grounded)
    grounded.triples = _with_polarity(candidates, reading)
    return grounded


def _checked(triple: PseudoTriple, reading: Reading, entities: dict[str, Named], relations: dict[str, Named],
             table: dict[int, tuple[Named, RelationCues]], fit: _Fit) -> _Candidate | str:
    """The triple as the claim states it (turned around where only that fits), or why it is left out (starting
    with UNSTATED when only its relation is wrong: ``_reread`` may find the one the claim states)."""
    for name in (triple.head, triple.tail):
        if not is_unknown(name) and not reading.named(entities[name].pk):
            return f"'{name}' is not named in the claim"
    if triple.head == triple.tail or (triple.head in entities and triple.tail in entities
                                      and entities[triple.head].pk == entities[triple.tail].pk):
        return f"it links '{triple.head}' to itself"
    if triple.head in entities and triple.tail in entities and not reading.apart(entities[triple.head].pk,
                                                                                  entities[triple.tail].pk):
        return f"'{triple.head}' and '{triple.tail}' are the same words of the claim"
    relation, relation_cues = table[relations[triple.relation].pk]
    head, tail = entities.get(triple.head), entities.get(triple.tail)
    strength, positions = reading.states(relation_cues, head and head.pk, tail and tail.pk)
    if head is None or tail is None:  # an unknown end: the named one must fit where the cue is weak
        named, side = (head, "head") if head is not None else (tail, "tail")
        if strength in (LABEL, STRONG) or (strength == WEAK and (named is None or fit(relation.pk, named.pk, side))):
            return _Candidate(triple, strength, positions + _object_positions(triple, reading, entities))
        return f"the claim does not say '{triple.relation}'"
    for h, t, turned in ((head, tail, False), (tail, head, True)):
        if strength and fit(relation.pk, h.pk, "head") and fit(relation.pk, t.pk, "tail"):
            found = PseudoTriple(triple.tail, triple.relation, triple.head, triple.negated) if turned else triple
            return _Candidate(found, strength, positions + _object_positions(found, reading, entities))
    if not strength and reading.states(relation_cues, head.pk, tail.pk, subject=False)[0]:
        return f"the claim says '{triple.relation}' in a clause about another subject"
    if not strength:
        return f"{UNSTATED} '{triple.relation}'"
    return f"{UNSTATED} '{triple.relation}' of them: '{head.label}' and '{tail.label}' are not what it links in the KG"


def _object_positions(triple: PseudoTriple, reading: Reading, entities: dict[str, Named]) -> list[int]:
    return [start for start, _ in reading.spans.get(entities[triple.tail].pk, [])] if triple.tail in entities else []


def _reread(triple: PseudoTriple, reading: Reading, entities: dict[str, Named], relations: dict[str, Named],
            table: dict[int, tuple[Named, RelationCues]], fit: _Fit) -> _Candidate | None:
    """The triple with the one relation the claim states between its two named entities (strong cues before weak
    ones), either way round; None when there is none or more than one."""
    head, tail = entities[triple.head], entities[triple.tail]
    found: dict[str, list[tuple[Named, bool, list[int]]]] = defaultdict(list)
    for relation, relation_cues in table.values():
        strength, positions = reading.states(relation_cues, head.pk, tail.pk)
        if not strength:
            continue
        for h, t, turned in ((head, tail, False), (tail, head, True)):
            if fit(relation.pk, h.pk, "head") and fit(relation.pk, t.pk, "tail"):
                found[strength].append((relation, turned, positions))
                break
    strength = next((kind for kind in (LABEL, STRONG, WEAK) if found[kind]), "")
    if len(found[strength]) != 1:
        return None
    relation, turned, positions = found[strength][0]
    relations.setdefault(relation.label, relation)
    head_name, tail_name = (triple.tail, triple.head) if turned else (triple.head, triple.tail)
    reread = PseudoTriple(head_name, relation.label, tail_name, triple.negated)
    return _Candidate(reread, strength, positions + _object_positions(reread, reading, entities))


def _tied(candidates: list[_Candidate], reading: Reading, grounded: Grounded) -> list[_Candidate]:
    """The candidates whose unknowns stand for something the claim describes (see the module docstring)."""
    while True:
        reason = {index: why for index, candidate in enumerate(candidates)
                  if (why := _untied(candidate, candidates, reading))}
        if not reason:
            reason = _too_many_unknowns(candidates, reading)
        if not reason:
            return candidates
        grounded.left_out += [LeftOut(candidates[i].triple.text(), why) for i, why in sorted(reason.items())]
        candidates = [c for i, c in enumerate(candidates) if i not in reason]


def _untied(candidate: _Candidate, candidates: list[_Candidate], reading: Reading) -> str:
    """Why the candidate's unknown stands for nothing the claim describes, or why it cuts short a chain through
    one ("" when neither)."""
    triple = candidate.triple
    others = [c.triple for c in candidates if c is not candidate]
    chains = {u for c in candidates for u in (c.triple.head, c.triple.tail) if is_unknown(u) and _linked(u, candidates) > 1}
    if not is_unknown(triple.head) and not is_unknown(triple.tail):
        chain = next((o for o in others if o.relation == triple.relation and {o.head, o.tail} & chains
                      and {o.head, o.tail} & {triple.head, triple.tail}), None)
        return f"it cuts short {chain.text()}, which goes through an entity the claim only describes" if chain else ""
    for unknown in (n for n in (triple.head, triple.tail) if is_unknown(n)):
        if not _reaches_named(unknown, [triple, *others]):
            return f"{unknown} is tied to no entity the claim names"
        if unknown in chains:
            continue
        named_end = triple.tail if triple.head == unknown else triple.head
        if any(o.relation == triple.relation and named_end in (o.head, o.tail) and not is_unknown(o.head)
               and not is_unknown(o.tail) for o in others):
            return f"it repeats a triple of the claim with {unknown} for the entity it names"
        if candidate.strength == WEAK:
            return f"the claim does not say '{triple.relation}' of an entity it leaves unnamed"
        if not reading.indefinites:
            return f"the claim describes no entity for {unknown}"
    return ""


def _too_many_unknowns(candidates: list[_Candidate], reading: Reading) -> dict[int, str]:
    """The unknowns of existence triples beyond the indefinite phrases the claim has left for them ("something",
    "a city"; each unknown of a chain takes one too), the least explicitly stated first."""
    chains = {u for c in candidates for u in (c.triple.head, c.triple.tail) if is_unknown(u) and _linked(u, candidates) > 1}
    single = [i for i, c in enumerate(candidates) if any(is_unknown(u) and u not in chains for u in (c.triple.head, c.triple.tail))]
    room = max(reading.indefinites - len(chains), 0)
    if len(single) <= room:
        return {}
    rank = (LABEL, STRONG, WEAK)
    ordered = sorted(single, key=lambda i: (rank.index(candidates[i].strength), i))
    return {i: "the claim describes fewer entities than the triples leave unnamed" for i in ordered[room:]}


def _linked(unknown: str, candidates: list[_Candidate]) -> int:
    return sum(unknown in (c.triple.head, c.triple.tail) for c in candidates)


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
