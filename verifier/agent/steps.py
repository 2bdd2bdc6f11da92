"""The events of an investigation. The loop yields them one by one; the caller persists and streams each.

Each kind of step is a small dataclass that renders itself (``content``, what a curator reads and the run stores)
and, where the model reads it back, builds its own messages (``to_messages``). ``record()`` is what the caller
stores of any step: its kind, content, tool, arguments, evidence and what it cost.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from decimal import Decimal
from typing import TYPE_CHECKING, ClassVar, Literal

if TYPE_CHECKING:  # for annotations only: verifier/agent/llm.py imports this module
    from verifier.agent.llm import Completion

StepKind = Literal["plan", "thought", "action", "observation", "verdict"]
Verdict = Literal["correct", "incorrect", "not_enough_evidence"]
VERDICT_LABELS = {"correct": "Correct", "incorrect": "Incorrect", "not_enough_evidence": "Not enough evidence"}


@dataclass
class KeyedItem:
    """An evidence item under its run-stable key (E1, E2, …)."""

    key: str
    kind: str
    text: str
    payload: dict
    source: str
    content_hash: str


class Stopwatch:
    """Times one step: started when made; ``ms`` is the whole milliseconds since."""

    def __init__(self) -> None:
        self.started = time.perf_counter()

    @property
    def ms(self) -> int:
        return int((time.perf_counter() - self.started) * 1000)


@dataclass(frozen=True)
class Usage:
    """What a step cost: the tokens and price of the model calls behind it, and its wall time."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: Decimal = Decimal(0)  # by the endpoint's price table
    duration_ms: int = 0


def usage(*completions: Completion, clock: Stopwatch | None = None) -> Usage:
    """The usage of a step made of ``completions`` (none for a tool's step), timed by ``clock`` when given."""
    return Usage(sum(c.prompt_tokens for c in completions), sum(c.completion_tokens for c in completions),
                 sum((c.cost_usd for c in completions), Decimal(0)), clock.ms if clock is not None else 0)


@dataclass(frozen=True)
class StepRecord:
    """What the caller stores of a step (verifier/runner.py): one Step row and its evidence items."""

    kind: StepKind
    content: str
    usage: Usage
    tool: str = ""
    arguments: dict = field(default_factory=dict)
    items: list[KeyedItem] = field(default_factory=list)


@dataclass(kw_only=True)
class Step:
    kind: ClassVar[StepKind]
    usage: Usage = field(default_factory=Usage)

    @property
    def content(self) -> str:
        raise NotImplementedError

    def record(self) -> StepRecord:
        return StepRecord(self.kind, self.content, self.usage)


@dataclass(kw_only=True)
class PlanStep(Step):
    """The model's initial impression and strategic plan as a curator reads them: its answer, its reason as checked
    (each sentence grounded in the evidence it cites, marked as the model's own reading, or withheld:
    verifier/agent/grounding.py) and its steps as they will run. ``said`` is the model's text as it wrote it."""

    kind: ClassVar[StepKind] = "plan"
    HEADING: ClassVar[str] = "The language model's initial impression and plan (its own reading, not the verdict):"
    said: str
    impression: str = ""  # "correct", "incorrect" or "" when it gave none
    reason: str = ""
    steps: str = ""
    note: str = ""

    @property
    def body(self) -> str:
        """The impression and plan, as the loop's conversation continues from them."""
        answer = f"[{VERDICT_LABELS[self.impression]}] Because {self.reason}" if self.impression else self.reason
        return (f"=== Initial Impression ===\n{answer or '(none given)'}" + (f"\n({self.note})" if self.note else "")
                + f"\n=== Strategic Plan ===\n{self.steps or '(no step given)'}")

    @property
    def content(self) -> str:
        return f"{self.HEADING}\n{self.body}"


