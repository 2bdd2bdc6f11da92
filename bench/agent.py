"""Agent orchestration under load, and prompt tokens per verification, against a scripted OpenAI-compatible server.

    make install && DEBUG=1 .venv/bin/python bench/agent.py [--runs 50] [--delay 0.2] [--steps 4]
                                                            [--skip-concurrency] [--skip-tokens]

The model is ``tests/openai_server.py``'s ScriptedOpenAIServer (real HTTP, real ``openai`` SDK in the client),
answering every chat call after ``--delay`` seconds with one fixed trajectory per run: a plan, N Thought/Action
steps on real tools (KG_Neighbor, KG_Path, Wiki_Evidence, KG_Definition on the CoDEx-S KG), then a Final
Answer citing the first evidence key it was shown ([E1]), so the citation check never re-prompts. The tasks are
CoDEx-S validation triples (``../shared/data/codex-s/triples/valid.txt``, the KG is loaded if missing); the
VerificationTask rows are reused across invocations, every invocation creates fresh Run rows.

1. Concurrency (the production path). A Celery worker is started as a subprocess (``--pool threads
   --concurrency <runs>``, its own queue, ``LLM_BASE_URL`` = the scripted server, ``LLM_GRAMMAR=0``) on the embedded
   Redis broker; ``--runs`` runs are created with ``verifier.services.start_run(queue=True)`` in one transaction,
   so they are queued together at commit; ``verifier.tasks.run_verification`` executes them, persisting each step
   in PostgreSQL and publishing it on the Channels layer, where this process follows all of them (as curators'
   browsers would) and counts the messages. One unmeasured warm-up round comes first (the worker loads torch and
   the sentence encoder, and the tools' shared Redis cache fills), then one run alone, then the measured round.
   Figures:

   - wall time: from the commit that queues the runs to the last run's ``finished_at``.
   - ideal time = LLM calls per run x delay (plan + N steps + the final answer = N + 2 calls), as if every run
     started at once and nothing but the model took time. Throughput: runs / wall against runs / ideal.
   - orchestration overhead per step = (sum over runs of (finished_at - started_at) - sum of all steps'
     duration_ms) / number of step rows. A plan/thought step's duration_ms is its LLM call (request, the scripted
     delay, response, parsing), an observation's is its tool call; actions and verdicts do no timed work. What is
     left is everything else a run does: memory retrieval and toolbox set-up, per step the cancel check, the row
     INSERT, support items, token counters, COMMIT and the Channels publish, and closing the run. duration_ms is
     truncated to whole milliseconds, so the timed work is under-counted by < 1 ms per timed step; the printed
     bound says how much that can inflate the figure.
   - the same residue split by where it happens, from the step rows' created_at: set-up (started_at to the first
     row, minus the plan call), per step (created_at[i] - created_at[i-1] - duration_ms[i]: finishing and
     publishing step i-1, the cancel check and inserting step i, with no LLM or tool time inside; this is the
     per-step persistence + publish time) and close (last row to finished_at); queue wait (commit to started_at);
     and the Channels delivery latency (row created to the message arriving here).
   - the same overhead for one run alone on the same warm worker (the floor, without contention), and the CPU
     seconds the round cost the worker, PostgreSQL, Redis, this process and everything else on the machine
     (from /proc), against the CPU the 90% target leaves: the figures above are latencies, and under load they
     are mostly waiting for a CPU (or the worker's one GIL), which these numbers tell apart from work.

2. Prompt tokens per verification (in-process, ``execute_run(run_id, llm=OpenAICompatibleLLM(...))``, no delay)
   for the paper's mean trajectory lengths of 6.6 and 9.8 turns, rounded to 7 and 10 tool steps, with t_max 10
   (at 10 steps the loop ends in the mandatory judgment call) and memory_k 3: three memory entries are first
   added with ``bank.add_entry`` from the trajectories (``bank.trajectory_of``) of three completed 7-step scripted
   runs on other triples, and deleted at the end. The scripted server counts WORDS as tokens (prompt_tokens =
   words of all message contents); the estimate in tokens is characters / 4 of all message contents sent. Both are
   printed next to the paper's 13,100 and 23,031 input tokens.

Prints figures only; it asserts nothing. On any exit, Ctrl-C and SIGTERM included, unfinished runs are cancelled,
the worker is stopped and its queue deleted, and the memory entries added here are deleted.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import re
import signal
import statistics
import subprocess
import sys
import threading
import time
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import datetime
from itertools import pairwise
from pathlib import Path

PROJECT_DIR = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(PROJECT_DIR))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "kgv_web.settings")
os.environ.setdefault("DEBUG", "1")
os.environ.setdefault("LOG_LEVEL", "WARNING")  # the SDK logs every HTTP request at INFO; the worker inherits this

import django  # noqa: E402

django.setup()

from channels.layers import get_channel_layer  # noqa: E402
from django.conf import settings  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import transaction  # noqa: E402
from django.utils import timezone  # noqa: E402

from kgv_web.celery import app as celery_app  # noqa: E402
from tests.openai_server import ScriptedOpenAIServer, count_words, prompt_text  # noqa: E402
from verifier.agent import prompts  # noqa: E402
from verifier.agent.llm import OpenAICompatibleLLM  # noqa: E402
from verifier.agent.steps import Memory  # noqa: E402
from verifier.memory import bank  # noqa: E402
from verifier.models import KnowledgeGraph, MemoryEntry, Run, Step, VerificationTask  # noqa: E402
from verifier.realtime.events import run_group  # noqa: E402
from verifier.runner import claim_of, execute_run  # noqa: E402
from verifier.services import start_run  # noqa: E402

KG_NAME = "codex-s"
PROVENANCE = "bench/agent.py"
PAPER_TOKENS = {7: (6.6, 13_100), 10: (9.8, 23_031)}  # tool steps: (paper's mean turns, paper's input tokens)
UNFINISHED = (Run.Status.QUEUED, Run.Status.RUNNING)
LOG_DIR = settings.KGV_CACHE_DIR / "bench"


from bench_figures import CpuMeter, pct, spread  # noqa: E402

# ------------------------------------------------------------------------------------------------
# The scripted model: one fixed trajectory per run
# ------------------------------------------------------------------------------------------------


def _arg(label: str) -> str:
    if not re.search(r"[,()\"']", label):
        return label
    return f"'{label}'" if '"' in label else f'"{label}"'


class Trajectory:
    """``(request body) -> reply`` playing plan → ``steps`` x Thought/Action → Final Answer citing a retrieved key.

    Which call it is comes from the request: the system prompt tells planning and ReAct apart, the judgment is
    the last message, and the number of assistant messages in a ReAct request is the number of steps already taken."""

    ACTIONS = (  # (tool, arguments) over the claim's (head, relation, tail) labels
        ("KG_Neighbor", lambda h, r, t: [h, r]),
        ("KG_Path", lambda h, r, t: [h, t]),
        ("Wiki_Evidence", lambda h, r, t: [h, t]),
        ("KG_Definition", lambda h, r, t: [r]),
        ("KG_Neighbor", lambda h, r, t: [t]),
        ("KG_Definition", lambda h, r, t: [h]),
        ("Wiki_Evidence", lambda h, r, t: [h]),
        ("KG_Definition", lambda h, r, t: [t]),
        ("KG_Neighbor", lambda h, r, t: [h]),
        ("Wiki_Evidence", lambda h, r, t: [t]),
    )
    WHY = (
        "First I need what the graph records about {h} for the relation {r}, to see whether {t} is among the facts.",
        "The neighbours did not settle it on their own; a path between {h} and {t} would show how the two are connected.",
        "The KG evidence should be checked against text; a Wikipedia sentence mentioning both {h} and {t} would confirm it.",
        "Before deciding I want the schema of {r}: its domain and range tell whether {t} is a plausible value at all.",
        "Looking from the other side, the facts about {t} may mention {h} or entities close to it.",
        "The description and types of {h} help rule out a confusion with a similarly named entity.",
        "More text about {h} alone may state the fact directly even if {t} is named differently there.",
        "The types of {t} should match the range of {r}; its definition will show that.",
        "The remaining one-hop facts about {h} may contain a related fact that supports or contradicts the claim.",
        "Finally, text about {t} could mention {h} and close the remaining gap.",
    )

    def __init__(self, steps: int):
        self.steps = steps

    @staticmethod
    def claim(body: dict) -> tuple[str, str, str]:
        match = re.search(r"^In words: (.*)$", prompt_text(body), re.MULTILINE)
        parts = match.group(1).split(" — ") if match else ["the head", "the relation", "the tail"]
        return parts[0], " — ".join(parts[1:-1]) or "the relation", parts[-1]

    def __call__(self, body: dict) -> str:
        messages = body.get("messages") or []
        system = messages[0].get("content", "") if messages else ""
        h, r, t = self.claim(body)
        if system.startswith("You are a verification strategist"):
            return (f"=== Initial Impression ===\n[Correct] Because {h} is well documented and {t} is a typical value of "
                    f"{r} for an entity of this kind.\n=== Strategic Plan ===\n"
                    f"[Step 1] KG_Neighbor({_arg(h)}, {_arg(r)}) to see what the graph records for {h}.\n"
                    f"[Step 2] KG_Path({_arg(h)}, {_arg(t)}) to find facts connecting the two entities.\n"
                    f"[Step 3] Wiki_Evidence({_arg(h)}, {_arg(t)}) for a sentence that states the fact.")
        keys = [k for m in messages if m.get("role") == "user" for k in re.findall(r"\[(E\d+)\]", m.get("content") or "")]
        cite = f" [{keys[0]}]" if keys else ""
        answer = (f"Final Answer: [Correct] Because the retrieved evidence{cite} shows that {h} has {r} {t}, "
                  f"and nothing retrieved contradicts it.")
        if (messages[-1].get("content") or "").startswith("The step limit is reached"):
            return answer
        done = sum(1 for m in messages if m.get("role") == "assistant")
        if done >= self.steps:
            return f"Thought: The evidence{cite} answers the question and agrees with the initial impression.\n{answer}"
        tool, arguments = self.ACTIONS[done % len(self.ACTIONS)]
        why = self.WHY[done % len(self.WHY)].format(h=h, r=r, t=t)
        return f"Thought: {why}\nAction: {tool}({', '.join(_arg(a) for a in arguments(h, r, t))})"


def llm_calls(steps: int, t_max: int) -> int:
    """Plan + one call per step + the final answer (or, at t_max, the mandatory judgment)."""
    return 1 + min(steps, t_max) + 1


# ------------------------------------------------------------------------------------------------
# Data: the KG and its validation triples as tasks
# ------------------------------------------------------------------------------------------------


def ensure_kg() -> KnowledgeGraph:
    kg = KnowledgeGraph.objects.filter(name=KG_NAME, version__gt=0).first()
    if kg is None:
        print(f"loading {KG_NAME} (first run only, about two minutes)…", flush=True)
        call_command("load_kg", KG_NAME, "--no-progress")
        kg = KnowledgeGraph.objects.get(name=KG_NAME)
    return kg


def tasks_for(kg: KnowledgeGraph, count: int) -> list[VerificationTask]:
    """The first ``count`` validation triples of CoDEx-S as tasks (existing rows reused)."""
    path = settings.KGV_DATA_DIR / KG_NAME / "triples" / "valid.txt"
    triples = [tuple(line.split("\t")) for line in path.read_text(encoding="utf-8").split("\n") if line.count("\t") == 2]
    entity_ids = {e for h, _, t in triples[: count * 2] for e in (h, t)}
    entities = {e.external_id: e for e in kg.entities.filter(external_id__in=entity_ids)}
    relations = {r.external_id: r for r in kg.relations.all()}
    tasks = []
    for line_number, (h, r, t) in enumerate(triples, start=1):
        if len(tasks) == count:
            break
        if h not in entities or t not in entities or r not in relations:
            continue
        task, _ = VerificationTask.objects.get_or_create(
            kg=kg, head=entities[h], relation=relations[r], tail=entities[t],
            defaults={"source": f"valid.txt:{line_number} ({PROVENANCE})", "expected_label": True})
        tasks.append(task)
    if len(tasks) < count:
        raise SystemExit(f"only {len(tasks)} of the first validation triples resolve in {kg.name}; asked for {count}")
    return list(VerificationTask.objects.filter(pk__in=[t.pk for t in tasks]).select_related("head", "relation", "tail")
                .order_by("pk"))


# ------------------------------------------------------------------------------------------------
# 1. Concurrency through Celery
# ------------------------------------------------------------------------------------------------


class Worker:
    """A Celery worker subprocess on its own queue, so no other worker takes the runs and it takes no one else's."""

    def __init__(self, llm_url: str, concurrency: int, index: int = 1):
        self.queue = f"kgv-bench-agent-{os.getpid()}"
        self.hostname = f"{self.queue}-{index}@localhost"
        self.log = LOG_DIR / f"agent-worker-{index}.log"
        LOG_DIR.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "LLM_BASE_URL": llm_url, "LLM_MODEL": "scripted", "LLM_GRAMMAR": "0"}
        command = [sys.executable, "-m", "celery", "-A", "kgv_web", "worker", "--pool", "threads",
                   "--concurrency", str(concurrency), "--queues", self.queue, "--hostname", self.hostname,
                   "--loglevel", "WARNING", "--without-gossip", "--without-mingle"]
        celery_app.conf.task_routes = {"verifier.run_verification": {"queue": self.queue}}
        with self.log.open("w") as log:
            # Own session: a Ctrl-C in the terminal reaches only this process, which then stops the worker in order.
            self.process = subprocess.Popen(command, cwd=PROJECT_DIR, env=env, stdout=log, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL, start_new_session=True)

    def wait_ready(self, timeout: float = 90) -> float:
        started = time.monotonic()
        while time.monotonic() - started < timeout:
            if self.process.poll() is not None:
                raise SystemExit(f"the Celery worker exited during start-up (log: {self.log})")
            if celery_app.control.ping(destination=[self.hostname], timeout=0.5):
                return time.monotonic() - started
        raise SystemExit(f"the Celery worker did not answer a ping within {timeout:.0f} s (log: {self.log})")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()  # warm shutdown: running tasks finish
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        try:  # the queue (and its priority lists) and kombu's binding sets for it: every key naming it
            with celery_app.connection_for_write() as connection:
                client = connection.default_channel.client
                keys = list(client.scan_iter(match=f"*{self.queue}*", count=1000))
                if keys:
                    client.delete(*keys)
        except Exception as error:  # noqa: BLE001 - cleanup must not hide the real outcome
            print(f"  (could not delete the queue {self.queue}: {error})")
        celery_app.conf.task_routes = None


