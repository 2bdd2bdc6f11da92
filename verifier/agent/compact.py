"""The compact profile: the method's loop, shaped for a small model on a CPU.

A 1.5B model cannot search a graph in forty thousand tokens, but it can weigh a short brief and judge
a sentence. So, in one conversation (its prefix is reused by a caching server call after call):

1. Evidence brief — the tools answer the questions every investigation asks (verifier/agent/brief.py),
   before any model call; this is observation 0.
2. Focused reading — the few most relevant sentences are judged supports / contradicts / silent, one
   short call each, and the model reads the opening of the head's article with the claim (one call, one
   word: the log-odds of its answer are the evidence, since a small model's answers lean Correct); both
   enter the brief as evidence. Each is skipped while the weighing in force gives it no weight (the
   sentences are then listed unjudged): it costs seconds on a CPU and would not move the verdict
   (``judge_unweighed`` asks for the judgments anyway, to label runs for a new fit). Text worded as an
   instruction to its reader is not given to the model to judge or read: its answer would be the instruction's.
3. Planning — the paper's initial impression and strategic plan, from the brief's digest (the lines that
   bear on the verdict, verifier/agent/brief.py) and the lessons of past cases (fenced, short, never
   about this claim). The impression is the model's answer and the keys of the brief lines it rests on, not
   a sentence of its own (asked for one, a small model attributes to the KG what the brief does not hold).
   A plan whose first step is to answer from the brief settles the claim, and so does one that names no
   tool beyond the brief's own (a small model asked what is missing names those again, then repeats their
   calls): its impression is the model's answer, no loop runs, and the plan shows that one step.
4. Otherwise a short ReAct loop (default four steps) that only fetches what is missing or conflicting,
   with the claim restated before every decision and tool output trimmed to its first lines; then the
   Final Answer, or the mandatory judgment at the step limit (or at a repeated action).

Whichever way the model answers, the run's verdict is its evidence weighed (verifier/agent/weighing.py);
with ``verdict_probe`` on, one token with log-probabilities first says how sure the model is. ``CompactProfile``
is this strategy as the one loop (verifier/agent/loop.py) asks it; ``brief`` is also the evidence and reading
modes' whole investigation.
"""

from __future__ import annotations

import math
from collections.abc import Generator

from verifier.agent import prompts
from verifier.agent.brief import CALLS as BRIEF_CALLS
from verifier.agent.brief import BriefWriter, gather
from verifier.agent.grounding import instructions_in
from verifier.agent.llm import Completion
from verifier.agent.parsing import Plan, cited_keys
from verifier.agent.port import EvidenceItem
from verifier.agent.profile import Briefing, Context, Profile
from verifier.agent.steps import ActionStep, ObservationStep, Step, Stopwatch, usage
from verifier.agent.weighing import Weights, probe_logit

JUDGMENTS = ("supports", "contradicts", "silent")
OBSERVATION_LINES = 10  # a tool answer in the loop is cut to its header and first lines
PLAN_TOKENS = 120  # an impression sentence and a plan step; the grammar ends each at its period
READING_TOKENS = 4
UNJUDGED = "not judged: it is worded as an instruction to its reader"


def judge_sentence(ctx: Context, item: EvidenceItem) -> tuple[str, Completion]:
    """The judgment of one sentence against the claim, and the call that gave it."""
    messages = [{"role": "system", "content": prompts.READING_SYSTEM},
                {"role": "user", "content": prompts.reading_prompt(ctx.claim, item.text, item.payload.get("title", ""))}]
    grammar = prompts.READING_GRAMMAR if ctx.config.use_grammar else None
    completion = ctx.llm.complete(messages, grammar=grammar, max_tokens=READING_TOKENS, temperature=0)
    word = completion.text.strip().lower()
    judgment = next((j for j in JUDGMENTS if word.startswith(j[:5])), "silent")
    return judgment, completion


