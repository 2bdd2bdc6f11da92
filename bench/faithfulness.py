"""Is what a curator reads as the agent's true? Real investigations by the embedded model, checked mechanically.

    DEBUG=1 .venv/bin/python bench/faithfulness.py [--kg codex-s] [--kg fb15k-237] [--runs 50] [--seed 7]
                                                   [--before] [--show 30]

For each KG (loaded first with ``manage.py load_kg``), ``--runs`` labelled triples of its validation split (half true,
half false: ``verifier.benchmarks.datasets.build_benchmark``, the draw ``evaluate`` makes) are investigated by the
embedded model (``KGV_LOCAL_MODEL``, default the demo's Qwen2.5-Coder-1.5B; or the endpoint ``LLM_BASE_URL`` names) in
the profile the model gets by default, one after the other, through ``execute_run`` as a worker would (the memory
bank seeded if empty, the weighing in force for the KG). Every model call is recorded.

Counted, with the check the product applies (verifier/agent/grounding.py): a sentence is a *statement about the KG or
a source* when it cites an evidence key or speaks of one (the KG, the brief, a passage, …); it is *unsupported* when the
items it cites do not hold every entity and figure it names (or it cites none, or keys never retrieved, or reads a
path or a score as the claim itself); *adopted* when it repeats an instruction found in the data.

- the model's words: its plan reasons, thoughts and final answers as it wrote them — what the run page showed as the
  agent's reasoning, and the explanation repeated, before this version;
- what a curator reads now: the stored plan and thought steps and the run's explanation, product annotations
  ("[withheld: …]", "[unverified: …]", headers) left out, checked again, and every evidence key a weighed
  explanation cites looked up;
- ``--before``: each triple also investigated with the planner's previous request (one sentence of its own instead
  of the keys of the brief lines, ``PREVIOUS_PLAN_REQUEST`` below), its words counted the same way: how often the
  model's statements were unsupported when it was asked to write them;
- instruction-like text: runs whose data held text worded as an instruction, and runs whose shown text adopts one.

``--show N`` prints N runs (spread over the KGs) in full for reading by hand: the claim, its label, the verdict, the
plan, the thoughts and the explanation as a curator reads them, and the model's own words. Prints figures only.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

PROJECT_DIR = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(PROJECT_DIR))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "kgv_web.settings")
os.environ.setdefault("DEBUG", "1")
os.environ.setdefault("LOG_LEVEL", "WARNING")

import django  # noqa: E402

django.setup()

from kgv_web.embedded_llm import provide_local_llm  # noqa: E402
from verifier import confidence  # noqa: E402
from verifier.agent import loop, prompts  # noqa: E402
from verifier.agent.compact import CompactProfile  # noqa: E402
from verifier.agent.grounding import ADOPTED, GROUNDED, OWN, UNSUPPORTED, Grounding, sentences  # noqa: E402
from verifier.agent.parsing import ParseError, parse_plan, parse_step  # noqa: E402
from verifier.agent.steps import KeyedItem, Memory, PlanStep  # noqa: E402
from verifier.benchmarks.datasets import BenchmarkError, build_benchmark  # noqa: E402
from verifier.memory import bank  # noqa: E402
from verifier.models import KnowledgeGraph, Run, VerificationTask  # noqa: E402
from verifier.runner import claim_of, execute_run  # noqa: E402
from verifier.services import start_run  # noqa: E402
from verifier.wiring import build_llm  # noqa: E402

PROVENANCE = "bench/faithfulness.py"

# The compact planner's request before it asked for keys instead of a sentence (and its grammar's impression rule).
PREVIOUS_PLAN_REQUEST = """First write your initial impression and plan, in exactly this form:
=== Initial Impression ===
[Correct] or [Incorrect], then Because and one sentence citing brief keys
=== Strategic Plan ===
[Step 1] {settled} when the brief settles the claim; otherwise Check, then what is missing or
conflicting and which tool would settle it."""
PREVIOUS_IMPRESSION_RULE = 'impression ::= "=== Initial Impression ===\\n[" verdict "] Because " sentence'
IMPRESSION_RULE = re.compile(r"^impression ::= .*$", re.MULTILINE)


class PreviousPlanner(CompactProfile):
    """The compact profile with the planner's previous request: its impression is a sentence of the model's own."""

    def plan(self, ctx, briefing, messages):
        request = PREVIOUS_PLAN_REQUEST.format(settled=prompts.SETTLED_STEP)
        ask = {"role": "user", "content": f"{self.context(ctx, briefing.digest)}\n\n{request}\n{prompts.claim_reminder(ctx.claim)}"}
        grammar = (IMPRESSION_RULE.sub(lambda _: PREVIOUS_IMPRESSION_RULE, prompts.compact_plan_grammar([]))
                   if ctx.config.use_grammar else None)
        return ctx.llm.complete([*messages, ask], grammar=grammar, max_tokens=120), [ask]


@contextmanager
def previous_planner():
    """The loop's compact profile replaced by PreviousPlanner for the runs made inside (this process only)."""
    kept = loop.PROFILES["compact"]
    loop.PROFILES["compact"] = PreviousPlanner
    try:
        yield
    finally:
        loop.PROFILES["compact"] = kept


