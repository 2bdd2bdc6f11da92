"""The baselines the agent is measured against, through the same steps as an investigation: the model alone
(zero-shot, chain of thought, self-consistency), standard RAG (a fixed retrieval, then one call) and the structural
baselines (one tool's calibrated probability decides at 0.5, no model)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator

from verifier.agent import prompts
from verifier.agent.config import StructuralBaseline
from verifier.agent.parsing import FinalAnswer, parse_final
from verifier.agent.profile import Context
from verifier.agent.steps import ActionStep, ObservationStep, Step, Stopwatch, ThoughtStep, VerdictStep, usage

Decide = Callable[[FinalAnswer], VerdictStep]  # the verdict step of an answer (verifier/agent/verdict.py)

RAG_CALLS = (
    ("KG_Plausibility", lambda c: [c.head, c.relation, c.tail]),
    ("KG_Rules", lambda c: [c.head, c.relation, c.tail]),
    ("KG_Definition", lambda c: [c.head]),
    ("KG_Definition", lambda c: [c.relation]),
    ("KG_Neighbor", lambda c: [c.head, c.relation]),
    ("KG_Neighbor", lambda c: [c.tail, c.relation]),
    ("KG_Path", lambda c: [c.head, c.tail]),
    ("Wiki_Evidence", lambda c: [c.head, c.tail]),
)


def ask_once(ctx: Context, decide: Decide, mode: str, user: str, *, temperature: float | None = None) -> Iterator[Step]:
    """One call of a baseline that must end in a Final Answer: its text as a thought, then the verdict
    (an unparsable answer is recorded as such and counts as wrong in evaluations)."""
    clock = Stopwatch()
    grammar = prompts.BASELINE_GRAMMAR[mode] if ctx.config.use_grammar else None
    messages = [{"role": "system", "content": prompts.BASELINE_SYSTEM[mode]}, {"role": "user", "content": user}]
    completion = ctx.llm.complete(messages, grammar=grammar, temperature=temperature, max_tokens=ctx.config.max_step_tokens)
    yield ThoughtStep(text=completion.text.strip(), usage=usage(completion, clock=clock))
    final = parse_final(completion.text)
    if final is None:
        yield VerdictStep(verdict=None, explanation=completion.text.strip(), shown="(unparsable answer)")
        return
    yield decide(final)


def single(ctx: Context, decide: Decide, mode: str, *, temperature: float | None = None) -> Iterator[Step]:
    yield from ask_once(ctx, decide, mode, prompts.claim_text(ctx.claim), temperature=temperature)


def self_consistency(ctx: Context, decide: Decide) -> Iterator[Step]:
    votes: Counter[str] = Counter()
    for _ in range(ctx.config.samples):
        for step in single(ctx, decide, "cot", temperature=ctx.config.sample_temperature):
            if isinstance(step, VerdictStep):
                if step.verdict:
                    votes[step.verdict] += 1
            else:
                yield step
    if not votes:
        yield VerdictStep(verdict=None, shown="(no sample gave a parsable answer)")
        return
    (winner, count), total = votes.most_common(1)[0], sum(votes.values())
    step = decide(FinalAnswer(winner, f"Majority of {total} sampled answers: {dict(votes)}.", by_model=False))
    step.confidence = count / total
    yield step


def _call(ctx: Context, tool: str, arguments: list[str]) -> Iterator[Step]:
    """The action and its observation; returns the observation step."""
    yield ActionStep(tool=tool, arguments={str(i): a for i, a in enumerate(arguments)})
    clock = Stopwatch()
    text, items = ctx.support.observe(ctx.tools.call(tool, arguments))
    observation = ObservationStep(text=text, tool=tool, items=items, usage=usage(clock=clock))
    yield observation
    return observation


def structural(ctx: Context, decide: Decide, baseline: StructuralBaseline) -> Iterator[Step]:
    """A structural baseline: one tool on the claim; the calibrated probability in its evidence's field decides
    at 0.5."""
    observation = yield from _call(ctx, baseline.tool, [ctx.claim.head, ctx.claim.relation, ctx.claim.tail])
    scored = next((item for item in observation.items if item.payload.get(baseline.field) is not None), None)
    if scored is None:
        first = observation.text.splitlines()[0] if observation.text else "no answer"
        yield VerdictStep(verdict=None, shown=f"(no calibrated probability: {first})")
        return
    probability = float(scored.payload[baseline.field])
    verdict = "correct" if probability >= 0.5 else "incorrect"
    step = decide(FinalAnswer(verdict, f"{baseline.what} is {probability:.2f} [{scored.key}]", [scored.key], by_model=False))
    step.confidence = probability if verdict == "correct" else 1 - probability
    yield step


def rag(ctx: Context, decide: Decide) -> Iterator[Step]:
    """Standard RAG: the same retrieval, run in a fixed order, all evidence in one prompt."""
    observations = []
    for tool, arguments in RAG_CALLS:
        if tool in ctx.tools.names:
            observation = yield from _call(ctx, tool, arguments(ctx.claim))
            observations.append(observation.text)
    evidence = "\n\n".join(observations) or "(no evidence retrieved)"
    retrieved = prompts.quoted(evidence, "retrieved evidence")
    yield from ask_once(ctx, decide, "rag", f"{prompts.claim_text(ctx.claim)}\n\nRetrieved evidence:\n{retrieved}")
