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
   (``judge_unweighed`` asks for the judgments anyway, to label runs for a new fit).
3. Planning — the paper's initial impression and strategic plan, from the brief's digest (the lines that
   bear on the verdict, verifier/agent/brief.py) and the lessons of past cases (fenced, short, never
   about this claim). A plan whose first step is to answer from the
   brief settles the claim, and so does one that names no tool beyond the brief's own (a small model
   asked what is missing names those again, then repeats their calls): its impression is the model's
   answer and no loop runs.
4. Otherwise a short ReAct loop (default four steps) that only fetches what is missing or conflicting,
   with the claim restated before every decision and tool output trimmed to its first lines; then the
   Final Answer, or the mandatory judgment at the step limit (or at a repeated action).

Whichever way the model answers, the run's verdict is its evidence weighed (verifier/agent/weighing.py);
with ``verdict_probe`` on, one token with log-probabilities first says how sure the model is.
"""

from __future__ import annotations

import math
import time
from collections.abc import Generator, Iterator
from typing import TYPE_CHECKING

from verifier.agent import prompts
from verifier.agent.brief import CALLS as BRIEF_CALLS
from verifier.agent.brief import BriefWriter, gather
from verifier.agent.parsing import FinalAnswer, ParseError, Plan, cited_keys, parse_plan, parse_step
from verifier.agent.port import EvidenceItem
from verifier.agent.steps import AgentStep, spent
from verifier.agent.weighing import Weights, probe_logit

if TYPE_CHECKING:
    from verifier.agent.llm import Completion
    from verifier.agent.loop import Investigation

JUDGMENTS = ("supports", "contradicts", "silent")
OBSERVATION_LINES = 10  # a tool answer in the loop is cut to its header and first lines
PLAN_TOKENS = 120  # an impression sentence and a plan step; the grammar ends each at its period
READING_TOKENS = 4


def judge_sentence(inv: Investigation, item: EvidenceItem) -> tuple[str, Completion]:
    """The judgment of one sentence against the claim, and the call that gave it."""
    messages = [{"role": "system", "content": prompts.READING_SYSTEM},
                {"role": "user", "content": prompts.reading_prompt(inv.claim, item.text, item.payload.get("title", ""))}]
    grammar = prompts.READING_GRAMMAR if inv.config.use_grammar else None
    completion = inv.llm.complete(messages, grammar=grammar, max_tokens=READING_TOKENS, temperature=0)
    word = completion.text.strip().lower()
    judgment = next((j for j in JUDGMENTS if word.startswith(j[:5])), "silent")
    return judgment, completion


def read_passage(inv: Investigation, opening: EvidenceItem, tail_description: str) -> tuple[EvidenceItem, Completion]:
    """The model's reading of the head's article: its opening, what the tail is and the claim, one word asked
    for and the log-odds of Correct against Incorrect kept (a small model's answers lean Correct; its
    log-odds still rank claims). The opening becomes an evidence item carrying the reading."""
    claim = inv.claim
    messages = [{"role": "system", "content": prompts.PASSAGE_SYSTEM},
                {"role": "user", "content": prompts.passage_prompt(claim, opening.text, tail_description)}]
    completion = inv.llm.complete(messages, max_tokens=1, temperature=0, top_logprobs=10)
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


def _brief(inv: Investigation, *, judge: bool, read: bool) -> Iterator[AgentStep]:
    """The brief's action and its observation (with the model calls' tokens). ``judge``: the model judges the
    most relevant sentences (else they are listed unjudged); ``read``: the model reads the head's article."""
    claim = inv.claim
    arguments = {"head": claim.head, "relation": claim.relation, "tail": claim.tail}
    yield AgentStep("action", f"Evidence_Brief({claim.head}, {claim.relation}, {claim.tail})", tool="Evidence_Brief",
                    arguments=arguments)
    started = time.perf_counter()
    gathered = gather(claim, inv.tools.call, set(inv.tools.names) - (set() if read else {"Read_Passage"}))
    sentences = gathered.results.pop("Read_Sentences", [])
    openings = [i for r in gathered.results.pop("Read_Passage", []) for i in r.items]
    judged, calls, reading = [], [], None
    for item in (sentences[0].items if sentences else []):
        if not judge:
            judged.append((item, ""))
            continue
        judgment, completion = judge_sentence(inv, item)
        calls.append(completion)
        judged.append((EvidenceItem(item.kind, item.text, {**item.payload, "judgment": judgment}, item.source,
                                    display=item.display), judgment))
    if read and openings:
        reading, completion = read_passage(inv, openings[0], gathered.description_of(claim.tail))
        calls.append(completion)
    writer = BriefWriter(claim, inv.support)
    inv.brief_text = writer.write(gathered, judged, reading)
    inv.brief_digest = writer.digest
    for call in gathered.calls:
        inv.done_calls[call.casefold()] = [i.key for i in writer.items]
    yield AgentStep("observation", inv.brief_text, tool="Evidence_Brief", items=writer.items, **spent(*calls),
                    duration_ms=int((time.perf_counter() - started) * 1000))


