"""From import to verdict: flagged facts the KG states, imported and verified on the workers as ``make demo`` runs them.

    DEBUG=1 .venv/bin/python bench/flagged_facts.py codex-s [--imports 50] [--seed 0]
    DEBUG=1 .venv/bin/python bench/flagged_facts.py codex-s --imports 10 --while-training

Each import is a file of 1–10 facts the KG states (seeded, never queued before), imported as flagged triples
(source ``bench:flagged-facts``) and verified in the evidence mode, as the import page's "import and verify" does.
It prints the seconds from the start of each import to each of its verdicts (median, p95, the slowest), the seconds
each run took from its start on a worker to its verdict, and how many trainings the imports started (none: every
fact is scored by the network of its fold, which never learnt it). With ``--while-training`` the KG's next
structural model is training on the training worker while the imports are verified. Uses the workers already
running (``make demo``), or starts them as ``make demo`` does; deletes its tasks and runs at the end.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "kgv_web.settings")
os.environ.setdefault("DEBUG", "1")

import subprocess  # noqa: E402

import django  # noqa: E402

django.setup()

from kgv_web.embedded import embedded_dir  # noqa: E402
from verifier import confidence  # noqa: E402
from verifier.evaluation.workers import live_workers  # noqa: E402
from verifier.models import Entity, KnowledgeGraph, Relation, Run, StructuralModel, VerificationTask  # noqa: E402
from verifier.queueing import worker_commands  # noqa: E402
from verifier.services import import_flagged_triples, start_runs  # noqa: E402
from verifier.structure.dataset import kg_triples  # noqa: E402
from verifier.structure.training import request_training  # noqa: E402

SOURCE = "bench:flagged-facts"


def workers(stack: ExitStack) -> None:
    """The workers of every queue, started as make demo starts them unless runs are taken already."""
    if live_workers():
        return
    bin_dir = Path(sys.executable).parent
    for command, niceness in worker_commands(bin_dir / "celery", 2, embedded_dir() / "bench-celerybeat-schedule"):
        process = subprocess.Popen(command, preexec_fn=niceness, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        stack.callback(stop, process)
    deadline = time.monotonic() + 120
    while not live_workers() and time.monotonic() < deadline:
        time.sleep(1)


def stop(process: subprocess.Popen) -> None:
    """A worker this script started, stopped: a warm shutdown, killed if it is still busy (a training) after 30 s."""
    process.terminate()
    try:
        process.wait(30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def one_import(kg: KnowledgeGraph, facts: list[tuple[str, str, str]]) -> tuple[list[float], list[float]]:
    """Seconds from the start of the import to each verdict, and from each run's start on a worker to its verdict."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "flagged.tsv"
        path.write_text("".join("\t".join(f) + "\n" for f in facts), encoding="utf-8")
        started, clock = time.time(), time.monotonic()
        report = import_flagged_triples(kg=kg, path=path)
        VerificationTask.objects.filter(pk__in=report.task_ids).update(source=SOURCE)
        runs = start_runs(tasks=VerificationTask.objects.filter(pk__in=report.task_ids), config={"mode": "evidence"})
    ids = [run.pk for run in runs]
    while Run.objects.filter(pk__in=ids).exclude(status__in=Run.FINISHED).exists():
        if time.monotonic() - clock > 600:
            raise SystemExit("runs still unfinished after 10 minutes: are the workers running?")
        time.sleep(0.05)
    done = [run for run in Run.objects.filter(pk__in=ids) if run.status == Run.Status.SUCCEEDED]
    return ([run.finished_at.timestamp() - started for run in done],
            [(run.finished_at - run.started_at).total_seconds() for run in done])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("kg")
    parser.add_argument("--imports", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--while-training", action="store_true")
    args = parser.parse_args()
    kg = KnowledgeGraph.objects.get(name=args.kg)
    confidence.seed_shipped_models()
    if StructuralModel.objects.ready_for(kg) is None:
        raise SystemExit(f"{kg.name} has no ready structural model yet (make demo trains it)")
    rng = random.Random(args.seed)
    queued = set(VerificationTask.objects.filter(kg=kg).values_list("head_id", "relation_id", "tail_id"))
    rows = [tuple(r) for r in kg_triples(kg).tolist() if tuple(r) not in queued]
    rng.shuffle(rows)
    entity = dict(Entity.objects.filter(kg=kg).values_list("pk", "external_id"))
    relation = dict(Relation.objects.filter(kg=kg).values_list("pk", "external_id"))
    with ExitStack() as stack:
        workers(stack)
        stack.callback(lambda: VerificationTask.objects.filter(kg=kg, source=SOURCE).delete())
        if args.while_training:
            job = request_training(kg, reason="bench: a training beside the verifications")
            while job is not None and StructuralModel.objects.get(pk=job.pk).status != StructuralModel.Status.TRAINING:
                time.sleep(1)
            print(f"structural model #{job.pk if job else '?'} is training on the training worker", flush=True)
        models_before = StructuralModel.objects.filter(kg=kg).count()
        latencies: list[float] = []
        run_times: list[float] = []
        for _ in range(args.imports):
            size = rng.randint(1, 10)
            facts, rows = rows[:size], rows[size:]
            waited, ran = one_import(kg, [(entity[h], relation[r], entity[t]) for h, r, t in facts])
            latencies += waited
            run_times += ran
        started_trainings = StructuralModel.objects.filter(kg=kg).count() - models_before
        training = StructuralModel.objects.filter(kg=kg, status=StructuralModel.Status.TRAINING).exists()
    print(f"{kg.name}: {args.imports} imports, {len(latencies)} verdicts; seconds from import to verdict: {spread(latencies)}; "
          f"from a run's start on a worker to its verdict: {spread(run_times)}; trainings the imports started: "
          f"{started_trainings}" + ("; a training was in flight throughout" if args.while_training and training else ""))


def spread(seconds: list[float]) -> str:
    ordered = sorted(seconds)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return f"median {statistics.median(ordered):.2f}, p95 {p95:.2f}, slowest {ordered[-1]:.2f}"


if __name__ == "__main__":
    main()