def read_passage(ctx: Context, opening: EvidenceItem, tail_description: str) -> tuple[EvidenceItem, Completion]:
    """The model's reading of the head's article: its opening, what the tail is and the claim, one word asked
    for and the log-odds of Correct against Incorrect kept (a small model's answers lean Correct; its
    log-odds still rank claims). The opening becomes an evidence item carrying the reading."""
    claim = ctx.claim
    messages = [{"role": "system", "content": prompts.PASSAGE_SYSTEM},
                {"role": "user", "content": prompts.passage_prompt(claim, opening.text, tail_description)}]
    completion = ctx.llm.complete(messages, max_tokens=1, temperature=0, top_logprobs=10)
    log_odds = probe_logit(completion.first_token_logprobs)
    title = opening.payload.get("title") or claim.head_label
    if log_odds is None:
        said = f"answered {completion.text.strip()!r} (no log-probabilities to weigh)"
    else:
        said = f"puts P(Correct) at {1 / (1 + math.exp(-log_odds)):.2f}"
    line = f'Reading the opening of "{title}" with the claim, the model {said}.'
    payload = {**opening.payload, "reading_logit": None if log_odds is None else round(log_odds, 4),
               "reading": completion.text.strip().lower()[:20]}
    return EvidenceItem("passage", opening.text, payload, opening.source, display=line), completion


def brief(ctx: Context, *, judge: bool, read: bool) -> Generator[Step, None, Briefing]:
    """The brief's action and its observation (with the model calls' tokens). ``judge``: the model judges the
    most relevant sentences (else they are listed unjudged); ``read``: the model reads the head's article."""
    claim = ctx.claim
    arguments = {"head": claim.head, "relation": claim.relation, "tail": claim.tail}
    yield ActionStep(tool="Evidence_Brief", arguments=arguments)
    clock = Stopwatch()
    gathered = gather(claim, ctx.tools.call, set(ctx.tools.names) - (set() if read else {"Read_Passage"}))
    sentences = gathered.results.pop("Read_Sentences", [])
    openings = [i for r in gathered.results.pop("Read_Passage", []) for i in r.items]
    judged, calls, reading = [], [], None
    for item in (sentences[0].items if sentences else []):
        if not judge:
            judged.append((item, ""))
            continue
        if instructions_in(item.text):  # a sentence that addresses its reader: the model's judgment of it proves nothing
            judged.append((EvidenceItem(item.kind, item.text, {**item.payload, "unjudged": UNJUDGED}, item.source,
                                        display=item.display), ""))
            continue
        judgment, completion = judge_sentence(ctx, item)
        calls.append(completion)
        judged.append((EvidenceItem(item.kind, item.text, {**item.payload, "judgment": judgment}, item.source,
                                    display=item.display), judgment))
    tail_description = gathered.description_of(claim.tail)
    if read and openings and not instructions_in(f"{openings[0].text}\n{tail_description}"):
        reading, completion = read_passage(ctx, openings[0], tail_description)
        calls.append(completion)
    writer = BriefWriter(claim, ctx.support)
    text = writer.write(gathered, judged, reading)
    keys = [i.key for i in writer.items]
    yield ObservationStep(text=text, tool="Evidence_Brief", items=writer.items, usage=usage(*calls, clock=clock))
    return Briefing(text, writer.digest, {call.casefold(): keys for call in gathered.calls})


def trimmed(observation: str) -> str:
    lines = observation.splitlines()
    if len(lines) <= OBSERVATION_LINES:
        return observation
    return "\n".join(lines[:OBSERVATION_LINES] + [f"(… {len(lines) - OBSERVATION_LINES} more lines not shown)"])


def weighed(weights: Weights | None, *signals: str) -> bool:
    """Whether what the model would say about ``signals`` (weighing.SIGNALS) can move the verdict: the weighing
    in force weighs one of them (or none is in force, and what the model says is its own evidence)."""
    return weights is None or any(weights.weighs(signal) for signal in signals)