class Recorder:
    """The LLM port, keeping every completion's text with the kind of call that asked for it."""

    def __init__(self, llm):
        self.llm, self.model = llm, llm.model
        self.base_url, self.supports_grammar = getattr(llm, "base_url", ""), getattr(llm, "supports_grammar", False)
        self.said: list[tuple[str, str]] = []  # (plan | step | judgment | reading, text)

    def complete(self, messages, **kwargs):
        completion = self.llm.complete(messages, **kwargs)
        last, system = messages[-1]["content"] or "", messages[0]["content"] or ""
        if system in (prompts.READING_SYSTEM, prompts.PASSAGE_SYSTEM) or kwargs.get("max_tokens") == 1:
            kind = "reading"
        elif "First write your initial impression" in last or system.startswith("You are a verification strategist"):
            kind = "plan"
        elif last.startswith("The step limit is reached"):
            kind = "judgment"
        else:
            kind = "step"
        self.said.append((kind, completion.text))
        return completion


@dataclass
class Tally:
    runs: int = 0
    statements: int = 0  # about the KG or a source
    unsupported: int = 0
    own: int = 0  # statements of the model's own, naming no source (shown before as reasoning; now marked unverified)
    adopted: int = 0
    runs_unsupported: int = 0
    by_reason: Counter = field(default_factory=Counter)

    def add(self, parts: list) -> None:
        self.runs += 1
        statements = [p for p in parts if p.status in (GROUNDED, UNSUPPORTED)]
        bad = [p for p in parts if p.status == UNSUPPORTED]
        self.statements += len(statements)
        self.unsupported += len(bad)
        self.adopted += sum(p.status == ADOPTED for p in parts)
        self.own += sum(p.status == OWN for p in parts)
        self.runs_unsupported += bool(bad)
        self.by_reason.update(re.sub(r"\(E[\d, E]+\)|E\d+|names .*|figure .*", "…", p.reason) for p in bad)

    def line(self) -> str:
        share = f" ({self.unsupported / self.statements:.0%})" if self.statements else ""
        return (f"{self.statements} statements about the KG or a source, {self.unsupported} unsupported by the evidence "
                f"they cite{share}, in {self.runs_unsupported} of {self.runs} runs; {self.own} of its own reading naming no "
                f"source; {self.adopted} repeating an instruction")


@dataclass
class Checked:
    run: Run
    label: bool
    model_words: list[str]
    shown: list[str]
    before: list[str] = field(default_factory=list)  # the model's words with the planner's previous request