class Follower:
    """Follows run groups on the Channels layer from a background event loop, timestamping every message."""

    def __init__(self):
        self.layer = get_channel_layer()
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.channel = asyncio.run_coroutine_threadsafe(self.layer.new_channel("bench-agent."), self.loop).result()
        self.messages: list[tuple[float, dict]] = []
        self.groups: list[str] = []
        self.receiver = asyncio.run_coroutine_threadsafe(self._receive(), self.loop)

    async def _receive(self) -> None:
        while True:
            message = await self.layer.receive(self.channel)
            self.messages.append((time.time(), message))

    def follow(self, run_ids: list[int]) -> None:
        async def join():
            for run_id in run_ids:
                await self.layer.group_add(run_group(run_id), self.channel)
        asyncio.run_coroutine_threadsafe(join(), self.loop).result()
        self.groups += [run_group(r) for r in run_ids]

    def close(self) -> None:
        async def leave():
            for group in self.groups:
                await self.layer.group_discard(group, self.channel)
        try:
            asyncio.run_coroutine_threadsafe(leave(), self.loop).result(timeout=10)
        finally:
            self.receiver.cancel()
            self.loop.call_soon_threadsafe(self.loop.stop)


@dataclass
class Round:
    ids: list[int]
    committed: float  # time.time() when the transaction queueing the runs committed
    created_ms: float  # creating the Run rows (before the clock starts)
    requests: int = 0  # chat calls the scripted server answered
    cpu: dict[str, float] = field(default_factory=dict)
    load: float = 0.0


