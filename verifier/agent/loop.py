"""The verification agent: memory → schema-aware plan → ReAct loop → final answer or mandatory judgment.

``Investigation.steps()`` is one generator yielding each step the moment it happens; the caller persists
and streams them. The agent gets its world through small ports (an LLM, a toolbox, a memory lookup) and
imports nothing from Django. Baselines of the same model (zero-shot, CoT, self-consistency, standard
RAG) run through the same generator so every mode leaves the same kind of record.
"""

from __future__ import annotations

import json
import math
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from typing import NamedTuple

from verifier.agent import compact, prompts
from verifier.agent.llm import LLM, Completion
from verifier.agent.parsing import FinalAnswer, ParseError, parse_final, parse_plan, parse_step
from verifier.agent.port import Tools
from verifier.agent.steps import AgentStep, Claim, Memory, spent
from verifier.agent.support import SupportSet
from verifier.agent.weighing import (
    BRIEF_MODES,
    Weigher,
    decided,
    dispute_reason,
    evidence_from,
    probe_logit,
    summary,
    unweighed,
    weighed_keys,
)

MODES = ("agent", "zero-shot", "cot", "self-consistency", "rag", "embedding", "kge", "rules", "evidence", "reading")
# Baselines that decide from one structural tool's calibrated probability, without a language model. `embedding` is
# the embedding classifier alone; `kge` the plausibility (the embedding, the entities' text and the rules weighed
# together).
class StructuralBaseline(NamedTuple):
    """A baseline deciding by one tool's calibrated probability: the tool, the evidence field holding it, what it is."""
    tool: str
    field: str
    what: str


STRUCTURAL_MODES = {
    "embedding": StructuralBaseline("KG_Plausibility", "embedding_probability", "the embedding classifier's calibrated probability"),
    "kge": StructuralBaseline("KG_Plausibility", "probability", "the calibrated structural probability"),
    "rules": StructuralBaseline("KG_Rules", "probability", "the calibrated structural probability"),
}
MODEL_FREE_MODES = (*STRUCTURAL_MODES, "evidence")
MODEL_ONLY_MODES = ("zero-shot", "cot", "self-consistency")  # the model alone, no tool
STOP = ["Observation:", "\nObservation", "[Observation]"]
PROFILES = ("paper", "compact")


MemoryLookup = Callable[[str, int, str], list[Memory]]  # (claim text, k, relation label) → memories


@dataclass(frozen=True)
class AgentConfig:
    mode: str = "agent"
    t_max: int = 10
    memory_k: int = 3
    use_memory: bool = True
    use_planning: bool = True
    kg_tools: bool = True
    external_tools: bool = True
    structural_tools: bool = True  # KG_Plausibility and KG_Rules
    abstain: bool = False
    use_grammar: bool = False  # GBNF-constrained steps, for small local models on llama.cpp
    tool_calling: bool = False  # the endpoint's native tool calls instead of "Action: Tool(args)" text
    # "paper": the method as published (for capable endpoints); "compact": evidence brief, focused reading and a
    # short loop for small local models (verifier/agent/compact.py).
    profile: str = "paper"
    max_step_tokens: int = 384
    # After the answer, one token with log-probabilities: how sure the model is (a weighing feature, for small models
    # that lean Correct in their answers but may still rank claims in their log-odds).
    verdict_probe: bool = False
    # The compact profile's sentence judgments (one call each) are asked only while the weighing in force weighs
    # them; on, they are asked always (to label runs for fitting a weighing that might).
    judge_unweighed: bool = False
    samples: int = 5  # self-consistency
    sample_temperature: float = 0.7

    @property
    def uses_structure(self) -> bool:
        """Whether the structural model bears on the verdict (every mode but the model-only baselines)."""
        return self.structural_tools and self.mode not in MODEL_ONLY_MODES

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"unknown mode {self.mode!r}; one of {', '.join(MODES)}")
        if self.profile not in PROFILES:
            raise ValueError(f"unknown profile {self.profile!r}; one of {', '.join(PROFILES)}")
        for name, spec in self.__dataclass_fields__.items():
            _check_setting(name, getattr(self, name), spec.type)

    @classmethod
    def from_dict(cls, data: dict) -> AgentConfig:
        """The configuration a run's JSON asks for; unknown keys, wrong types and values outside BOUNDS are
        refused with a ValueError that names them."""
        if not isinstance(data, dict):
            raise ValueError('a configuration is a JSON object, e.g. {"t_max": 8}')
        unknown = sorted(set(data) - set(cls.__dataclass_fields__))
        if unknown:
            raise ValueError(f"unknown setting(s) {', '.join(map(str, unknown))}; known: {', '.join(cls.__dataclass_fields__)}")
        return cls(**data)


