"""Verdict quality signals: what a curator should know about how a verdict was reached before trusting it.

A verdict that cites nothing, one that cites only evidence about other entities, one forced by the step limit,
one reached after the same tool call was repeated, and one guided by a memory of other entities or by a weak
memory match all look alike as a green or red badge. The runner stores the codes on the run
(``Run.signals``); the run page, the queue (filter ``signal``), the API and the exports show them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

WEAK_MEMORY_SIMILARITY = 0.5
MANDATORY_JUDGMENT_MARK = ": mandatory judgment)"  # how the agent's loop opens its judgment step (agent/loop.py)


@dataclass(frozen=True)
class Signal:
    code: str
    label: str
    description: str


SIGNALS = {signal.code: signal for signal in (
    Signal("cites_nothing", "cites nothing", "The verdict cites no evidence item."),
    Signal("off_claim", "cites other entities", "None of the evidence the verdict cites names the claim's head or tail."),
    Signal("forced", "forced", "The verdict came from the mandatory judgment at the step limit or after a repeated action."),
    Signal("looped", "looped", "The same tool call was made more than once."),
    Signal("memory_other", "memory of other entities",
           "A memory that guided the run is about neither the claim's head nor its tail; check that its facts were not copied."),
    Signal("weak_memory", "weak memory match",
           f"A memory that guided the run matched the claim with a similarity below {WEAK_MEMORY_SIMILARITY}."),
)}
CODES = tuple(SIGNALS)


CLAIM_LEVEL_KINDS = ("plausibility", "rule")  # scores of the claim itself, whatever their text names


@dataclass(frozen=True)
class Evidence:
    kind: str
    text: str
    payload: dict
    cited: bool

    def about(self, ends: tuple[str, ...]) -> bool:
        return self.kind in CLAIM_LEVEL_KINDS or _names(self.text, self.payload, ends)


def _names(text: str, payload: dict, ends: tuple[str, ...]) -> bool:
    """Whether an item names one of ``ends`` (external ids and labels, lower-cased) in its text or its payload."""
    haystack = f"{text}\n{json.dumps(payload, ensure_ascii=False)}".lower()
    return any(end and end in haystack for end in ends)


def compute(*, ends: tuple[str, ...], verdict: str, evidence: list[Evidence], actions: list[tuple[str, str]],
            memories: list[tuple[str, float]], forced: bool) -> list[str]:
    """The signal codes of a finished run. ``ends``: the head's and tail's ids and labels; ``actions``: (tool,
    arguments as JSON) of each tool call; ``memories``: (triple text, similarity) of each memory used."""
    ends = tuple(end.lower() for end in ends if end)
    codes = []
    cited = [item for item in evidence if item.cited]
    if verdict and not cited:
        codes.append("cites_nothing")
    if cited and not any(item.about(ends) for item in cited):
        codes.append("off_claim")
    if forced:
        codes.append("forced")
    if len(set(actions)) < len(actions):
        codes.append("looped")
    if any(not _names(text, {}, ends) for text, _ in memories):
        codes.append("memory_other")
    if any(similarity < WEAK_MEMORY_SIMILARITY for _, similarity in memories):
        codes.append("weak_memory")
    return codes


def signals_of(run, *, forced: bool | None = None) -> list[str]:
    """The signals of a stored run (its steps, evidence and memories). ``forced`` as the agent reported it;
    None reads it from the steps (runs stored before the flag was)."""
    task = run.task
    ends = (task.head.external_id, task.head.label, task.tail.external_id, task.tail.label)
    steps = list(run.steps.order_by("seq").values_list("kind", "tool", "arguments", "content"))
    if forced is None:
        forced = any(kind == "thought" and MANDATORY_JUDGMENT_MARK in (content or "")[:200] for kind, _, _, content in steps)
    actions = [(tool, json.dumps(arguments or {}, sort_keys=True)) for kind, tool, arguments, _ in steps if kind == "action" and tool]
    evidence = [Evidence(kind, text, payload or {}, cited)
                for kind, text, payload, cited in run.support_items.values_list("kind", "text", "payload", "cited")]
    memories = list(run.memories_used.values_list("entry__triple_text", "similarity"))
    return compute(ends=ends, verdict=run.verdict, evidence=evidence, actions=actions, memories=memories, forced=forced)


def described(codes) -> list[Signal]:
    return [SIGNALS[code] for code in codes or () if code in SIGNALS]
