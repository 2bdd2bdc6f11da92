"""The verification agent: memory → what the profile gathers → schema-aware plan → ReAct loop → final answer or
mandatory judgment.

``Investigation.steps()`` is one generator yielding each step the moment it happens; the caller persists and streams
them. The agent gets its world through small ports (an LLM, a toolbox, a memory lookup, a weigher) and imports
nothing from Django. There is one ReAct loop; a profile (verifier/agent/profile.py: the paper's, or the compact one
for small local models in verifier/agent/compact.py) is the strategy it asks what to gather, how to plan and who
decides. Baselines of the same model (verifier/agent/baselines.py) run through the same generator, so every mode
leaves the same kind of record.
"""

from __future__ import annotations

import math
from collections.abc import Generator, Iterator
from dataclasses import replace

from verifier.agent import baselines, prompts
from verifier.agent.compact import CompactProfile, brief
from verifier.agent.config import MODEL_FREE_MODES, MODES, STRUCTURAL_MODES, AgentConfig
from verifier.agent.grounding import Grounding
from verifier.agent.llm import LLM, Completion
from verifier.agent.parsing import FinalAnswer, ParsedStep, ParseError, Plan, cited_keys, parse_final, parse_plan, parse_step
from verifier.agent.port import Tools
from verifier.agent.profile import Briefing, Context, MemoryLookup, Profile
from verifier.agent.steps import ActionStep, Claim, ObservationStep, PlanStep, Step, Stopwatch, ThoughtStep, VerdictStep, usage
from verifier.agent.verdict import verdict_step
from verifier.agent.weighing import BRIEF_MODES, Weigher, probe_logit

__all__ = ["MODEL_FREE_MODES", "MODES", "PROFILES", "AgentConfig", "Investigation"]

STOP = ["Observation:", "\nObservation", "[Observation]"]
PROFILES: dict[str, type[Profile]] = {"paper": Profile, "compact": CompactProfile}