def run_round(tasks: list[VerificationTask], timeout: float, created_ids: list[int], *, follower: Follower | None = None,
              server: ScriptedOpenAIServer | None = None, meter: CpuMeter | None = None) -> Round:
    """Queue one run per task in one transaction (start_run(queue=True) each) and wait until all have finished.
    The ids are added to ``created_ids`` at once, so that an interruption can cancel them."""
    load, requests, cpu_before = os.getloadavg()[0], len(server.bodies) if server else 0, meter.snapshot() if meter else {}
    started = time.time()
    with transaction.atomic():
        runs = [start_run(task=task, queue=True) for task in tasks]
        if follower is not None:
            follower.follow([r.pk for r in runs])
        created = time.time() - started
        committed = time.time()
    ids = [r.pk for r in runs]
    created_ids += ids
    deadline = time.monotonic() + timeout
    while Run.objects.filter(pk__in=ids, status__in=UNFINISHED).exists():
        if time.monotonic() > deadline:
            left = Run.objects.filter(pk__in=ids, status__in=UNFINISHED).count()
            print(f"  ! {left} of {len(ids)} runs still unfinished after {timeout:.0f} s; figures cover the finished ones")
            break
        time.sleep(0.05)
    cpu = CpuMeter.delta(cpu_before, meter.snapshot()) if meter else {}
    return Round(ids, committed, created * 1000, (len(server.bodies) - requests) if server else 0, cpu, load)


