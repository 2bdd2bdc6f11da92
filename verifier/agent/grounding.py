"""What the language model's words may be shown as. Everything the model writes that a curator reads as the agent's
(the impression, the plan, the thoughts, an explanation) is read sentence by sentence and each sentence is one of:

- grounded: it cites evidence keys, every key is in the run's support set, and the cited items hold what it names —
  every entity (by label or alias) and every number in it, and, when it names both ends of the claim, one cited
  item naming both that is not a path through others or a score of the claim itself read as a fact;
- unsupported: it speaks of the KG or a source (or cites a key) and is not grounded — withheld, with the reason;
- adopted: it repeats an instruction found inside the data the model read (a description, a passage, a past case,
  the claim's labels), or is itself worded as an instruction about verdicts — withheld, naming where it was found;
- the model's own reading: a statement about the world that names no source — shown, marked unverified;
- an intention ("Now check …", a question) — shown as it is.

The check is mechanical: names and numbers, not meaning. It cannot tell "born in Paris" from "died in Paris" when
the cited item names both; it does catch a place, a person, a country or a figure no cited item holds, which is
how a small model misreads a brief. Instructions in data are found by their wording (``instructions_in``); an
answer given while the data held one is not taken as evidence (verifier/agent/verdict.py).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from verifier.agent.parsing import cited_keys
from verifier.agent.steps import Claim, KeyedItem, Memory

GROUNDED, UNSUPPORTED, ADOPTED, OWN, INTENT = "grounded", "unsupported", "adopted", "own", "intent"
WITHHELD = (UNSUPPORTED, ADOPTED)

# Wording that addresses the one reading the data (a model, its instructions, its answer), never the world: the
# answer's own form, which the model is asked to write and data has no business holding, and directives.
_ANSWER_FORM = [r"\bfinal\s+answer\b", r"\[\s*(correct|incorrect|true|false|not enough evidence)\s*\]"]
_DIRECTIVE = [
    r"\b(ignore|disregard|forget|override|bypass)\b[^.!?\n]{0,40}\b(instructions?|prompts?|rules?|directions?|guidelines?|"
    r"previous|prior|above|system|evidence)\b",
    r"\b(you|assistant|the model|language model|ai|the agent|verifier|fact[- ]checker)\b[^.!?\n]{0,30}\b(must|should|shall|"
    r"have to|need to|are to|will)\b[^.!?\n]{0,30}\b(answer|say|respond|reply|output|write|state|conclude|judge|mark|return|"
    r"treat|consider|accept|trust)\b",
    r"\b(answer|respond|reply|output|say|write|mark|judge|label)\b\s+(it\s+|this\s+|the claim\s+|them\s+)?(with\s+|as\s+)?"
    r"[\"'“‘]?(correct|incorrect|true|false)\b",
    r"\b(every|all|any|each)\s+(claims?|statements?|facts?|triples?)\b[^.!?\n]{0,60}\b(is|are|must be|should be)\s+"
    r"(true|false|correct|incorrect|verified|accurate|wrong)\b",
    r"\b(system|developer)\s+(prompt|message|instructions?)\b",
    r"\bnew\s+instructions?\b",
]
_INSTRUCTION = re.compile("|".join(_ANSWER_FORM + _DIRECTIVE), re.IGNORECASE)  # in data
_ANSWER_FORMS = re.compile("|".join(_ANSWER_FORM), re.IGNORECASE)
_DIRECTIVE_WORDING = re.compile("|".join(_DIRECTIVE), re.IGNORECASE)  # in the model's words, which use the answer's form

# Words that say a sentence speaks of the KG or of a source.
_SOURCE = re.compile(
    r"\b(kg|knowledge[- ]graph|graph|brief|evidence|sources?|passages?|sentences?|articles?|texts?|wikipedia|wiki|web|"
    r"search|snippets?|results?|observations?|records?|data|database|triples?|paths?|neighbou?rs?|facts?|rules?|"
    r"structural|plausibility|probability|profiles?|definitions?|descriptions?|reference|memor(y|ies)|past cases?|"
    r"according|listed|lists|states|stated|shows|showed|says|said|mentions|mentioned|confirms|confirmed|indicates)\b",
    re.IGNORECASE)
# What the model means to do next: a question, or a sentence opening (after "now", "next", …) with an imperative or
# with "I need to", "let me", "to find …".
_INTENT = re.compile(r"\?\s*$|^[\W_]*((now|next|first|then|so|finally)\b[,:]?\s+)?(check|look|find|see|verify|search|read|use|"
                     r"call|give|try|compare|confirm|fetch|get|query|ask|investigate|examine|consult|to\s+\w+|let\s+me|let's|"
                     r"(i|we)\s+(need|will|should|must|want|have|am going|shall|can|could|would)\b)", re.IGNORECASE)
_HEADER = re.compile(r"^\s*=+[^=\n]*=+\s*$")  # "=== Strategic Plan ===": the form's own header
_CONNECTED = re.compile(r"\b(connect\w*|link\w*|paths?|through|via|relat\w*|share\w*|both|same)\b", re.IGNORECASE)
_SCORE = re.compile(r"\b(probab\w*|plausib\w*|scores?|likel\w*|rules?|predict\w*|calibrat\w*|models?|rank\w*|unlikely)\b",
                    re.IGNORECASE)
_NUMBER = re.compile(r"(?<![\w.])\d+(?:[.,]\d+)?(?![\w])")
_STEP_LABEL = re.compile(r"^(\s*\[?\s*step\s*\d+\s*\]?\s*[:.]?\s*|)(.*)$", re.IGNORECASE)
_STEP_NUMBER = re.compile(r"\b(step|steps)\s+\d+", re.IGNORECASE)
_CAPITALISED = re.compile(r"[A-ZÀ-ÖØ-Þ][\w'’-]*(?:\s+(?:(?:of|de|da|di|del|von|van|der|den|du|la|le|y|the|and)\s+)?"
                          r"[A-ZÀ-ÖØ-Þ][\w'’-]*)*")
# Capitalised words that name no entity: sentence openers, the answer's own words, the sources, the tools.
_NOT_NAMES = {
    "a", "an", "the", "this", "that", "these", "those", "it", "its", "he", "she", "they", "his", "her", "their", "there",
    "in", "on", "at", "and", "but", "so", "or", "as", "if", "yes", "no", "not", "to", "of", "for", "with", "by", "from",
    "i", "we", "my", "our", "because", "since", "therefore", "thus", "however", "also", "both", "neither", "none",
    "correct", "incorrect", "true", "false", "final", "answer", "thought", "action", "observation", "step", "check",
    "give", "claim", "kg", "knowledge", "graph", "brief", "evidence", "wikipedia", "wiki", "web", "relation", "rules",
    "rule", "structural", "text", "past", "case", "initial", "impression", "strategic", "plan", "entities", "entity",
    "what", "which", "who", "where", "when", "how", "why", "is", "was", "are", "were", "has", "had", "have", "be",
    "according", "based", "given", "considering", "plausibility", "probability", "connections", "closest", "related",
    "facts", "fact", "sentence", "sentences", "passage", "article", "reference", "model", "subject", "object", "type",
    "types", "types:", "now", "next", "first", "then", "let", "need", "mandatory", "judgment", "verdict", "probe",
    "nothing", "all", "every", "any", "each", "one", "two", "three", "dr", "mr", "mrs", "ms", "st",
}
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"'”’)]?\s+(?=[\[(\"“A-ZÀ-ÖØ-Þ0-9])|\n+")
_ABBREVIATION = re.compile(r"(?:\b[A-Z]|\b(?:St|Dr|Mr|Mrs|Ms|Jr|Sr|Prof|Gen|Col|Lt|Rev|vs|etc|e\.g|i\.e|cf|No|Vol|pp))\.$")


def normal(text: str) -> str:
    """Case, accents and punctuation folded away: what the check compares."""
    text = unicodedata.normalize("NFKD", text.casefold())
    text = "".join(c for c in text if not unicodedata.combining(c))
    return " ".join(re.findall(r"\w+(?:[.,]\d+)?", text))


def sentences(text: str) -> list[str]:
    """``text`` cut into sentences (not after an initial or a common abbreviation)."""
    parts, current = [], ""
    for piece in _SENTENCE_END.split(text.strip()):
        if piece is None:
            continue
        current = f"{current} {piece}".strip() if current else piece.strip()
        if current and not _ABBREVIATION.search(current):
            parts.append(current)
            current = ""
    if current:
        parts.append(current)
    return [p for p in parts if p]


def instructions_in(text: str) -> list[str]:
    """The sentences of ``text`` worded as instructions to whoever reads it about answers and verdicts."""
    return [s for s in sentences(text) if _INSTRUCTION.search(s)]


_FORMAT_WORDS = {"final", "answer", "because", "correct", "incorrect"}


def _echoes(said: str, instruction: str) -> bool:
    """Whether ``said`` repeats a run of the instruction's words: five (or all of them, when it has fewer, but at
    least two) in a row, leaving out the answer format's own words."""
    words = [w for w in normal(instruction).split() if w not in _FORMAT_WORDS] or normal(instruction).split()
    if len(words) < 2:
        return False
    run = min(5, len(words))
    haystack = f" {normal(said)} "
    return any(f" {' '.join(words[i:i + run])} " in haystack for i in range(len(words) - run + 1))