class CompactProfile(Profile):
    """The compact profile as the loop asks it (see the module docstring)."""

    name = "compact"
    stop_at_repeat = True  # a small model that repeats a call has run out of questions: more steps only repeat it
    decides_by_evidence = True  # a small model says Correct to most claims; it reads and judges sentences well

    def gather(self, ctx: Context) -> Generator[Step, None, Briefing]:
        weights = ctx.weights()  # one lookup for both decisions
        judge = ctx.config.judge_unweighed or weighed(weights, "supports", "contradicts")
        return (yield from brief(ctx, judge=judge, read=weighed(weights, "reading")))

    def native_tools(self, ctx: Context) -> bool:
        return False

    def system(self, ctx: Context) -> str:
        return prompts.COMPACT_REACT_SYSTEM.format(abstain=prompts.ABSTAIN_RULE if ctx.config.abstain else "")

    def plan(self, ctx: Context, briefing: Briefing, messages: list[dict]) -> tuple[Completion, list[dict]]:
        """The plan in the loop's own conversation (its prefix is reused by a caching server), from the brief's
        digest and the lessons of past cases."""
        request = prompts.COMPACT_PLAN_REQUEST.format(settled=prompts.SETTLED_STEP)
        ask = {"role": "user", "content": f"{self.context(ctx, briefing.digest)}\n\n{request}\n{prompts.claim_reminder(ctx.claim)}"}
        grammar = prompts.compact_plan_grammar(cited_keys(briefing.digest)) if ctx.config.use_grammar else None
        return ctx.llm.complete([*messages, ask], grammar=grammar, max_tokens=PLAN_TOKENS), [ask]

    def plan_steps(self, ctx: Context, plan: Plan, settles: bool) -> str:
        """A plan that settles the claim lists the one step that runs: answering from the brief. Steps naming only
        what the brief already gathered do not run again, and the curator reads that instead of them."""
        if not settles:
            return super().plan_steps(ctx, plan, settles)
        others = [line for line in plan.steps.splitlines() if line.strip() and prompts.SETTLED_STEP not in line]
        return f"[Step 1] {prompts.SETTLED_STEP}" + (
            "\n(The plan's other steps name only what the brief already gathered: they do not run.)" if others else "")

    def settles(self, ctx: Context, plan: Plan) -> bool:
        """A plan settles the claim unless it names a tool the brief did not already run, or gave no impression
        to answer with. A plan that answers from the brief names none; a small model asked what is missing names
        the brief's own tools again (and then repeats their calls), and only another tool can add evidence."""
        briefed = {name for name, _ in BRIEF_CALLS}
        return bool(plan.impression) and not any(name.casefold() in plan.steps.casefold()
                                                 for name in ctx.tools.names if name not in briefed)

    def opening(self, ctx: Context, briefing: Briefing, plan: str | None) -> list[dict]:
        request = prompts.compact_loop_request(ctx.tools.describe(), ctx.config.t_max, ctx.claim)
        if plan is not None:  # the brief's digest and the lessons are in the plan's request already
            return [{"role": "user", "content": request}]
        return [{"role": "user", "content": f"{self.context(ctx, briefing.text)}\n\n{request}"}]

    def relay(self, ctx: Context, observation: str, *, data: bool = True) -> str:
        shown = prompts.observation_text(trimmed(observation)) if data else observation
        return f"{shown}\n{prompts.claim_reminder(ctx.claim)}"

    def reminder(self, ctx: Context) -> str:
        return prompts.claim_reminder(ctx.claim)

    def context(self, ctx: Context, brief_text: str = "") -> str:
        """The claim, the brief (or its digest), fenced, and the lessons of past cases."""
        brief_text = prompts.quoted(brief_text, "evidence brief") if brief_text else ""
        parts = [prompts.claim_text(ctx.claim), brief_text, prompts.lessons_text(ctx.memories)]
        return "\n\n".join(p for p in parts if p)