def cancel_unfinished(ids: list[int]) -> None:
    """Cancel what an interruption left queued or running: the runner stops a cancelled run at its next step."""
    unfinished = Run.objects.filter(pk__in=ids, status__in=UNFINISHED)
    task_ids = list(unfinished.values_list("task_id", flat=True))
    if unfinished.update(status=Run.Status.CANCELLED, finished_at=timezone.now(),
                         error=f"{PROVENANCE} stopped before this run finished"):
        # execute_run leaves the task 'running' when a run is cancelled; put it back in the queue.
        VerificationTask.objects.filter(pk__in=task_ids, status=VerificationTask.Status.RUNNING).update(
            status=VerificationTask.Status.PENDING)
        print(f"  cancelled {len(task_ids)} unfinished run(s)")


def concurrency_bench(args, kg: KnowledgeGraph) -> None:
    tasks = tasks_for(kg, args.runs)
    calls = llm_calls(args.steps, settings.KGV_T_MAX)
    ideal = math.ceil(args.runs / (args.concurrency * args.processes)) * calls * args.delay
    print(f"\n== 1. {args.runs} concurrent verifications through Celery ({args.processes} worker process(es) x "
          f"{args.concurrency} threads), "
          f"{args.steps} tool steps, {args.delay * 1000:.0f} ms per LLM call ==")
    created: list[int] = []
    # Unwound in reverse on any exit: cancel unfinished runs, stop following, stop the worker (its running tasks
    # see the cancellation after their current LLM call, which the scripted server still answers), stop the server.
    with ExitStack() as stack:
        server = stack.enter_context(ScriptedOpenAIServer(Trajectory(args.steps), latency=args.delay))
        workers = [Worker(server.url, args.concurrency, index) for index in range(1, args.processes + 1)]
        for worker in workers:
            stack.callback(worker.stop)
        follower = Follower()
        stack.callback(follower.close)
        stack.callback(cancel_unfinished, created)
        for worker in workers:
            print(f"worker {worker.hostname} ready in {worker.wait_ready():.1f} s (log: {worker.log})")
        meter = CpuMeter([worker.process.pid for worker in workers])
        timeout = 120 + 20 * ideal
        if not args.no_warmup:
            started = time.time()
            warm = run_round(tasks, timeout + 60, created)
            print(f"warm-up round (unmeasured): {time.time() - started:.1f} s, "
                  f"{Run.objects.filter(pk__in=warm.ids, status=Run.Status.SUCCEEDED).count()}/{len(warm.ids)} succeeded")
        alone = run_round(tasks[:1], timeout, created, server=server, meter=meter)
        measured = run_round(tasks, timeout, created, follower=follower, server=server, meter=meter)
        time.sleep(0.5)  # let the last published messages arrive
    report_concurrency(args, measured, calls, ideal, follower, analyse(alone))