class Investigation:
    """One run: ``steps()`` drives it. It keeps what the loop learns on the way (the plan's impression, the calls
    made, the probe's log-odds); the profile answers how to gather, plan and decide."""

    def __init__(self, claim: Claim, config: AgentConfig, *, llm: LLM, tools: Tools, memory: MemoryLookup | None = None,
                 weigher: Weigher | None = None):
        self.ctx = Context(claim, config, llm, tools, weigher=weigher)
        self.profile = PROFILES[config.profile]()
        self.memory = memory
        self.impression = ""
        self.answer_logit: float | None = None
        self.done_calls: dict[str, list[str]] = {}  # action already taken (casefolded) → the evidence keys it returned
        self.repeats = 0  # actions asked again after they ran
        self.corrected = False  # the one correction round of a Final Answer's citations was used

    @property
    def memories(self):
        return self.ctx.memories

    def steps(self) -> Iterator[Step]:
        config = self.ctx.config
        if config.use_memory and self.memory is not None and config.mode == "agent":
            self.ctx.memories = self.memory(self.ctx.claim.text, config.memory_k, self.ctx.claim.relation_label)
        mode = config.mode
        if mode == "agent":
            yield from self._investigate()
        elif mode in ("zero-shot", "cot"):
            yield from baselines.single(self.ctx, self.decide, mode)
        elif mode == "self-consistency":
            yield from baselines.self_consistency(self.ctx, self.decide)
        elif mode in STRUCTURAL_MODES:
            yield from baselines.structural(self.ctx, self.decide, STRUCTURAL_MODES[mode])
        elif mode in BRIEF_MODES:
            # The evidence mode weighs the brief with no language model asked (its sentences found, not judged); the
            # reading mode adds the model's one-call reading of the head's article.
            yield from brief(self.ctx, judge=False, read=mode == "reading")
            said = "From the brief and the model's reading of the head's article" if mode == "reading" else "Without a language model"
            yield self.decide(FinalAnswer("", said, by_model=False))
        else:
            yield from baselines.rag(self.ctx, self.decide)

    def decide(self, final: FinalAnswer, *, forced: bool = False, note: str = "") -> VerdictStep:
        return verdict_step(self.ctx, final, forced=forced, by_evidence=self.profile.decides_by_evidence,
                            impression=self.impression, answer_logit=self.answer_logit, note=note)

    # ------------------------------------------------------------------------------ the agent

    def grounding(self) -> Grounding:
        """The check of the model's words against the run's evidence so far (verifier/agent/grounding.py)."""
        return Grounding.of_run(self.ctx.claim, self.ctx.support.items, self.ctx.memories)

    def checked(self, text: str) -> str:
        """The model's text as a curator reads it: its statements checked, withheld or marked."""
        return self.grounding().check(text).shown

    def _investigate(self) -> Iterator[Step]:
        ctx, profile = self.ctx, self.profile
        briefing: Briefing = yield from profile.gather(ctx)
        self.done_calls.update(briefing.calls)
        messages: list[dict] = [{"role": "system", "content": profile.system(ctx)}]
        planned: PlanStep | None = None
        if ctx.config.use_planning:
            clock = Stopwatch()
            completion, kept = profile.plan(ctx, briefing, messages)
            plan = parse_plan(completion.text)
            self.impression = plan.impression
            settles = profile.settles(ctx, plan)
            planned = self._plan_step(plan, completion.text, settles)
            planned.usage = usage(completion, clock=clock)
            yield planned
            if kept:
                messages += [*kept, {"role": "assistant", "content": planned.body}]
            if settles:  # nothing left to fetch: the impression is the model's answer
                yield from self.probe(messages)
                yield self.decide(FinalAnswer(plan.impression, plan.reason, cited_keys(plan.reason)))
                return
        messages += profile.opening(ctx, briefing, planned.body if planned is not None else None)
        yield from self._react(messages)

    def _plan_step(self, plan: Plan, said: str, settles: bool) -> PlanStep:
        """The plan as a curator reads it: its reason checked, its steps checked and cut to those that run."""
        grounding = self.grounding()
        reason = grounding.check(plan.reason)
        steps = self.profile.plan_steps(self.ctx, replace(plan, steps=grounding.steps(plan.steps)), settles)
        note = ("An answer given while repeating an instruction found in the data is not the model's reading of the "
                "evidence." if reason.adopted else "")
        return PlanStep(said=said.strip(), impression=plan.impression, reason=reason.shown, steps=steps, note=note)

    def _react(self, messages: list[dict]) -> Iterator[Step]:
        """The ReAct loop: Thought → Action → Observation until a Final Answer, at most ``t_max`` steps; then the
        mandatory judgment."""
        ctx, profile = self.ctx, self.profile
        native = profile.native_tools(ctx)
        grammar = prompts.step_grammar(ctx.tools.names, abstain=ctx.config.abstain) if ctx.config.use_grammar else None
        self.corrected = False
        for _ in range(ctx.config.t_max):
            clock = Stopwatch()
            if native:
                completion = ctx.llm.complete(messages, tools=ctx.tools.openai_tools(), max_tokens=ctx.config.max_step_tokens)
            else:
                completion = ctx.llm.complete(messages, stop=STOP, grammar=grammar, max_tokens=ctx.config.max_step_tokens)
            text = completion.text.strip()
            if completion.tool_calls:
                call = completion.tool_calls[0]  # one action per step: the others are not run
                shown = self.checked(text.removeprefix("Thought:").strip()) or f"(calls {call['name']})"
                thought = ThoughtStep(text=shown, said=text, tool_call=call, usage=usage(completion, clock=clock))
                yield thought
                yield from self.act(messages, thought, call["name"], call["arguments"], call_id=call["id"])
                continue
            try:
                parsed = parse_step(text)
            except ParseError as error:
                reminder = profile.reminder(ctx)
                thought = ThoughtStep(text=self.checked(text) or "(empty reply)", said=text, usage=usage(completion, clock=clock))
                yield from self.observe(messages, thought, f"Format error: {error}" + (f" {reminder}" if reminder else ""))
                continue
            if parsed.final is not None:
                if (yield from self.conclude(messages, completion, clock, text, parsed)):
                    return
                continue
            thought = ThoughtStep(text=self.checked(parsed.thought), said=text, usage=usage(completion, clock=clock))
            yield thought
            yield from self.act(messages, thought, parsed.tool, parsed.arguments)
            if self.repeats and profile.stop_at_repeat:
                break
        yield from self.judgment(messages, reason="an action was repeated" if self.repeats and profile.stop_at_repeat
                                 else "step limit reached")

    def act(self, messages: list[dict], thought: ThoughtStep, tool: str, arguments, call_id: str = "") -> Iterator[Step]:
        """The action step and its observation (evidence keyed), both added to the conversation after ``thought``."""
        arguments = arguments if isinstance(arguments, dict) else list(arguments)
        shown = arguments if isinstance(arguments, dict) else {str(i): a for i, a in enumerate(arguments)}
        action = ActionStep(tool=tool, arguments=shown)
        yield action
        signature = action.content.casefold()
        if signature in self.done_calls:
            # Small models loop on the same few calls; the answer would not change, so say so instead.
            self.repeats += 1
            keys = self.done_calls[signature]
            text = (f"You already ran {action.content}; its evidence ({', '.join(keys) or 'none'}) is above and has not "
                    f"changed. Do not repeat an action: use a different tool or arguments, or give the Final Answer.")
            observation = ObservationStep(text=text, tool=tool, relayed=self.profile.relay(self.ctx, text, data=False))
        else:
            clock = Stopwatch()
            text, items = self.ctx.support.observe(self.ctx.tools.call(tool, arguments))
            self.done_calls[signature] = [item.key for item in items]
            observation = ObservationStep(text=text, tool=tool, items=items, usage=usage(clock=clock),
                                          relayed=self.profile.relay(self.ctx, text))
        observation.call_id = call_id
        yield observation
        messages += thought.to_messages() + observation.to_messages()

    def observe(self, messages: list[dict], thought: ThoughtStep, text: str) -> Iterator[Step]:
        """A step the loop could not run: the model's text, and the system's reply to it, read back as an observation."""
        yield thought
        observation = ObservationStep(text=text)
        yield observation
        messages += thought.to_messages() + observation.to_messages()

    def conclude(self, messages: list[dict], completion: Completion, clock: Stopwatch, text: str,
                 parsed: ParsedStep) -> Generator[Step, None, bool]:
        """A Final Answer: its citations are checked (sent back once if wrong), then the verdict. True if concluded."""
        final = parsed.final
        problem = self._citation_problem(final)
        if problem and not self.corrected:
            self.corrected = True
            yield from self.observe(messages, ThoughtStep(text=self.checked(text), said=text, usage=usage(completion, clock=clock)),
                                    problem)
            return False
        yield ThoughtStep(text=self.checked(parsed.thought or text), said=text, usage=usage(completion, clock=clock))
        yield from self.probe([*messages, {"role": "assistant", "content": text}])
        yield self.decide(final)
        return True

    def _citation_problem(self, final: FinalAnswer) -> str:
        support = self.ctx.support
        _, unknown = support.check(final.cited)
        if unknown:
            return (f"Your answer cites {', '.join(unknown)}, which no observation contained. Cite only retrieved "
                    f"evidence keys ({support.keys_text()}) and give the Final Answer again.")
        if not final.cited and support.items and final.verdict != "not_enough_evidence":
            return (f"Your answer cites no evidence. Give the Final Answer again, citing the keys of the evidence "
                    f"it rests on ({support.keys_text()}).")
        return ""

    def probe(self, messages: list[dict]) -> Iterator[Step]:
        """How sure the model is of its verdict: one token with log-probabilities after its answer (agent mode;
        endpoints without log-probabilities leave it unknown)."""
        ctx = self.ctx
        if ctx.config.mode != "agent" or not ctx.config.verdict_probe:
            return
        clock = Stopwatch()
        completion = ctx.llm.complete([*messages, {"role": "user", "content": prompts.verdict_probe(ctx.claim)}],
                                      max_tokens=1, temperature=0, top_logprobs=10)
        self.answer_logit = probe_logit(completion.first_token_logprobs)
        if self.answer_logit is None and completion.first_token_logprobs:
            text = "(verdict probe: neither Correct nor Incorrect is among the model's likeliest first words)"
        elif self.answer_logit is None:
            text = "(verdict probe: the endpoint returned no log-probabilities)"
        else:
            p = 1 / (1 + math.exp(-self.answer_logit))
            text = f"(verdict probe: the model puts P(Correct) at {p:.2f} against P(Incorrect) at {1 - p:.2f})"
        yield ThoughtStep(text=text, usage=usage(completion, clock=clock))

    def judgment(self, messages: list[dict], reason: str) -> Iterator[Step]:
        """The mandatory judgment: one more message continuing the conversation demands the verdict now."""
        clock = Stopwatch()
        grammar = prompts.FINAL_GRAMMAR if self.ctx.config.use_grammar else None
        asked = [*messages, {"role": "user", "content": prompts.JUDGMENT}]
        completion = self.ctx.llm.complete(asked, grammar=grammar, max_tokens=self.ctx.config.max_step_tokens)
        said = completion.text.strip()
        yield ThoughtStep(text=f"({reason}: mandatory judgment)\n{self.checked(said)}", said=said,
                          usage=usage(completion, clock=clock))
        yield from self.probe([*asked, {"role": "assistant", "content": said}])
        final = parse_final(completion.text)
        if final is None:
            if not self.impression:  # no answer anywhere: the run fails rather than invent one
                raise RuntimeError(f"the model gave no readable answer, even when asked for its judgment "
                                   f"(it wrote {said[:200]!r})")
            final = FinalAnswer(self.impression, "The judgment could not be read; the initial impression stands.",
                                by_model=False)
        yield self.decide(final, forced=True)
