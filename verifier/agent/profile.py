"""An agent profile: the strategy the one loop (verifier/agent/loop.py) asks what to gather before the plan, how to
plan, whether the plan settles the claim, how the loop's conversation starts and reads back observations, and who
decides the verdict.

``Profile`` (here) answers as the method as published, for capable endpoints: no gathering, the planner's impression and
plan as observation 0 of a ReAct loop over every tool, the model's Final Answer as the verdict. The compact profile
(verifier/agent/compact.py) shapes the same loop for a small local model.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from typing import ClassVar

from verifier.agent import prompts
from verifier.agent.config import AgentConfig
from verifier.agent.llm import LLM, Completion
from verifier.agent.parsing import Plan
from verifier.agent.port import Tools
from verifier.agent.steps import Claim, Memory, Step
from verifier.agent.support import SupportSet
from verifier.agent.weighing import Weigher, Weights

MemoryLookup = Callable[[str, int, str], list[Memory]]  # (claim text, k, relation label) → memories


@dataclass
class Context:
    """What a profile works with: the run's claim, configuration, model, tools, evidence so far and memories."""

    claim: Claim
    config: AgentConfig
    llm: LLM
    tools: Tools
    support: SupportSet = field(default_factory=SupportSet)
    memories: list[Memory] = field(default_factory=list)
    weigher: Weigher | None = None

    def weights(self) -> Weights | None:
        """The weighing in force now (None: none is fitted)."""
        return self.weigher() if self.weigher is not None else None


@dataclass
class Briefing:
    """What a profile gathered before the plan: its text for the conversation, the digest the planner reads, and
    the calls it made with the evidence keys each returned (the loop answers a repeat of one from them)."""

    text: str = ""
    digest: str = ""
    calls: dict[str, list[str]] = field(default_factory=dict)


class Profile:
    """The paper profile; the compact profile overrides what it shapes differently."""

    name: ClassVar[str] = "paper"
    stop_at_repeat: ClassVar[bool] = False  # a repeated action ends the loop in the mandatory judgment
    decides_by_evidence: ClassVar[bool] = False  # the verdict is the weighed evidence, not the model's answer

    def gather(self, ctx: Context) -> Generator[Step, None, Briefing]:
        """The steps run before the plan, and what they gathered."""
        yield from ()
        return Briefing()

    def native_tools(self, ctx: Context) -> bool:
        """Whether the loop uses the endpoint's native tool calls instead of "Action:" lines."""
        return ctx.config.tool_calling and not ctx.config.use_grammar

    def system(self, ctx: Context) -> str:
        """The loop's system message."""
        template = prompts.REACT_TOOLS_SYSTEM if self.native_tools(ctx) else prompts.REACT_SYSTEM
        abstain = prompts.ABSTAIN_RULE if ctx.config.abstain else ""
        return template.format(tools=ctx.tools.describe(), t_max=ctx.config.t_max, abstain=abstain)

    def plan(self, ctx: Context, briefing: Briefing, messages: list[dict]) -> tuple[Completion, list[dict]]:
        """The plan's call: its completion, and the messages the loop's conversation keeps before the plan itself (none:
        the paper's planner has a conversation of its own, and its plan opens the loop as observation 0)."""
        system = prompts.PLANNING_SYSTEM.format(tools=ctx.tools.describe())
        completion = ctx.llm.complete([{"role": "system", "content": system}, {"role": "user", "content": self.context(ctx)}],
                                      max_tokens=ctx.config.max_step_tokens)
        return completion, []

    def plan_steps(self, ctx: Context, plan: Plan, settles: bool) -> str:
        """The plan's steps as a curator reads them: what the model means to do, said to be that (the loop decides
        which steps run; they follow)."""
        return f"{plan.steps}\n(What the model means to do; the steps it takes follow.)" if plan.steps.strip() else ""

    def settles(self, ctx: Context, plan: Plan) -> bool:
        """Whether the plan leaves the loop nothing to do: its impression is then the model's answer."""
        return False

    def opening(self, ctx: Context, briefing: Briefing, plan: str | None) -> list[dict]:
        """The messages that start the loop after the system message (and the plan's, when it has any); ``plan`` is
        the plan as checked (verifier/agent/grounding.py), or None without one."""
        opening = self.context(ctx)
        if plan is not None:
            opening += f"\n\nObservation 0 (your initial impression and plan):\n{plan}"
        return [{"role": "user", "content": opening + "\n\nBegin."}]

    def relay(self, ctx: Context, observation: str, *, data: bool = True) -> str:
        """What the model reads of an observation: a tool's answer (``data``) fenced as quoted data, the system's own
        reply as it is."""
        return prompts.observation_text(observation) if data else observation

    def reminder(self, ctx: Context) -> str:
        """What follows a format error, if anything."""
        return ""

    def context(self, ctx: Context) -> str:
        """The claim, the relation's schema and the similar past investigations."""
        parts = [prompts.claim_text(ctx.claim), prompts.schema_text(ctx.tools.relation_schema()),
                 prompts.memories_text(ctx.memories)]
        return "\n\n".join(p for p in parts if p)