def model_words(said: list[tuple[str, str]]) -> list[str]:
    """The model's prose a curator was shown as its reasoning: plan reasons, thoughts and final answers."""
    words = []
    for kind, text in said:
        if kind == "plan":
            words.append(parse_plan(text).reason)
        elif kind in ("step", "judgment"):
            try:
                step = parse_step(text)
            except ParseError:
                words.append(text)
                continue
            words += [step.thought, step.final.explanation if step.final else ""]
    return [w for w in words if w.strip()]


_ANNOTATION = re.compile(r"\[(withheld|unverified): [^\]]*\]")
_STEP_LABEL = re.compile(r"^\s*\[Step \d+\]\s*")
_PRODUCT_LINE = re.compile(r"^\s*(=+.*=+|\(.*\))\s*$")


def shown_words(run: Run) -> list[str]:
    """What a curator reads as the model's words now: plan and thought steps without the product's annotations,
    headers and notes, and a verdict the model's answer decided explained in its words."""
    texts = []
    for content in run.steps.filter(kind__in=("plan", "thought")).order_by("seq").values_list("content", flat=True):
        if content.startswith("(verdict probe:"):
            continue
        content = content.removeprefix(PlanStep.HEADING)
        content = re.sub(r"^\([^)\n]*mandatory judgment\)\n", "", content)
        lines = [_STEP_LABEL.sub("", _ANNOTATION.sub(" ", line)) for line in content.splitlines() if not _PRODUCT_LINE.match(line)]
        texts.append(re.sub(r"\[(Correct|Incorrect)\] Because", "", "\n".join(lines)))
    assessment = run.assessment or {}
    by_model = assessment.get("decided_by") == "model" or (assessment.get("p_true") is None and run.verdict in ("correct", "incorrect"))
    if by_model and not run.explanation.startswith("The language model"):
        texts.append(run.explanation)  # the model's answer stood: the explanation is its grounded words
    return [t for t in texts if t.strip()]


def explanation_keys_found(run: Run) -> bool:
    keys = set(run.support_items.values_list("key", flat=True))
    return set(re.findall(r"\[(E\d+)\]", run.explanation)) <= keys


def grounding_of(run: Run) -> Grounding:
    items = {i.key: KeyedItem(i.key, i.kind, i.text, i.payload, i.source, i.content_hash) for i in run.support_items.all()}
    memories = [Memory(u.entry_id, u.entry.triple_text, u.entry.trajectory, u.entry.verdict, u.similarity, u.entry.lesson)
                for u in run.memories_used.select_related("entry")]
    return Grounding.of_run(claim_of(run.task), items, memories)