def analyse(round_: Round) -> dict | None:
    """Timings of a round from the Run and Step rows (see the module docstring for the definitions)."""
    runs = list(Run.objects.filter(pk__in=round_.ids))
    done = [r for r in runs if r.status == Run.Status.SUCCEEDED]
    if not done:
        return None
    steps: dict[int, list[dict]] = {r.pk: [] for r in done}
    for row in (Step.objects.filter(run_id__in=list(steps)).order_by("run_id", "seq")
                .values("run_id", "seq", "kind", "duration_ms", "created_at")):
        steps[row["run_id"]].append(row)
    rows = [row for s in steps.values() for row in s]
    run_walls = [(r.finished_at - r.started_at).total_seconds() * 1000 for r in done]
    setup, per_step, close = [], [], []
    for run in done:
        first, last = steps[run.pk][0], steps[run.pk][-1]
        setup.append((first["created_at"] - run.started_at).total_seconds() * 1000 - first["duration_ms"])
        per_step += [(b["created_at"] - a["created_at"]).total_seconds() * 1000 - b["duration_ms"] for a, b in pairwise(steps[run.pk])]
        close.append((run.finished_at - last["created_at"]).total_seconds() * 1000)
    n_steps = len(rows)
    overhead = sum(run_walls) - sum(row["duration_ms"] for row in rows)
    return {
        "runs": runs, "done": done, "failed": [r for r in runs if r.status != Run.Status.SUCCEEDED], "steps": n_steps,
        "by_seq": {(row["run_id"], row["seq"]): row["created_at"] for row in rows},
        "wall": max(r.finished_at for r in done).timestamp() - round_.committed,
        "run_walls": run_walls, "queue_wait": [(r.started_at.timestamp() - round_.committed) * 1000 for r in done],
        "llm": [row["duration_ms"] for row in rows if row["kind"] in ("plan", "thought")],
        "tools": [row["duration_ms"] for row in rows if row["kind"] == "observation"],
        "overhead": overhead, "per_step_overhead": overhead / n_steps,
        "truncation": sum(1 for row in rows if row["kind"] in ("plan", "thought", "observation")) / n_steps,
        "setup": setup, "per_step": per_step, "close": close,
        "worker_cpu_per_step": 1000 * round_.cpu.get("worker", 0.0) / n_steps, "round": round_,
    }