@dataclass(frozen=True)
class Checked:
    """One sentence as checked: what it is, and for a withheld one, why."""

    text: str
    status: str
    reason: str = ""

    @property
    def shown(self) -> str:
        if self.status in WITHHELD:
            return f"[withheld: {self.reason}]"
        if self.status == OWN:
            return f"{self.text} [unverified: the model's own reading]"
        return self.text


@dataclass(frozen=True)
class Reading:
    """A text the model wrote, as checked sentence by sentence."""

    parts: tuple[Checked, ...] = ()

    @property
    def shown(self) -> str:
        return " ".join(part.shown for part in self.parts)

    @property
    def grounded(self) -> str:
        """Its grounded sentences alone: what may stand as an explanation."""
        return " ".join(part.text for part in self.parts if part.status == GROUNDED)

    @property
    def withheld(self) -> list[Checked]:
        return [part for part in self.parts if part.status in WITHHELD]

    @property
    def adopted(self) -> bool:
        return any(part.status == ADOPTED for part in self.parts)

    def count(self, status: str) -> int:
        return sum(part.status == status for part in self.parts)


@dataclass
class _Entity:
    label: str
    names: set[str] = field(default_factory=set)  # normalised label and aliases


class Grounding:
    """The check of one run's model text against its evidence (``items``, by key) and the data it read (``data``:
    (where, text) pairs — an evidence key, "the claim", "a past case" — searched for instructions)."""

    def __init__(self, claim: Claim, items: Mapping[str, KeyedItem], data: Iterable[tuple[str, str]] = ()):
        self.claim, self.items = claim, items
        self.instructions = [(where, found) for where, text in data for found in instructions_in(text)]
        self.entities = _entities(claim, items.values())
        self.head = self._entity_of(claim.head_label)
        self.tail = self._entity_of(claim.tail_label)

    @classmethod
    def of_run(cls, claim: Claim, items: Mapping[str, KeyedItem], memories: Iterable[Memory] = ()) -> Grounding:
        """The check with every data text of a run: its evidence items, its past cases and the claim's labels."""
        data = [(key, item.text) for key, item in items.items()]
        data += [(key, str(item.payload.get(name) or "")) for key, item in items.items()
                 for name in ("label", "description", "title")]
        # A past case is a past run: its answer's form ("Final Answer: [Correct] Because …") is its record, not a directive.
        data += [("a past case", _ANSWER_FORMS.sub(" ", f"{m.triple_text}. {m.lesson}. {m.trajectory}")) for m in memories]
        data += [("the claim", label) for label in (claim.head_label, claim.relation_label, claim.tail_label)]
        return cls(claim, items, data)

    def check(self, text: str) -> Reading:
        return Reading(tuple(self.sentence(s) for s in sentences(text)))

    def steps(self, text: str) -> str:
        """A plan's steps, each kept as the intention it is unless it is to be withheld (it repeats an instruction, or
        attributes to a source what the evidence does not hold)."""
        lines = []
        for line in text.splitlines():
            label, body = _STEP_LABEL.match(line).groups()
            withheld = next((part for part in self.check(body).parts if part.status in WITHHELD), None)
            lines.append(f"{label}{withheld.shown}" if withheld is not None else line)
        return "\n".join(lines)

    def sentence(self, text: str) -> Checked:
        adopted = self._adopted(text)
        if adopted:
            return Checked(text, ADOPTED, adopted)
        keys = cited_keys(text)
        if not keys and (_INTENT.search(text.strip()) or _HEADER.match(text)):
            return Checked(text, INTENT)
        if not keys and not _SOURCE.search(text):
            return Checked(text, OWN)
        problem = self._unsupported(text, keys)
        return Checked(text, UNSUPPORTED, problem) if problem else Checked(text, GROUNDED)

    # ------------------------------------------------------------------------------------------------------

    def _adopted(self, text: str) -> str:
        for where, instruction in self.instructions:
            if _echoes(text, instruction):
                return f"it repeats an instruction found in the data ({_where(where)})"
        if _DIRECTIVE_WORDING.search(text):
            return "it is worded as an instruction about verdicts, not as evidence"
        return ""

    def _unsupported(self, text: str, keys: list[str]) -> str:
        if not keys:
            return "it speaks of the KG or a source but cites no evidence key"
        unknown = [k for k in keys if k not in self.items]
        if unknown:
            return f"it cites {', '.join(unknown)}, which the run never retrieved"
        cited = [self.items[k] for k in keys]
        held = " ".join(_said_by(item) for item in cited)
        entities, strays = self._names(text)
        for entity in entities:
            if not any(_contains(held, name) for name in entity.names):
                return f"no evidence it cites ({', '.join(keys)}) names {entity.label}"
        for stray in strays:
            if not _contains(held, normal(stray)):
                return f"no evidence it cites ({', '.join(keys)}) names {stray}"
        for number in _NUMBER.findall(_STEP_NUMBER.sub(" ", text)):
            if not _contains(held, normal(number)):
                return f"no evidence it cites ({', '.join(keys)}) holds the figure {number}"
        if self.head in entities and self.tail in entities and self.head is not self.tail:
            return self._both_ends(text, keys, cited)
        return ""

    def _both_ends(self, text: str, keys: list[str], cited: list[KeyedItem]) -> str:
        """A sentence naming both ends of the claim needs one cited item naming both, read as what it is."""
        both = [item for item in cited if all(any(_contains(normal(_said_by(item)), n) for n in end.names)
                                              for end in (self.head, self.tail))]
        if not both:
            return (f"no single evidence item it cites ({', '.join(keys)}) names both {self.head.label} and "
                    f"{self.tail.label}")
        if all(item.kind == "path" for item in both) and not _CONNECTED.search(text):
            return "it reads a path through other entities as a statement of the claim"
        if all(item.kind in ("plausibility", "rule") for item in both) and not _SCORE.search(text):
            return "it reads a score of the claim as a statement of the claim"
        return ""

    def _names(self, text: str) -> tuple[list[_Entity], list[str]]:
        """The known entities the sentence names (by label or alias), and the other capitalised names in it."""
        folded = f" {normal(text)} "
        found = []
        for entity in sorted(self.entities, key=lambda e: -max(map(len, e.names))):
            if any(f" {name} " in folded for name in entity.names):
                found.append(entity)
                for name in entity.names:
                    folded = folded.replace(f" {name} ", " ")
        strays = []
        bare = _without_answer_format(re.sub(r"^\s*thought\s*:\s*", "", text, flags=re.IGNORECASE))
        for match in _CAPITALISED.finditer(re.sub(r"\[E\d+\]|\bE\d+\b|\w+_\w+", " ", bare)):
            words = match.group().split()
            if match.start() == len(bare) - len(bare.lstrip()) and words:
                words = words[1:]  # a sentence's first word is capitalised whatever it is
            while words and normal(words[0]) in _NOT_NAMES:
                words = words[1:]
            while words and normal(words[-1]) in _NOT_NAMES:
                words = words[:-1]
            phrase = " ".join(words)
            if phrase and f" {normal(phrase)} " in folded:
                strays.append(phrase)
        return found, strays

    def _entity_of(self, label: str) -> _Entity | None:
        folded = normal(label)
        return next((e for e in self.entities if folded in e.names), None)


