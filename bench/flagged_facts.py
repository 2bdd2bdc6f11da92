"""Verdicts on flagged KG facts: with the structural model that learnt them, and with one trained without them.

    DEBUG=1 .venv/bin/python bench/flagged_facts.py codex-s [--n 200] [--seed 0] [--errors]

A curator's flagged triples are usually facts the KG states, and the ready structural model learnt them, so
KG_Plausibility refuses to score them until a model trained without them is ready. This draws ``--n`` KG
triples (seeded), queues them as tasks (source ``bench:flagged-facts``) and verifies each twice in the
``evidence`` mode (the agent's brief weighed, no language model), in this process:

1. at once, against the ready model that learnt them — what a run got when it started before the retraining
   (the brief says "trained with this very triple" and the rules and text decide alone);
2. after the model trained without them (the job step 1 requested, trained here: minutes) — what a run gets now
   that it waits for that training.

Every drawn triple is stated by the KG, so alone they give the share judged Correct and the confidence. With
``--errors`` the KG is made noisy first, as the KGs KGV is for are: a type-constrained corruption of each drawn
fact (never a KG triple, nor a triple of the dataset's validation split) is added to the KG's triples and
queued beside it, so half the flagged facts are wrong and each pass is scored by accuracy (the ready model
counts them as learnt, as it would have learnt a KG's wrong facts; the rules stay those mined from the clean
KG). At the end the added triples, the tasks and their runs are deleted and the model that was ready before is
made current again (``train_kge --restore``). Prints figures only; it asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "kgv_web.settings")
os.environ.setdefault("DEBUG", "1")

import django  # noqa: E402

django.setup()

from verifier.evaluation.datasets import (  # noqa: E402
    dataset_validation,  # noqa: E402
    kg_triple_set,
    type_keys,
)
from verifier.evaluation.sampling import NegativeSampler  # noqa: E402
from verifier.models import KnowledgeGraph, Run, StructuralModel, Triple, VerificationTask  # noqa: E402
from verifier.runner import execute_run  # noqa: E402
from verifier.services import start_run  # noqa: E402
from verifier.structure.dataset import kg_triples  # noqa: E402
from verifier.structure.training import restore, train, training_to_await  # noqa: E402

SOURCE = "bench:flagged-facts"


def verify_all(tasks: list[VerificationTask]) -> list[Run]:
    runs = []
    for task in tasks:
        run = start_run(task=task, config={"mode": "evidence"}, queue=False)
        runs.append(execute_run(run.pk, await_structure=False))
    return runs


def figures(label: str, runs: list[Run], seconds: float, errors: set) -> None:
    done = [run for run in runs if run.status == Run.Status.SUCCEEDED]
    print(f"{label}: {len(done)} of {len(runs)} runs succeeded in {seconds:.0f} s", flush=True)
    for name, group in (("true facts", [r for r in done if _key(r) not in errors]),
                        ("added errors", [r for r in done if _key(r) in errors])):
        if not group:
            continue
        correct = sum(run.verdict == "correct" for run in group)
        scored = sum(run.structural_model_id is not None for run in group)
        p_true = [run.assessment.get("p_true") for run in group if run.assessment.get("p_true") is not None]
        print(f"  {name}: {len(group)}, judged Correct {correct} ({correct / len(group):.1%}); scored by a structural "
              f"model {scored}; median P(true) {statistics.median(p_true) if p_true else float('nan'):.2f}", flush=True)
    if errors:
        right = sum((run.verdict == "correct") == (_key(run) not in errors) for run in done)
        print(f"  accuracy {right / max(1, len(done)):.1%} ({right} of {len(done)})", flush=True)


def _key(run: Run) -> tuple[int, int, int]:
    return run.task.head_id, run.task.relation_id, run.task.tail_id


def corruptions(kg: KnowledgeGraph, facts: list, rng: random.Random) -> list:
    """A type-constrained corruption of each fact: never a KG triple nor one of the dataset's validation split."""
    in_kg = kg_triple_set(kg)
    validation = dataset_validation(kg)
    known = in_kg | (set(map(tuple, validation.tolist())) if validation is not None else set())
    keys, _ = type_keys(kg, "auto", in_kg)
    sampler = NegativeSampler(keys, known)
    return [negative.triple for fact in facts if (negative := sampler.corrupt(fact, rng)) is not None]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("kg")
    parser.add_argument("--n", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--errors", action="store_true", help="add a wrong fact beside each drawn one (a noisy KG)")
    options = parser.parse_args()
    kg = KnowledgeGraph.objects.get(name=options.kg)
    before = StructuralModel.objects.ready_for(kg)
    if before is None:
        sys.exit(f"{kg.name} has no ready structural model: manage.py train_kge {kg.name}")
    queued = set(VerificationTask.objects.filter(kg=kg).values_list("head_id", "relation_id", "tail_id"))
    candidates = sorted(set(map(tuple, kg_triples(kg).tolist())) - queued)
    rng = random.Random(options.seed)
    drawn = rng.sample(candidates, options.n)
    errors = set(corruptions(kg, drawn, rng)) if options.errors else set()
    Triple.objects.bulk_create([Triple(kg=kg, head_id=h, relation_id=r, tail_id=t) for h, r, t in sorted(errors)])
    flagged = drawn + sorted(errors)
    tasks = [VerificationTask.objects.create(kg=kg, head_id=h, relation_id=r, tail_id=t, source=SOURCE) for h, r, t in flagged]
    print(f"{len(drawn)} KG facts of {kg.name} queued (seed {options.seed}), {len(errors)} wrong facts added to the KG and "
          f"queued; ready model #{before.pk}", flush=True)
    try:
        started = time.monotonic()
        figures(f"at once, model #{before.pk} learnt them", verify_all(tasks), time.monotonic() - started, errors)
        job = training_to_await(kg, drawn[0], since=tasks[0].created_at)
        print(f"training model #{job.pk if job else '?'} without them here…", flush=True)
        trained = train(kg, row=job)
        started = time.monotonic()
        figures(f"after model #{trained.pk} trained without them", verify_all(tasks), time.monotonic() - started, errors)
    finally:
        VerificationTask.objects.filter(source=SOURCE).delete()
        for h, r, t in errors:
            Triple.objects.filter(kg=kg, head_id=h, relation_id=r, tail_id=t).delete()
        current = StructuralModel.objects.ready_for(kg)
        if current is not None and current.pk != before.pk:
            restore(kg, before.pk)
            print(f"model #{before.pk} is current again", flush=True)


if __name__ == "__main__":
    main()