def report_concurrency(args, measured: Round, calls: int, ideal: float, follower: Follower, alone: dict | None) -> None:
    a = analyse(measured)
    if a is None:
        print(f"no run succeeded; nothing to report (worker log: {LOG_DIR / 'agent-worker-1.log'})")
        return
    done, n_steps, wall, cpu = a["done"], a["steps"], a["wall"], measured.cpu
    if a["failed"]:
        reasons = sorted({(r.status, r.error[:160]) for r in a["failed"]})
        print(f"  ! {len(a['failed'])} run(s) did not succeed: {reasons[:3]}")
    delivered, statuses = [], 0
    for received, message in follower.messages:
        if message.get("type") == "run.step":
            created_at = a["by_seq"].get((message["step"]["run"], message["step"]["seq"]))
            if created_at is not None:
                delivered.append((received - created_at.timestamp()) * 1000)
        elif message.get("type") == "run.status":
            statuses += 1
    cpus = os.cpu_count() or 1
    print(f"load average before the round: {measured.load:.2f} on {cpus} CPUs")
    print(f"runs: {len(done)}/{len(measured.ids)} succeeded, {n_steps} step rows ({n_steps / len(done):.1f} per run), "
          f"{measured.requests} LLM calls ({measured.requests / len(done):.2f} per run; the trajectory needs {calls})")
    print(f"creating the runs (start_run x {len(measured.ids)}, one transaction): {measured.created_ms:.0f} ms, before the clock starts")
    print(f"wall time, commit → last finished_at : {wall:6.2f} s")
    waves = " (in waves)" if args.runs > args.concurrency * args.processes else ""
    print(f"ideal time, {calls} LLM calls x {args.delay * 1000:.0f} ms{waves} : {ideal:6.2f} s")
    print(f"throughput: {len(done) / wall:.2f} runs/s achieved vs {len(measured.ids) / ideal:.2f} runs/s ideal = "
          f"{100 * ideal / wall:.1f}% (target ≥ 90%)")
    print(f"run wall time, started_at → finished_at: mean {statistics.mean(a['run_walls']):.0f} ms; {spread(a['run_walls'])}")
    print(f"queue wait, commit → started_at        : {spread(a['queue_wait'])}")
    print(f"LLM call as timed by the agent         : {spread(a['llm'])}; scripted delay {args.delay * 1000:.0f} ms")
    print(f"tool call, observation duration_ms     : {spread(a['tools'])}")
    print(f"orchestration overhead per step = (Σ run wall {sum(a['run_walls']) / 1000:.2f} s − Σ LLM {sum(a['llm']) / 1000:.2f} s"
          f" − Σ tools {sum(a['tools']) / 1000:.2f} s) / {n_steps} steps = {a['per_step_overhead']:.2f} ms (target ≤ 5 ms; "
          f"whole-ms truncation of duration_ms accounts for at most {a['truncation']:.2f} ms of it)")
    print(f"  set-up: started_at → first step, minus the plan call   : {spread(a['setup'])}")
    print("  per step: persist + publish + cancel check, i.e.")
    print(f"    created_at[i] − created_at[i−1] − duration_ms[i]     : {spread(a['per_step'])}")
    print(f"  close: last step → finished_at                         : {spread(a['close'])}")
    share = [100 * sum(a[k]) / a["overhead"] for k in ("setup", "per_step", "close")]
    print(f"  shares of the overhead: set-up {share[0]:.0f}%, per step {share[1]:.0f}%, close {share[2]:.0f}%")
    if alone is not None:
        print(f"  the same worker with one run alone: {alone['per_step_overhead']:.2f} ms per step (per step p50 "
              f"{pct(alone['per_step'], 0.5):.1f} ms, p95 {pct(alone['per_step'], 0.95):.1f} ms; set-up {alone['setup'][0]:.0f} ms), "
              f"worker CPU {alone['worker_cpu_per_step']:.1f} ms per step")
    ours = sum(v for k, v in cpu.items() if k not in ("machine", "other processes"))
    parts = ", ".join(f"{k} {v:.1f}" for k, v in cpu.items() if k not in ("worker", "machine"))
    print(f"CPU seconds in the round (capacity {wall:.1f} s x {cpus} CPUs = {wall * cpus:.1f}): worker {cpu['worker']:.1f} "
          f"({1000 * cpu['worker'] / len(done):.0f} ms per run, {a['worker_cpu_per_step']:.1f} ms per step, "
          f"{cpu['worker'] / wall:.2f} cores in {args.processes} process(es), one GIL each), {parts}; "
          f"machine busy {100 * cpu['machine'] / (wall * cpus):.0f}%")
    budget = ideal / 0.9
    print(f"  90% of ideal leaves {budget:.2f} s x {cpus} CPUs = {budget * cpus:.2f} CPU-s for the round "
          f"({1000 * budget * cpus / len(measured.ids):.0f} ms per run, all processes); worker + PostgreSQL + Redis + scripted "
          f"server used {ours:.1f} CPU-s ({1000 * ours / len(done):.0f} ms per run)")
    print(f"Channels: {len(delivered)}/{n_steps} step and {statuses} status messages reached a follower; "
          f"row created → delivered {spread(delivered)}")