def _entities(claim: Claim, items: Iterable[KeyedItem]) -> list[_Entity]:
    """Every entity the run's evidence and the claim name, each with its label and aliases (normalised)."""
    by_label: dict[str, _Entity] = {}

    def add(label: str, aliases: Iterable[str] = ()) -> None:
        folded = normal(label or "")
        if len(folded) < 2:
            return
        entity = by_label.setdefault(folded, _Entity(label, {folded}))
        entity.names.update(a for a in map(normal, aliases) if len(a) >= 2)

    add(claim.head_label)
    add(claim.tail_label)
    for item in items:
        payload = item.payload
        if "entity" in payload:
            add(str(payload.get("label") or ""), payload.get("aliases") or [])
        if isinstance(payload.get("labels"), list) and len(payload["labels"]) == 3:
            add(str(payload["labels"][0]))
            add(str(payload["labels"][2]))
        if isinstance(payload.get("entities"), dict):
            for label in payload["entities"].values():
                add(str(label))
    return list(by_label.values())


def _said_by(item: KeyedItem) -> str:
    """What an evidence item holds, as the check reads it: its text and the names it carries."""
    names = [item.payload.get(key) for key in ("label", "title")]
    names += list(item.payload.get("aliases") or [])
    return normal(" ".join([item.text, *(str(n) for n in names if n)]))


def _contains(folded_haystack: str, folded_needle: str) -> bool:
    return bool(folded_needle) and f" {folded_needle} " in f" {folded_haystack} "


def _without_answer_format(text: str) -> str:
    """The sentence without the answer's own form ("Final Answer: [Correct] Because"), which the model is asked for."""
    return re.sub(r"^\W*(final\s+answer\s*:?\s*)?(\[\s*(correct|incorrect|not enough evidence)\s*\])?\s*(because\b)?", "",
                  text.strip(), flags=re.IGNORECASE)


def _where(where: str) -> str:
    return f"[{where}]" if re.fullmatch(r"E\d+", where) else where
