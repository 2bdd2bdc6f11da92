"""The evidence brief: what every investigation needs, gathered by the tools before the first model call
and written compactly, each line an evidence item under its key.

Sections, each present only when its tool is offered and answered: the two entities and the relation
(profile lines), the structural plausibility (KG_Plausibility), rules for and against (KG_Rules), what
the KG already says about the head for this relation and its closest related facts (KG_Neighbor), how
head and tail are connected (KG_Path), the most relevant sentences with a judgment each
(Read_Sentences, judged by the model: see verifier/agent/compact.py), and the model's reading of the
opening of the head's article (Read_Passage, read by the model with the claim).

The planner reads the brief's digest (``BriefWriter.digest``): the lines that bear on the verdict — the
plausibility, the rules' probability, the head's values of the relation, the judged sentences and the
reading of the article — under
the same keys. On two cores the plan call reads its prompt at ~35 tokens a second, so the digest saves
about a third of a verification's time; the loop, when one runs, can fetch anything left out.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from verifier.agent.port import EvidenceItem, ToolResult
from verifier.agent.steps import Claim, KeyedItem
from verifier.agent.support import SupportSet

# (tool, arguments from the claim): the deterministic calls of a brief, in the order they are written.
CALLS: tuple[tuple[str, Callable[[Claim], list[str]]], ...] = (
    ("KG_Definition", lambda c: [c.head]),
    ("KG_Definition", lambda c: [c.tail]),
    ("KG_Definition", lambda c: [c.relation]),
    ("KG_Plausibility", lambda c: [c.head, c.relation, c.tail]),
    ("KG_Rules", lambda c: [c.head, c.relation, c.tail]),
    ("KG_Neighbor", lambda c: [c.head, c.relation]),
    ("KG_Path", lambda c: [c.head, c.tail]),
    ("Read_Sentences", lambda c: [c.head, c.relation, c.tail]),
    ("Read_Passage", lambda c: [c.head]),
)
MAX_RULE_LINES = 3
MAX_RELATED_FACTS = 3
MAX_PATHS = 3
MAX_LINE_CHARS = 200  # a line is cut here (the full item is stored): prompt tokens cost ~25–40 ms each on a CPU
# The digest's sections and how many of each one's lines it keeps (see the module docstring).
DIGEST = {"structural": 1, "rules": 1, "values": 5, "text": 3, "reading": 1}


@dataclass
class Gathered:
    """The tools' answers for a brief, by tool name (KG_Definition: a list, one per call)."""

    results: dict[str, list[ToolResult]] = field(default_factory=dict)
    calls: list[str] = field(default_factory=list)

    def first(self, tool: str) -> ToolResult | None:
        found = self.results.get(tool) or []
        return found[0] if found else None

    def description_of(self, entity: str) -> str:
        """The entity's description from its KG_Definition profile, or ""."""
        profiles = (i.payload for r in self.results.get("KG_Definition", []) for i in r.items)
        return next((p.get("description") or "" for p in profiles if p.get("entity") == entity), "")


def gather(claim: Claim, call: Callable[[str, list[str]], ToolResult], offered: set[str]) -> Gathered:
    gathered = Gathered()
    for tool, arguments in CALLS:
        if tool not in offered:
            continue
        args = arguments(claim)
        gathered.calls.append(f"{tool}({', '.join(args)})")
        gathered.results.setdefault(tool, []).append(call(tool, args))
    return gathered


def _profile_line(item: EvidenceItem) -> str:
    p = item.payload
    if "relation" in p:
        expects = ""
        if p.get("domain") or p.get("range"):
            expects = f" (subject: {', '.join(p.get('domain') or ['any'])}; object: {', '.join(p.get('range') or ['any'])})"
        return f"Relation {p.get('label')}: {p.get('description') or 'no description'}{expects}"
    types = f" (types: {', '.join(p['types'][:4])})" if p.get("types") else ""
    return f"{p.get('label')}: {p.get('description') or 'no description'}{types}"