@dataclass(kw_only=True)
class ThoughtStep(Step):
    """What the model wrote in one step: ``text`` is shown; ``said`` is its reply as the conversation keeps it
    (with the action, when it chose one); ``tool_call`` a native tool call it made ({"id", "name", "arguments"})."""

    kind: ClassVar[StepKind] = "thought"
    text: str
    said: str = ""
    tool_call: dict | None = None

    @property
    def content(self) -> str:
        return self.text

    def to_messages(self) -> list[dict]:
        if self.tool_call is None:
            return [{"role": "assistant", "content": self.said}]
        call = self.tool_call
        return [{"role": "assistant", "content": self.said or None, "tool_calls": [{
            "id": call["id"], "type": "function", "function": {"name": call["name"], "arguments": json.dumps(call["arguments"])}}]}]


@dataclass(kw_only=True)
class ActionStep(Step):
    kind: ClassVar[StepKind] = "action"
    tool: str
    arguments: dict = field(default_factory=dict)  # positional arguments under "0", "1", …

    @property
    def content(self) -> str:
        return f"{self.tool}({', '.join(map(str, self.arguments.values()))})"

    def record(self) -> StepRecord:
        return StepRecord(self.kind, self.content, self.usage, self.tool, self.arguments)


@dataclass(kw_only=True)
class ObservationStep(Step):
    """What came back: a tool's answer (its evidence ``items`` keyed) or the system's reply to a step it could not
    run. ``relayed`` is what the model reads of it, when that is not the whole ``text`` (a trimmed answer);
    ``call_id`` the native tool call it answers."""

    kind: ClassVar[StepKind] = "observation"
    text: str
    tool: str = ""
    items: list[KeyedItem] = field(default_factory=list)
    relayed: str | None = None
    call_id: str = ""

    @property
    def content(self) -> str:
        return self.text

    def record(self) -> StepRecord:
        return StepRecord(self.kind, self.content, self.usage, self.tool, items=self.items)

    def to_messages(self) -> list[dict]:
        shown = self.text if self.relayed is None else self.relayed
        if self.call_id:
            return [{"role": "tool", "tool_call_id": self.call_id, "content": shown}]
        return [{"role": "user", "content": f"Observation: {shown}"}]


@dataclass(kw_only=True)
class VerdictStep(Step):
    kind: ClassVar[StepKind] = "verdict"
    verdict: Verdict | None
    explanation: str = ""
    cited: list[str] = field(default_factory=list)
    forced: bool = False  # reached by mandatory judgment (or a fallback), not by the model finishing
    confidence: float | None = None  # probability that the verdict is right, when the mode knows one
    assessment: dict = field(default_factory=dict)  # the weighed evidence behind the confidence (agent mode)
    note: str = ""  # shown after the explanation, in brackets
    shown: str = ""  # the content, when the step says something else than its verdict and explanation

    @property
    def content(self) -> str:
        if self.shown or self.verdict is None:
            return self.shown
        return f"[{VERDICT_LABELS[self.verdict]}] {self.explanation}" + (f"\n({self.note})" if self.note else "")


@dataclass(frozen=True)
class Claim:
    """The triple under verification, with ids and labels: what the agent investigates, and what tools keep
    (with its reverse reading) out of their results, so the agent must find evidence, not the claim itself."""

    head: str
    relation: str
    tail: str
    head_label: str = ""
    relation_label: str = ""
    tail_label: str = ""

    @property
    def leaking_edges(self) -> frozenset[tuple[str, str, str]]:
        return frozenset({(self.head, self.relation, self.tail), (self.tail, self.relation, self.head)})

    @property
    def text(self) -> str:
        return f"{self.head_label} {self.relation_label} {self.tail_label}"

    def describe(self) -> str:
        return f"({self.head_label} [{self.head}], {self.relation_label} [{self.relation}], {self.tail_label} [{self.tail}])"


@dataclass(frozen=True)
class Memory:
    id: int
    triple_text: str
    trajectory: str
    verdict: str
    similarity: float
    lesson: str = ""  # the decisive evidence in a sentence or two (what a short prompt shows)
    relation_label: str = ""