# What a run may ask for: every setting that spends model calls or tokens is bounded.
BOUNDS = {"t_max": (1, 30), "memory_k": (0, 10), "max_step_tokens": (16, 4096), "samples": (1, 20),
          "sample_temperature": (0.0, 2.0)}


def _check_setting(name: str, value, kind: str) -> None:
    if kind == "bool":
        if not isinstance(value, bool):
            raise ValueError(f"{name} must be true or false, not {value!r}")
        return
    if kind == "int" and (isinstance(value, bool) or not isinstance(value, int)):
        raise ValueError(f"{name} must be a whole number, not {value!r}")
    if kind == "float" and (isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value)):
        raise ValueError(f"{name} must be a number, not {value!r}")
    if kind == "str" and not isinstance(value, str):
        raise ValueError(f"{name} must be a string, not {value!r}")
    if name in BOUNDS:
        low, high = BOUNDS[name]
        if not low <= value <= high:
            raise ValueError(f"{name} must be between {low} and {high}, not {value!r}")


def _step_from(kind: str, completion: Completion, started: float, content: str) -> AgentStep:
    return AgentStep(kind, content, **spent(completion), duration_ms=int((time.perf_counter() - started) * 1000))


class Investigation:
    """State of one run; ``steps()`` drives it."""

    def __init__(self, claim: Claim, config: AgentConfig, *, llm: LLM, tools: Tools, memory: MemoryLookup | None = None,
                 weigher: Weigher | None = None):
        self.claim, self.config, self.llm, self.tools = claim, config, llm, tools
        self.memory = memory
        self.weigher = weigher
        self.support = SupportSet()
        self.memories: list[Memory] = []
        self.impression = ""
        self.plan_text = ""
        self.done_calls: dict[str, list[str]] = {}  # action already taken → the evidence keys it returned
        self.repeats = 0  # actions asked again after they ran
        self.corrected = False  # the one correction round of a Final Answer's citations was used
        self.brief_text = ""
        self.brief_digest = ""
        self.stop = STOP
        self.answer_logit: float | None = None

    # ------------------------------------------------------------------------------ entry point

    def steps(self) -> Iterator[AgentStep]:
        if self.config.use_memory and self.memory is not None and self.config.mode == "agent":
            self.memories = self.memory(self.claim.text, self.config.memory_k, self.claim.relation_label)
        mode = self.config.mode
        if mode == "agent":
            yield from self._agent()
        elif mode in ("zero-shot", "cot"):
            yield from self._single(mode)
        elif mode == "self-consistency":
            yield from self._self_consistency()
        elif mode in STRUCTURAL_MODES:
            yield from self._structural(STRUCTURAL_MODES[mode])
        elif mode in BRIEF_MODES:
            yield from compact.weigh_brief(self, read=mode == "reading")
        else:
            yield from self._rag()

    def _complete(self, messages: list[dict], **kwargs) -> Completion:
        return self.llm.complete(messages, **kwargs)

    # ------------------------------------------------------------------------------ the agent

    def _context(self) -> str:
        parts = [prompts.claim_text(self.claim), prompts.schema_text(self.tools.relation_schema()), prompts.memories_text(self.memories)]
        return "\n\n".join(p for p in parts if p)

    def _plan(self) -> Iterator[AgentStep]:
        started = time.perf_counter()
        system = prompts.PLANNING_SYSTEM.format(tools=self.tool_list())
        completion = self._complete([{"role": "system", "content": system}, {"role": "user", "content": self._context()}],
                                    max_tokens=self.config.max_step_tokens)
        plan = parse_plan(completion.text)
        self.impression, self.plan_text = plan.impression, completion.text.strip()
        yield _step_from("plan", completion, started, self.plan_text)

    def tool_list(self) -> str:
        return self.tools.describe()

    def _agent(self) -> Iterator[AgentStep]:
        if self.config.profile == "compact":
            yield from compact.investigate(self)
            return
        if self.config.use_planning:
            yield from self._plan()
        native = self.config.tool_calling and not self.config.use_grammar
        system = (prompts.REACT_TOOLS_SYSTEM if native else prompts.REACT_SYSTEM).format(
            tools=self.tool_list(), t_max=self.config.t_max, abstain=prompts.ABSTAIN_RULE if self.config.abstain else "")
        opening = self._context()
        if self.plan_text:
            opening += f"\n\nObservation 0 (your initial impression and plan):\n{self.plan_text}"
        messages = [{"role": "system", "content": system}, {"role": "user", "content": opening + "\n\nBegin."}]
        grammar = None
        if self.config.use_grammar:
            grammar = prompts.step_grammar(self.tools.names, abstain=self.config.abstain)
        tools = self.tools.openai_tools() if native else None
        self.corrected = False
        for _ in range(self.config.t_max):
            started = time.perf_counter()
            if native:
                completion = self._complete(messages, tools=tools, max_tokens=self.config.max_step_tokens)
            else:
                completion = self._complete(messages, stop=STOP, grammar=grammar, max_tokens=self.config.max_step_tokens)
            text = completion.text.strip()
            if completion.tool_calls:
                call = completion.tool_calls[0]  # one action per step: the others are not run
                thought = text.removeprefix("Thought:").strip() or f"(calls {call['name']})"
                yield _step_from("thought", completion, started, thought)
                observation = yield from self.act(call["name"], call["arguments"])
                messages.append({"role": "assistant", "content": text or None, "tool_calls": [{
                    "id": call["id"], "type": "function",
                    "function": {"name": call["name"], "arguments": json.dumps(call["arguments"])}}]})
                messages.append({"role": "tool", "tool_call_id": call["id"], "content": observation})
                continue
            try:
                parsed = parse_step(text)
            except ParseError as error:
                yield _step_from("thought", completion, started, text or "(empty reply)")
                yield from self.observe(messages, text, f"Format error: {error}")
                continue
            if parsed.final is not None:
                verdict = yield from self.conclude(messages, completion, started, text, parsed)
                if verdict:
                    return
                continue
            yield _step_from("thought", completion, started, parsed.thought)
            observation = yield from self.act(parsed.tool, parsed.arguments)
            self.remember(messages, text, observation)
        yield from self.judgment(messages)

    def act(self, tool: str, arguments) -> Iterator[AgentStep]:
        """The action step and its observation (evidence keyed); returns the observation text."""
        arguments = arguments if isinstance(arguments, dict) else list(arguments)
        shown = arguments if isinstance(arguments, dict) else {str(i): a for i, a in enumerate(arguments)}
        signature = f"{tool}({', '.join(map(str, shown.values()))})"
        yield AgentStep("action", signature, tool=tool, arguments=shown)
        if signature.casefold() in self.done_calls:
            # Small models loop on the same few calls; the answer would not change, so say so instead.
            self.repeats += 1
            keys = self.done_calls[signature.casefold()]
            observation = (f"You already ran {signature}; its evidence ({', '.join(keys) or 'none'}) is above and has not "
                           f"changed. Do not repeat an action: use a different tool or arguments, or give the Final Answer.")
            yield AgentStep("observation", observation, tool=tool)
            return observation
        started = time.perf_counter()
        observation, items = self.support.observe(self.tools.call(tool, arguments))
        self.done_calls[signature.casefold()] = [item.key for item in items]
        yield AgentStep("observation", observation, tool=tool, items=items, duration_ms=int((time.perf_counter() - started) * 1000))
        return observation

    def conclude(self, messages: list[dict], completion: Completion, started: float, text: str, parsed) -> Iterator[AgentStep]:
        """A Final Answer: its citations are checked (sent back once if wrong), then the verdict. True if concluded."""
        final = parsed.final
        problem = self._citation_problem(final)
        if problem and not self.corrected:
            self.corrected = True
            yield _step_from("thought", completion, started, text)
            yield from self.observe(messages, text, problem)
            return False
        yield _step_from("thought", completion, started, parsed.thought or text)
        yield from self.probe([*messages, {"role": "assistant", "content": text}])
        yield self.verdict(final, forced=False)
        return True

    def probe(self, messages: list[dict]) -> Iterator[AgentStep]:
        """How sure the model is of its verdict: one token with log-probabilities after its answer (agent mode;
        endpoints without log-probabilities leave it unknown)."""
        if self.config.mode != "agent" or not self.config.verdict_probe:
            return
        started = time.perf_counter()
        completion = self._complete([*messages, {"role": "user", "content": prompts.verdict_probe(self.claim)}],
                                    max_tokens=1, temperature=0, top_logprobs=10)
        self.answer_logit = probe_logit(completion.first_token_logprobs)
        if self.answer_logit is None and completion.first_token_logprobs:
            summary_text = "(verdict probe: neither Correct nor Incorrect is among the model's likeliest first words)"
        elif self.answer_logit is None:
            summary_text = "(verdict probe: the endpoint returned no log-probabilities)"
        else:
            p = 1 / (1 + math.exp(-self.answer_logit))
            summary_text = f"(verdict probe: the model puts P(Correct) at {p:.2f} against P(Incorrect) at {1 - p:.2f})"
        yield _step_from("thought", completion, started, summary_text)

    def observe(self, messages: list[dict], said: str, observation: str) -> Iterator[AgentStep]:
        self.remember(messages, said, observation)
        yield AgentStep("observation", observation)

    def remember(self, messages: list[dict], said: str, observation: str) -> None:
        messages.append({"role": "assistant", "content": said})
        messages.append({"role": "user", "content": f"Observation: {observation}"})

    def _citation_problem(self, final: FinalAnswer) -> str:
        valid, unknown = self.support.check(final.cited)
        if unknown:
            return (f"Your answer cites {', '.join(unknown)}, which no observation contained. Cite only retrieved "
                    f"evidence keys ({self.support.keys_text()}) and give the Final Answer again.")
        if not final.cited and self.support.items and final.verdict != "not_enough_evidence":
            return (f"Your answer cites no evidence. Give the Final Answer again, citing the keys of the evidence "
                    f"it rests on ({self.support.keys_text()}).")
        return ""

    def verdict(self, final: FinalAnswer, *, forced: bool, note: str = "") -> AgentStep:
        valid, _ = self.support.check(final.cited)
        verdict = final.verdict
        if verdict == "not_enough_evidence" and not self.config.abstain and self.impression:
            verdict = self.impression
            note = note or "Abstention is off; the initial impression stands."
        explanation, confidence, assessment = final.explanation, None, {}
        if self.config.mode in BRIEF_MODES or (self.config.mode == "agent" and verdict in ("correct", "incorrect")):
            verdict, explanation, confidence, assessment, weighed = self._weighed(verdict, explanation)
            assessment["disputed_reason"] = dispute_reason(verdict, assessment["structural_probability"])
            valid = list(dict.fromkeys([*valid, *weighed]))
        label = {"correct": "Correct", "incorrect": "Incorrect", "not_enough_evidence": "Not enough evidence"}[verdict]
        content = f"[{label}] {explanation}" + (f"\n({note})" if note else "")
        return AgentStep("verdict", content, verdict=verdict, explanation=explanation, cited=valid,
                         forced=forced, confidence=confidence, assessment=assessment)

    def _weighed(self, answer: str, explanation: str) -> tuple[str, str, float | None, dict, list[str]]:
        """The model's answer weighed with the run's evidence: (verdict, explanation, confidence, assessment, the
        evidence keys of the weighed signals, which the verdict cites).

        The paper profile keeps the model's answer as the verdict; the compact profile's verdict is the weighed
        decision, because a small model cannot weigh evidence (it says Correct to most claims) but reads and
        judges sentences well. Without a fitted weighing the answer stands, with no confidence (the evidence
        mode, which has no answer, then has no verdict either). ``assessment["decided_by"]`` says which decided a
        weighed verdict: "model" or "evidence"."""
        evidence = evidence_from(((k.key, k.kind, k.payload) for k in self.support.items.values()), answer, self.answer_logit)
        assessment = {**asdict(evidence), "p_true": None, "confidence_model": None, "confidence_fold": None}
        weights = self.weigher() if self.weigher is not None else None
        if weights is None:
            if not answer:
                explanation = "No fitted weighing is in force (manage.py calibrate), so the evidence alone decides nothing."
            return answer or "not_enough_evidence", explanation, None, assessment, []
        p_true = weights.probability(evidence)
        assessment.update(p_true=round(p_true, 4), confidence_model=weights.model_id, confidence_fold=weights.fold,
                          unweighed=unweighed(evidence, weights))
        cited = weighed_keys(evidence, weights)
        if answer and self.config.profile != "compact":
            assessment["decided_by"] = "model"
            return answer, explanation, p_true if answer == "correct" else 1 - p_true, assessment, cited
        assessment["decided_by"] = "evidence"
        verdict, confidence = decided(p_true)
        weighing = summary(evidence, p_true, weights)
        if not answer:  # a brief mode: the explanation says what was weighed
            explanation = f"{explanation}, {weighing}."
        elif verdict != answer:
            explanation = f"The evidence outweighs the model's answer ({answer.title()}: {explanation}): {weighing}."
        else:  # the verdict is the weighing's, which agrees with the model: say what it weighed
            explanation = f"{explanation.strip().rstrip('.')}; {weighing}."
        return verdict, explanation, confidence, assessment, cited

    def judgment(self, messages: list[dict], reason: str = "step limit reached") -> Iterator[AgentStep]:
        started = time.perf_counter()
        grammar = prompts.FINAL_GRAMMAR if self.config.use_grammar else None
        completion = self._complete([*messages, {"role": "user", "content": prompts.JUDGMENT}], grammar=grammar,
                                    max_tokens=self.config.max_step_tokens)
        yield _step_from("thought", completion, started, f"({reason}: mandatory judgment)\n{completion.text.strip()}")
        yield from self.probe([*messages, {"role": "user", "content": prompts.JUDGMENT},
                               {"role": "assistant", "content": completion.text.strip()}])
        final = parse_final(completion.text)
        if final is None:
            if not self.impression:  # no answer anywhere: the run fails rather than invent one
                raise RuntimeError(f"the model gave no readable answer, even when asked for its judgment "
                                   f"(it wrote {completion.text.strip()[:200]!r})")
            final = FinalAnswer(self.impression, "The judgment could not be read; the initial impression stands.")
        yield self.verdict(final, forced=True)

    # ------------------------------------------------------------------------------ baselines

    def _ask_once(self, mode: str, user: str, *, temperature: float | None = None) -> Iterator[AgentStep]:
        """One call of a baseline that must end in a Final Answer: its text as a thought, then the verdict
        (an unparsable answer is recorded as such and counts as wrong in evaluations)."""
        started = time.perf_counter()
        system = prompts.BASELINE_SYSTEM[mode]
        grammar = prompts.BASELINE_GRAMMAR[mode] if self.config.use_grammar else None
        messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
        completion = self._complete(messages, grammar=grammar, temperature=temperature, max_tokens=self.config.max_step_tokens)
        yield _step_from("thought", completion, started, completion.text.strip())
        final = parse_final(completion.text)
        if final is None:
            yield AgentStep("verdict", "(unparsable answer)", verdict=None, explanation=completion.text.strip())
            return
        yield self.verdict(final, forced=False)

    def _single(self, mode: str, *, temperature: float | None = None) -> Iterator[AgentStep]:
        yield from self._ask_once(mode, prompts.claim_text(self.claim), temperature=temperature)

    def _self_consistency(self) -> Iterator[AgentStep]:
        votes: Counter[str] = Counter()
        for _ in range(self.config.samples):
            for step in self._single("cot", temperature=self.config.sample_temperature):
                if step.kind == "verdict":
                    if step.verdict:
                        votes[step.verdict] += 1
                else:
                    yield step
        if not votes:
            yield AgentStep("verdict", "(no sample gave a parsable answer)", verdict=None)
            return
        (winner, count), total = votes.most_common(1)[0], sum(votes.values())
        explanation = f"Majority of {total} sampled answers: {dict(votes)}."
        step = self.verdict(FinalAnswer(winner, explanation), forced=False)
        step.confidence = count / total
        yield step

    def _structural(self, baseline: StructuralBaseline) -> Iterator[AgentStep]:
        """A structural baseline: one tool on the claim; the calibrated probability in its evidence's field decides
        at 0.5."""
        tool, field = baseline.tool, baseline.field
        arguments = [self.claim.head, self.claim.relation, self.claim.tail]
        yield AgentStep("action", f"{tool}({', '.join(arguments)})", tool=tool, arguments={str(i): a for i, a in enumerate(arguments)})
        started = time.perf_counter()
        text, items = self.support.observe(self.tools.call(tool, arguments))
        yield AgentStep("observation", text, tool=tool, items=items, duration_ms=int((time.perf_counter() - started) * 1000))
        scored = next((item for item in items if item.payload.get(field) is not None), None)
        if scored is None:
            yield AgentStep("verdict", f"(no calibrated probability: {text.splitlines()[0] if text else 'no answer'})", verdict=None)
            return
        probability = float(scored.payload[field])
        verdict = "correct" if probability >= 0.5 else "incorrect"
        explanation = f"{baseline.what} is {probability:.2f} [{scored.key}]"
        step = self.verdict(FinalAnswer(verdict, explanation, [scored.key]), forced=False)
        step.confidence = probability if verdict == "correct" else 1 - probability
        yield step

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

    def _rag(self) -> Iterator[AgentStep]:
        """Standard RAG: the same retrieval, run in a fixed order, all evidence in one prompt."""
        observations = []
        for tool, arguments in self.RAG_CALLS:
            if tool not in self.tools.names:
                continue
            args = arguments(self.claim)
            yield AgentStep("action", f"{tool}({', '.join(args)})", tool=tool, arguments={str(i): a for i, a in enumerate(args)})
            started = time.perf_counter()
            text, items = self.support.observe(self.tools.call(tool, args))
            observations.append(text)
            yield AgentStep("observation", text, tool=tool, items=items, duration_ms=int((time.perf_counter() - started) * 1000))
        evidence = "\n\n".join(observations) or "(no evidence retrieved)"
        yield from self._ask_once("rag", f"{prompts.claim_text(self.claim)}\n\nRetrieved evidence:\n{evidence}")