# ------------------------------------------------------------------------------------------------
# 2. Prompt tokens per verification
# ------------------------------------------------------------------------------------------------


def scripted_llm(server: ScriptedOpenAIServer) -> OpenAICompatibleLLM:
    return OpenAICompatibleLLM(server.url, "not-needed", "scripted", max_retries=0)


def verify_in_process(task: VerificationTask, config: dict, llm: OpenAICompatibleLLM, created: list[int]) -> Run:
    run = start_run(task=task, config=config, queue=False)
    created.append(run.pk)
    execute_run(run.pk, llm=llm)
    run.refresh_from_db()
    return run


def token_bench(args, kg: KnowledgeGraph) -> None:
    with ExitStack() as stack:
        created: list[int] = []
        stack.callback(cancel_unfinished, created)
        MemoryEntry.objects.filter(provenance__startswith=PROVENANCE).delete()  # leftovers of an interrupted invocation
        stack.callback(lambda: MemoryEntry.objects.filter(provenance__startswith=PROVENANCE).delete())
        token_figures(args, kg, created)


def token_figures(args, kg: KnowledgeGraph, created: list[int]) -> None:
    print(f"\n== 2. Prompt tokens per verification (memory_k 3, t_max 10; mean of {args.token_runs} runs each) ==")
    tasks = tasks_for(kg, args.runs + 3 + args.token_runs)
    sources, measured = tasks[args.runs: args.runs + 3], tasks[args.runs + 3:]
    with ScriptedOpenAIServer(Trajectory(7)) as server:
        for task in sources:
            run = verify_in_process(task, {"t_max": 10, "memory_k": 0}, scripted_llm(server), created)
            claim = claim_of(task)
            entry = bank.add_entry(triple_text=claim.text, trajectory=bank.trajectory_of(run), verdict=run.verdict or "correct",
                                   relation_label=claim.relation_label, kg=kg, source_run=run,
                                   provenance=f"{PROVENANCE} (scripted 7-step trajectory)")
            print(f"memory #{entry.pk} (deleted at the end): {claim.text!r}, from a run of {run.steps.count()} steps, "
                  f"trajectory {len(entry.trajectory):,} chars")
    print("The scripted server counts words as tokens; '≈ tokens' is characters / 4 of all message contents sent.")
    header = (f"{'turns (paper)':>13} {'tool steps':>10} {'LLM calls':>9} {'prompt words':>12} {'prompt ≈tokens':>14} "
              f"{'completion words':>16} {'compl. ≈tokens':>14} {'paper input':>11} {'≈tokens/paper':>13}")
    rows, notes = [], []
    for steps, (turns, paper) in PAPER_TOKENS.items():
        trajectory = Trajectory(steps)
        figures = []
        with ScriptedOpenAIServer(trajectory) as server:
            llm = scripted_llm(server)
            for task in measured:
                before = len(server.bodies)
                run = verify_in_process(task, {"t_max": 10, "memory_k": 3}, llm, created)
                bodies = server.bodies[before:]
                words = sum(count_words(prompt_text(b)) for b in bodies)
                chars = sum(len(prompt_text(b)) for b in bodies)
                out_chars = sum(len(trajectory(b)) for b in bodies)
                memories = [Memory(u.entry_id, u.entry.triple_text, u.entry.trajectory, u.entry.verdict, u.similarity)
                            for u in run.memories_used.select_related("entry").order_by("rank")]
                memory_chars = len(prompts.memories_text(memories))
                with_memory = len(bodies)  # planning, every ReAct step and the judgment that continues them
                figures.append({"calls": len(bodies), "words": words, "chars": chars, "server_words": run.prompt_tokens,
                                "completion": run.completion_tokens, "out_chars": out_chars, "memories": len(memories),
                                "memory_share": memory_chars * with_memory / chars, "status": run.status,
                                "without_memory": (chars - memory_chars * with_memory) / 4,
                                "first": len(prompt_text(bodies[1])) if len(bodies) > 1 else 0})
        mean = {k: statistics.mean(f[k] for f in figures) for k in figures[0] if k != "status"}
        rows.append(f"{turns:>13} {steps:>10} {mean['calls']:>9.1f} {mean['server_words']:>12,.0f} {mean['chars'] / 4:>14,.0f} "
                    f"{mean['completion']:>16,.0f} {mean['out_chars'] / 4:>14,.0f} {paper:>11,} {mean['chars'] / 4 / paper:>13.2f}")
        failed = [f["status"] for f in figures if f["status"] != Run.Status.SUCCEEDED]
        notes.append(f"{steps} steps: {mean['memories']:.1f} memories used per run; the memory block is "
                     f"{100 * mean['memory_share']:.0f}% of all prompt characters (it is in every call), "
                     f"≈ {mean['without_memory']:,.0f} tokens without it; first ReAct prompt {mean['first']:,.0f} chars"
                     + (f"; {len(failed)} run(s) not succeeded: {failed}" if failed else "")
                     + ("" if all(f["words"] == f["server_words"] for f in figures) else "; run.prompt_tokens ≠ words sent!"))
    print(header)
    print("\n".join(rows))
    for note in notes:
        print(f"  {note}")