def investigate(kg: KnowledgeGraph, triple, llm) -> tuple[Run, Recorder]:
    task, _ = VerificationTask.objects.get_or_create(kg=kg, head_id=triple.head_id, relation_id=triple.relation_id,
                                                     tail_id=triple.tail_id, defaults={"source": PROVENANCE})
    recorder = Recorder(llm)
    run = start_run(task=task, config={}, queue=False)
    execute_run(run.pk, llm=recorder, await_structure=False)
    run.refresh_from_db()
    return run, recorder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kg", action="append", help="a loaded KG with a validation split (default: codex-s)")
    parser.add_argument("--runs", type=int, default=50, help="investigations per KG (default 50)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--before", action="store_true", help="also run each triple with the planner's previous request")
    parser.add_argument("--show", type=int, default=0, help="print this many runs in full, for reading by hand")
    args = parser.parse_args()
    provide_local_llm()  # no LLM_BASE_URL: the embedded model, stopped when this command ends
    llm = build_llm()
    if seeded := bank.seed_if_empty():
        print(seeded)
    for model in confidence.seed_shipped_models():  # the weighing make demo puts in force
        print(f"Confidence model #{model.pk} in force ({model.source})")
    shown: list[Checked] = []
    for name in args.kg or ["codex-s"]:
        kg = KnowledgeGraph.objects.filter(name=name).first()
        if kg is None:
            sys.exit(f"faithfulness: no KG named {name!r}; load it first (manage.py load_kg {name})")
        try:
            benchmark = build_benchmark(name, n=args.runs, seed=args.seed)
        except BenchmarkError as error:
            sys.exit(f"faithfulness: {error}")
        words, now, before, failed = Tally(), Tally(), Tally(), 0
        instructed = adopting = missing_keys = 0
        started = time.perf_counter()
        for index, triple in enumerate(benchmark.triples, start=1):
            run, recorder = investigate(kg, triple, llm)
            if run.status != Run.Status.SUCCEEDED:
                failed += 1
                print(f"  run {run.pk} {run.status}: {run.error}", flush=True)
                continue
            grounding = grounding_of(run)
            said, reads = model_words(recorder.said), shown_words(run)
            words.add([p for text in said for p in grounding.check(text).parts])
            now_parts = [p for text in reads for p in grounding.check(text).parts]
            now.add(now_parts)
            instructed += bool(grounding.instructions)
            adopting += any(p.status == ADOPTED for p in now_parts)
            missing_keys += not explanation_keys_found(run)
            checked = Checked(run, triple.label, said, reads)
            if args.before:
                with previous_planner():
                    earlier, earlier_recorder = investigate(kg, triple, llm)
                if earlier.status == Run.Status.SUCCEEDED:
                    checked.before = model_words(earlier_recorder.said)
                    before.add([p for text in checked.before for p in grounding_of(earlier).check(text).parts])
            shown.append(checked)
            print(f"  {index}/{len(benchmark.triples)} run {run.pk}: {run.verdict or run.status} "
                  f"({time.perf_counter() - started:.0f} s)", flush=True)
        minutes = (time.perf_counter() - started) / 60
        print(f"\n{name}: {words.runs} investigations by {llm.model} ({failed} failed), {minutes:.1f} min"
              f"{' with the previous planner too' if args.before else ''}")
        if args.before:
            print(f"  before — the planner asked for a sentence: {before.line()}")
            print(f"    reasons: {dict(before.by_reason.most_common(5))}")
        print(f"  the model's own words now: {words.line()}")
        print(f"    reasons: {dict(words.by_reason.most_common(5))}")
        print(f"  what a curator reads as the agent's: {now.line()}")
        print(f"  explanations citing a key the run never retrieved: {missing_keys}")
        print(f"  runs whose data held instruction-like text: {instructed}; runs whose shown text adopts one: {adopting}")
    for checked in _spread(shown, args.show):
        _print_run(checked)


def _spread(runs: list[Checked], n: int) -> list[Checked]:
    if n <= 0 or not runs:
        return []
    step = max(1, len(runs) // n)
    return runs[::step][:n]


def _print_run(checked: Checked) -> None:
    run = checked.run
    claim = claim_of(run.task)
    print(f"\n=== run {run.pk} on {run.task.kg.name}: {claim.head_label} — {claim.relation_label} — {claim.tail_label} "
          f"(gold {'true' if checked.label else 'false'}); verdict {run.verdict or '—'}")
    for step in run.steps.filter(kind__in=("plan", "thought")).order_by("seq"):
        print(f"[{step.kind}] {step.content}")
    print(f"[explanation] {run.explanation}")
    cited = sorted(set(re.findall(r"\[(E\d+)\]", " ".join([run.explanation, *checked.shown]))), key=lambda k: int(k[1:]))
    for item in run.support_items.filter(key__in=cited):
        print(f"    [{item.key}] {item.text[:300]}")
    print("[the model's own words] " + " | ".join(" ".join(sentences(w)) for w in checked.model_words))
    if checked.before:
        print("[with the previous planner] " + " | ".join(" ".join(sentences(w)) for w in checked.before))


if __name__ == "__main__":
    main()
