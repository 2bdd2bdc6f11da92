"""From the stored runs of an evaluation to metric outcomes, and the anti-leakage proof from run logs.

Everything is read back from what the runs recorded (steps, support items, tokens, timestamps), so
the figures describe the investigations a curator can open, not numbers kept on the side.

Anti-leakage: the tools must never show the triple under test (or its reverse reading) as a KG edge.
Each run is checked twice over its log: the structured support items (triples and path edges, by
ids) and the text of every observation (the edge written as the tools write KG facts: by label, and where
another entity of the KG shares the label, as FB15k-237's seven Washington Counties do, by label and id). Structural
evidence is checked too: every embedding model that scored a run's triple (its plausibility items name
the model) must have been trained without it, and no evaluated triple may be one that a calibration,
the confidence model or the memory bank was fitted on.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Iterable

from django.db.models import Count

from verifier.agent.steps import Claim
from verifier.benchmarks.datasets import fitted_triples
from verifier.evaluation import metrics
from verifier.evaluation.metrics import Outcome
from verifier.kg.base import Edge, KGPath, PathStep, Ref
from verifier.kg.store import shared_labels
from verifier.models import Evaluation, EvaluationItem, Run, Step, StructuralModel, SupportItem
from verifier.selectors import light_models
from verifier.structure.scoring import trained_on
from verifier.tools import render


def query_of(item: EvaluationItem) -> Claim:
    task = item.task
    return Claim(task.head.external_id, task.relation.external_id, task.tail.external_id,
                       task.head.label, task.relation.label, task.tail.label)


def edge_texts(query: Claim, shared: Collection[str] = ()) -> list[str]:
    """Every way an observation writes the query triple (either reading) as a KG edge or path hop; ``shared``:
    the labels other entities of the KG carry too, written with the entity's id."""
    texts = []
    head = Ref(query.head, query.head_label).marked(shared)
    relation, tail = Ref(query.relation, query.relation_label), Ref(query.tail, query.tail_label).marked(shared)
    for edge in (Edge(head, relation, tail), Edge(tail, relation, head)):
        texts += [render.triple(edge), render.edge_from(edge.head.id, edge), render.edge_from(edge.tail.id, edge),
                  render.path(KGPath((PathStep(edge, False),)))]
    return list(dict.fromkeys(texts))


def item_leaks(query: Claim, payloads: Iterable[dict], observations: Iterable[str], *, shared: Collection[str] = ()) -> bool:
    """True when a support item or an observation of the run holds the query triple as a KG edge (``shared``: as
    for ``edge_texts``)."""
    leaking = query.leaking_edges
    for payload in payloads:
        edges = payload.get("edges") or [[payload.get("head"), payload.get("relation"), payload.get("tail")]]
        if any(tuple(edge) in leaking for edge in edges if len(edge) == 3):
            return True
    texts = edge_texts(query, shared)
    return any(text in observation for observation in observations for text in texts)


def latest_items(evaluation: Evaluation):
    return (EvaluationItem.objects.filter(evaluation=evaluation)
            .select_related("run", "task__head", "task__relation", "task__tail").order_by("position", "repeat"))


def collect(evaluation: Evaluation) -> tuple[list[Outcome], int]:
    """(outcomes of the items whose run has finished, number of items still without a finished run)."""
    items = list(latest_items(evaluation))
    done = [item for item in items if item.run is not None and item.run.is_finished]
    run_ids = [item.run_id for item in done]
    turns, calls = _step_counts(run_ids)
    memories = dict(Run.objects.filter(pk__in=run_ids).annotate(n=Count("memories_used")).values_list("pk", "n"))
    payloads, observations = _evidence(run_ids)
    scored_by = _scoring_models(run_ids)
    fitted = fitted_triples(evaluation.kg)
    shared = shared_labels(evaluation.kg_id, (label for item in done for label in (item.task.head.label, item.task.tail.label)))
    outcomes = []
    for item in done:
        run = item.run
        succeeded = run.status == Run.Status.SUCCEEDED
        relation = item.task.relation
        outcomes.append(Outcome(
            triple=item.task_id,
            relation=f"{relation.label} ({relation.external_id})" if relation.label != relation.external_id else relation.external_id,
            expected=item.expected_label,
            verdict=(run.verdict or None) if succeeded else None,
            failed=not succeeded,
            turns=turns.get(run.pk, 0),
            tool_calls=calls.get(run.pk, {}),
            prompt_tokens=run.prompt_tokens,
            completion_tokens=run.completion_tokens,
            cost_usd=float(run.cost_usd),
            latency_s=_latency(run),
            memories=memories.get(run.pk, 0),
            leaked=item_leaks(query_of(item), payloads.get(run.pk, []), observations.get(run.pk, []),
                              shared=shared),
            model_saw_it=any(trained_on(model, *_rows(item), fold) for model, fold, scored in scored_by.get(run.pk, ())
                             if scored == _external(item)),
            fitted=_rows(item) in fitted,
            confidence=run.confidence if succeeded else None,
        ))
    return outcomes, len(items) - len(done)


