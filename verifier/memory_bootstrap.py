"""Bootstrapping a memory bank from a KG's own triples.

The papers guided their agent with 200 curated trajectories over 50 frequent relations. A new KG has
none, so KGV makes candidates: true triples the KG states (never a validation or test triple; each scored
by the structural network that never learnt it) and type-constrained corruptions of them, spread over the
most frequent relations; the agent investigates each with the deployment's default configuration (an
evaluation, so it is resumable and its runs can be opened); a run becomes a memory only when its verdict
matched the label, with its repeated actions trimmed and a short lesson (the verdict and the evidence it
cited) for small models. Entries say in their provenance that a curator has not reviewed them yet;
curators retire the ones they disagree with.
"""

from __future__ import annotations

import random
from collections import defaultdict

from django.db import transaction

from verifier.memory.bank import add_entry, lesson_of, trajectory_of
from verifier.models import (
    Evaluation,
    FitTriple,
    KnowledgeGraph,
    MemoryEntry,
)
from verifier.models.memory import UNREVIEWED
from verifier.structure.dataset import kg_triples
from verifier.structure.fitting import corruptions, labelled_triples


def draw(kg: KnowledgeGraph, n: int, *, seed: int = 0, relations: int = 50) -> list[tuple[int, int, int, bool]]:
    """About n labelled triples, half true (facts of the KG) and half corruptions, over the KG's
    most frequent relations, round-robin so that every relation gets its share. Where a true triple has no
    same-type replacement (common in a KG without declared types, whose "types" are relation signatures),
    the next triples of the round-robin are corrupted instead, so the two halves stay the same size. No
    corruption is a triple of the dataset's labelled split (FB15k-237's "Luge — sport's Olympic country —
    Canada" came out of a corruption as false, and is a true validation triple)."""
    facts = [tuple(map(int, row)) for row in kg_triples(kg)]
    if not facts:
        raise ValueError(f"{kg.name} has no triples to draw from")
    by_relation: dict[int, list] = defaultdict(list)
    for triple in sorted(facts):
        by_relation[triple[1]].append(triple)
    rng = random.Random(seed)
    for members in by_relation.values():
        rng.shuffle(members)
    frequent = sorted(by_relation, key=lambda r: (-len(by_relation[r]), r))[:relations]
    ordered: list[tuple[int, int, int]] = []  # round-robin over the relations
    while any(by_relation[r] for r in frequent):
        ordered.extend(by_relation[relation].pop() for relation in frequent if by_relation[relation])
    chosen = ordered[:n // 2]
    negatives = corruptions(kg, ordered, also_true=labelled_triples(kg), limit=len(chosen))
    return [(*t, True) for t in chosen] + negatives


def _trimmed_trajectory(run) -> str:
    """The run as a memory: its steps, with every repeated action (and the reminder it earned) left out."""
    lines, seen, skip = [], set(), False
    for line in trajectory_of(run).splitlines():
        if line.startswith("Action: "):
            skip = line in seen
            seen.add(line)
        elif line.startswith(("Thought: ", "Final Answer: ")):
            skip = False
        if not skip:
            lines.append(line)
    return "\n".join(lines)


def harvest(evaluation: Evaluation) -> tuple[int, int]:
    """Memories from the evaluation's runs whose verdict matched the label: (added, skipped as wrong or present)."""
    added = skipped = 0
    items = evaluation.items.select_related("run", "task__head", "task__relation", "task__tail")
    with transaction.atomic():
        for item in items:
            run, task = item.run, item.task
            expected = "correct" if item.expected_label else "incorrect"
            if run is None or run.verdict != expected or MemoryEntry.objects.filter(source_run=run).exists():
                skipped += 1
                continue
            add_entry(triple_text=f"{task.head.label} {task.relation.label} {task.tail.label}", trajectory=_trimmed_trajectory(run),
                      verdict=run.verdict, relation_label=task.relation.label, kg=task.kg, source_run=run,
                      lesson=lesson_of(run),
                      provenance=(f"bootstrapped from run {run.pk} of {evaluation.name}: a {task.kg.name} training triple"
                                  f"{'' if item.expected_label else ' corrupted (type-constrained)'}, verdict matched the "
                                  f"label; {UNREVIEWED}"))
            FitTriple.objects.get_or_create(kg=task.kg, purpose=FitTriple.Purpose.MEMORY, head=task.head,
                                            relation=task.relation, tail=task.tail, defaults={"label": item.expected_label})
            added += 1
    return added, skipped