def weigh_brief(inv: Investigation, *, read: bool = False) -> Iterator[AgentStep]:
    """The evidence mode: the brief's tools, their evidence weighed with no language model asked (the
    sentences are found, not judged). What the agent's model adds is the difference to this row; and since
    a verification costs a second, it labels enough runs to fit the weighing's evidence features. With
    ``read``, the reading mode: the same, plus the model's one-call reading of the head's article."""
    yield from _brief(inv, judge=False, read=read)
    said = "From the brief and the model's reading of the head's article" if read else "Without a language model"
    yield inv.verdict(FinalAnswer("", said), forced=False)


def _opening(inv: Investigation, *, digest: bool = False) -> str:
    """The claim, the brief (its digest for the planner) and the lessons of past cases."""
    parts = [prompts.claim_text(inv.claim), inv.brief_digest if digest else inv.brief_text, prompts.lessons_text(inv.memories)]
    return "\n\n".join(p for p in parts if p)


def _plan(inv: Investigation, messages: list[dict]) -> Generator[AgentStep, None, Plan]:
    started = time.perf_counter()
    request = prompts.COMPACT_PLAN_REQUEST.format(settled=prompts.SETTLED_STEP)
    ask = {"role": "user", "content": f"{_opening(inv, digest=True)}\n\n{request}\n{prompts.claim_reminder(inv.claim)}"}
    grammar = prompts.COMPACT_PLAN_GRAMMAR if inv.config.use_grammar else None
    completion = inv.llm.complete([*messages, ask], grammar=grammar, max_tokens=PLAN_TOKENS)
    plan = parse_plan(completion.text)
    inv.impression, inv.plan_text = plan.impression, completion.text.strip()
    messages += [ask, {"role": "assistant", "content": inv.plan_text}]
    yield AgentStep("plan", inv.plan_text, **spent(completion), duration_ms=int((time.perf_counter() - started) * 1000))
    return plan


def _needs_loop(inv: Investigation, plan: Plan) -> bool:
    """Whether the loop has work: the plan names a tool the brief did not already run, or gave no impression
    to answer with. A plan that answers from the brief names none; a small model asked what is missing names
    the brief's own tools again (and then repeats their calls), and only another tool can add evidence."""
    briefed = {name for name, _ in BRIEF_CALLS}
    return not plan.impression or any(name.casefold() in plan.steps.casefold()
                                      for name in inv.tools.names if name not in briefed)


def trimmed(observation: str) -> str:
    lines = observation.splitlines()
    if len(lines) <= OBSERVATION_LINES:
        return observation
    return "\n".join(lines[:OBSERVATION_LINES] + [f"(… {len(lines) - OBSERVATION_LINES} more lines not shown)"])


def weighed(weights: Weights | None, *signals: str) -> bool:
    """Whether what the model would say about ``signals`` (weighing.SIGNALS) can move the verdict: the weighing
    in force weighs one of them (or none is in force, and what the model says is its own evidence)."""
    return weights is None or any(weights.weighs(signal) for signal in signals)


def investigate(inv: Investigation) -> Iterator[AgentStep]:
    """All steps of a compact-profile investigation (see the module docstring)."""
    weights = inv.weigher() if inv.weigher is not None else None  # one lookup for both decisions
    judge = inv.config.judge_unweighed or weighed(weights, "supports", "contradicts")
    yield from _brief(inv, judge=judge, read=weighed(weights, "reading"))
    system = prompts.COMPACT_REACT_SYSTEM.format(abstain=prompts.ABSTAIN_RULE if inv.config.abstain else "")
    loop_request = prompts.compact_loop_request(inv.tool_list(), inv.config.t_max, inv.claim)
    messages: list[dict] = [{"role": "system", "content": system}]
    if inv.config.use_planning:
        plan = yield from _plan(inv, messages)
        if not _needs_loop(inv, plan):  # nothing left to fetch: the impression is the model's answer
            yield from inv.probe(messages)
            yield inv.verdict(FinalAnswer(plan.impression, plan.reason, cited_keys(plan.reason)), forced=False)
            return
        messages.append({"role": "user", "content": loop_request})
    else:
        messages.append({"role": "user", "content": f"{_opening(inv)}\n\n{loop_request}"})
    grammar = prompts.step_grammar(inv.tools.names, abstain=inv.config.abstain) if inv.config.use_grammar else None
    inv.corrected = False
    for _ in range(inv.config.t_max):
        started = time.perf_counter()
        completion = inv.llm.complete(messages, stop=inv.stop, grammar=grammar, max_tokens=inv.config.max_step_tokens)
        text = completion.text.strip()
        try:
            parsed = parse_step(text)
        except ParseError as error:
            yield AgentStep("thought", text or "(empty reply)", **spent(completion))
            yield from inv.observe(messages, text, f"Format error: {error} {prompts.claim_reminder(inv.claim)}")
            continue
        if parsed.final is not None:
            if (yield from inv.conclude(messages, completion, started, text, parsed)):
                return
            continue
        yield AgentStep("thought", parsed.thought, **spent(completion), duration_ms=int((time.perf_counter() - started) * 1000))
        observation = yield from inv.act(parsed.tool, parsed.arguments)
        inv.remember(messages, text, f"{trimmed(observation)}\n{prompts.claim_reminder(inv.claim)}")
        if inv.repeats:  # a small model that repeats a call has run out of questions: more steps only repeat it again
            break
    yield from inv.judgment(messages, reason="an action was repeated" if inv.repeats else "step limit reached")