def figures(evaluation: Evaluation) -> dict:
    """Every figure of the evaluation from its runs so far, with the runs still pending and the models used."""
    found, pending = collect(evaluation)
    computed = metrics.compute(found)
    computed["pending"] = pending
    computed["repeats"] = evaluation.repeats
    computed["models"] = sorted(set(Run.objects.filter(evaluation_items__evaluation=evaluation).exclude(model="")
                                    .values_list("model", flat=True)))
    return computed


def _rows(item: EvaluationItem) -> tuple[int, int, int]:
    return item.task.head_id, item.task.relation_id, item.task.tail_id


def _external(item: EvaluationItem) -> tuple[str, str, str]:
    return item.task.head.external_id, item.task.relation.external_id, item.task.tail.external_id


def _scoring_models(run_ids: list[int]) -> dict[int, list[tuple[StructuralModel, int, tuple[str, str, str]]]]:
    """Per run, the structural models, networks and triples (external ids) of the scores it saw (its plausibility
    evidence)."""
    rows = SupportItem.objects.filter(run_id__in=run_ids, kind=SupportItem.Kind.PLAUSIBILITY).values_list("run_id", "payload")
    wanted: dict[int, set[tuple[int, int, tuple[str, str, str]]]] = defaultdict(set)
    for run_id, payload in rows:
        if payload.get("model"):
            triple = (payload.get("head", ""), payload.get("relation", ""), payload.get("tail", ""))
            wanted[run_id].add((int(payload["model"]), int(payload.get("fold", 0)), triple))
    models = light_models().in_bulk({pk for pks in wanted.values() for pk, _, _ in pks})
    return {run_id: [(models[pk], fold, triple) for pk, fold, triple in scored if pk in models]
            for run_id, scored in wanted.items()}


def _latency(run: Run) -> float:
    elapsed = run.elapsed()
    return elapsed.total_seconds() if elapsed is not None else 0.0


def _step_counts(run_ids: list[int]) -> tuple[dict[int, int], dict[int, dict[str, int]]]:
    turns: dict[int, int] = defaultdict(int)
    calls: dict[int, dict[str, int]] = defaultdict(dict)
    rows = (Step.objects.filter(run_id__in=run_ids, kind__in=[Step.Kind.THOUGHT, Step.Kind.ACTION])
            .values("run_id", "kind", "tool").annotate(n=Count("id")))
    for row in rows:
        if row["kind"] == Step.Kind.THOUGHT:
            turns[row["run_id"]] += row["n"]
        else:
            calls[row["run_id"]][row["tool"]] = row["n"]
    return turns, calls


def _evidence(run_ids: list[int]) -> tuple[dict[int, list[dict]], dict[int, list[str]]]:
    payloads: dict[int, list[dict]] = defaultdict(list)
    for run_id, payload in (SupportItem.objects.filter(run_id__in=run_ids, kind__in=[SupportItem.Kind.TRIPLE, SupportItem.Kind.PATH])
                            .values_list("run_id", "payload").iterator(chunk_size=5000)):
        payloads[run_id].append(payload)
    observations: dict[int, list[str]] = defaultdict(list)
    for run_id, content in (Step.objects.filter(run_id__in=run_ids, kind=Step.Kind.OBSERVATION)
                            .values_list("run_id", "content").iterator(chunk_size=5000)):
        observations[run_id].append(content)
    return payloads, observations