# ------------------------------------------------------------------------------------------------


def _terminate(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=50, help="concurrent verifications (default 50)")
    parser.add_argument("--processes", type=int, default=1, help="Celery worker processes (default 1)")
    parser.add_argument("--concurrency", type=int, default=None, help="threads per worker process (default: --runs / --processes)")
    parser.add_argument("--delay", type=float, default=0.2, help="seconds per LLM call (default 0.2)")
    parser.add_argument("--steps", type=int, default=4, help="Thought/Action steps per run (default 4)")
    parser.add_argument("--token-runs", type=int, default=5, help="verifications per trajectory length in part 2")
    parser.add_argument("--no-warmup", action="store_true", help="measure the first round (cold worker and caches)")
    parser.add_argument("--skip-concurrency", action="store_true")
    parser.add_argument("--skip-tokens", action="store_true")
    args = parser.parse_args()
    args.concurrency = args.concurrency or math.ceil(args.runs / args.processes)
    signal.signal(signal.SIGTERM, _terminate)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # also when started in the background (SIGINT ignored)
    kg = ensure_kg()
    print(f"KG {kg.name} v{kg.version}; t_max {settings.KGV_T_MAX}, memory_k {settings.KGV_MEMORY_K}; "
          f"{os.cpu_count()} CPUs; started {datetime.now():%Y-%m-%d %H:%M}")
    if not args.skip_concurrency:
        concurrency_bench(args, kg)
    if not args.skip_tokens:
        token_bench(args, kg)


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        print("interrupted (the worker is stopped, unfinished runs cancelled, bench memories deleted)", file=sys.stderr)
        sys.exit(130)