def _is_claim_relation(item: EvidenceItem, claim: Claim) -> bool:
    return item.payload.get("relation") == claim.relation and item.payload.get("head") == claim.head


class BriefWriter:
    """Writes the sections, adding each shown item to the run's support set (so its key is stable)."""

    def __init__(self, claim: Claim, support: SupportSet):
        self.claim, self.support = claim, support
        self.sections: list[tuple[str, list[str]]] = [("header", [])]  # (kind, lines: the title first)
        self.items: list[KeyedItem] = []

    def item(self, item: EvidenceItem, line: str) -> None:
        keyed = self.support.add(item)
        if keyed not in self.items:
            self.items.append(keyed)
        if len(line) > MAX_LINE_CHARS:
            line = line[:MAX_LINE_CHARS].rsplit(" ", 1)[0] + " …"
        self.note(f"[{keyed.key}] {line}")

    def note(self, line: str) -> None:
        self.sections[-1][1].append(line)

    def section(self, title: str, kind: str = "") -> None:
        self.sections.append((kind, [title]))

    @property
    def text(self) -> str:
        return "\n".join(line for _, lines in self.sections for line in lines)

    @property
    def digest(self) -> str:
        """The header and, of each DIGEST section, its title and first lines."""
        kept = [lines if kind == "header" else lines[:1 + DIGEST[kind]]
                for kind, lines in self.sections if kind == "header" or kind in DIGEST]
        return "\n".join(line for lines in kept for line in lines)

    def write(self, gathered: Gathered, judged: list[tuple[EvidenceItem, str]], reading: EvidenceItem | None = None) -> str:
        c = self.claim
        self.note(f"Evidence brief for the claim ({c.head_label}, {c.relation_label}, {c.tail_label}):")
        definitions = [i for r in gathered.results.get("KG_Definition", []) for i in r.items]
        if definitions:
            self.section("Entities and relation:")
            for item in definitions:
                self.item(item, _profile_line(item))
        self._plain_section("Structural model:", gathered.first("KG_Plausibility"), limit=3, kind="structural")
        self._plain_section("Rules:", gathered.first("KG_Rules"), limit=MAX_RULE_LINES, kind="rules")
        self._neighbours(gathered.first("KG_Neighbor"))
        self._plain_section(f"Connections between {c.head_label} and {c.tail_label}:", gathered.first("KG_Path"), limit=MAX_PATHS)
        if judged:
            unjudged = not any(judgment for _, judgment in judged)
            self.section("Text (the sentences most relevant to the claim):" if unjudged else
                         "Text (each sentence judged against the claim):", "text")
            for item, judgment in judged:
                self.item(item, f'{judgment + ": " if judgment else ""}"{item.text}" ({item.payload.get("title", "")})')
        if reading is not None:
            self.section(f"The article about {c.head_label}, read with the claim:", "reading")
            self.item(reading, reading.display)
        return self.text

    def _plain_section(self, title: str, result: ToolResult | None, *, limit: int, kind: str = "") -> None:
        if result is None:
            return
        self.section(title, kind)
        if not result.items:
            self.note(result.text.splitlines()[0] if result.text else "(no answer)")
            return
        for item in result.items[:limit]:
            self.item(item, item.text)

    def _neighbours(self, result: ToolResult | None) -> None:
        if result is None:
            return
        c = self.claim
        own = [i for i in result.items if _is_claim_relation(i, c)]
        self.section(f"What the KG says about {c.head_label} for {c.relation_label}:", "values")
        if own:
            for item in own:
                self.item(item, item.text)
        else:
            self.note(f"No other {c.relation_label} of {c.head_label} is in the KG.")
        related = [i for i in result.items if not _is_claim_relation(i, c)][:MAX_RELATED_FACTS]
        if related:
            self.section(f"Closest related facts about {c.head_label}:")
            for item in related:
                self.item(item, item.text)
