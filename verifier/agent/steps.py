"""The events of an investigation. The loop yields them one by one; the caller persists and streams each."""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from verifier.agent.llm import Completion

StepKind = Literal["plan", "thought", "action", "observation", "verdict"]
Verdict = Literal["correct", "incorrect", "not_enough_evidence"]


@dataclass
class KeyedItem:
    """An evidence item under its run-stable key (E1, E2, …)."""

    key: str
    kind: str
    text: str
    payload: dict
    source: str
    content_hash: str


@dataclass
class AgentStep:
    kind: StepKind
    content: str
    tool: str = ""
    arguments: dict = field(default_factory=dict)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: Decimal = Decimal(0)  # of the model calls behind the step, by the endpoint's price table
    duration_ms: int = 0
    items: list[KeyedItem] = field(default_factory=list)  # observation: the evidence it brought
    # verdict only:
    verdict: Verdict | None = None
    explanation: str = ""
    cited: list[str] = field(default_factory=list)
    forced: bool = False  # reached by mandatory judgment (or a fallback), not by the model finishing
    confidence: float | None = None  # probability that the verdict is right, when the mode knows one
    assessment: dict = field(default_factory=dict)  # the weighed evidence behind the confidence (agent mode)


def spent(*completions: Completion) -> dict:
    """The tokens and cost of the model calls behind one step, as AgentStep's keyword arguments."""
    return {"prompt_tokens": sum(c.prompt_tokens for c in completions),
            "completion_tokens": sum(c.completion_tokens for c in completions),
            "cost_usd": sum((c.cost_usd for c in completions), Decimal(0))}


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
