"""What the run page shows besides the steps: the support subgraph, the review state and the place of the
run's task in the curator's queue."""

from __future__ import annotations

from dataclasses import dataclass

from django.db import connection
from django.db.models import F, Q, QuerySet, Window
from django.db.models.functions import Lag, Lead
from django.http import QueryDict

from verifier.kg.base import Ref, shared_within
from verifier.models import Agreement, Review, Run, SupportItem, VerificationTask, agreement, latest_decisions
from verifier.queue_filters import QueueFilterError, filter_tasks

GRAPH_KINDS = (SupportItem.Kind.TRIPLE, SupportItem.Kind.PATH)


class SubgraphBuilder:
    """Entities as nodes, relations as edges; an edge remembers which evidence keys it came from."""

    def __init__(self) -> None:
        self.nodes: dict[str, dict] = {}
        self.edges: dict[tuple[str, str, str], dict] = {}

    def node(self, entity_id: str, label: str, *, query: bool = False) -> None:
        node = self.nodes.setdefault(entity_id, {"id": entity_id, "label": label or entity_id, "query": False})
        node["query"] = node["query"] or query
        if label and node["label"] == entity_id:
            node["label"] = label

    def edge(self, head: str, relation: str, tail: str, label: str, *, key: str = "", cited: bool = False,
             query: bool = False) -> None:
        edge = self.edges.setdefault((head, relation, tail), {
            "id": f"{head}|{relation}|{tail}", "source": head, "target": tail, "relation": relation,
            "label": label or relation, "keys": [], "cited": False, "query": False})
        if key and key not in edge["keys"]:
            edge["keys"].append(key)
        edge["cited"] = edge["cited"] or cited
        edge["query"] = edge["query"] or query

    def add_item(self, item: SupportItem) -> None:
        payload = item.payload or {}
        if item.kind == SupportItem.Kind.TRIPLE and {"head", "relation", "tail"} <= payload.keys():
            labels = payload.get("labels") or ["", "", ""]
            self.node(payload["head"], labels[0])
            self.node(payload["tail"], labels[2])
            self.edge(payload["head"], payload["relation"], payload["tail"], labels[1], key=item.key, cited=item.cited)
        elif item.kind == SupportItem.Kind.PATH:
            entities, relations = payload.get("entities", {}), payload.get("relations", {})
            for head, relation, tail in payload.get("edges", []):
                self.node(head, entities.get(head, ""))
                self.node(tail, entities.get(tail, ""))
                self.edge(head, relation, tail, relations.get(relation, ""), key=item.key, cited=item.cited)

    def as_dict(self) -> dict:
        """Nodes whose label another node of the drawing carries too are labelled with their id as well."""
        refs = [Ref(node["id"], node["label"]) for node in self.nodes.values()]
        shared = shared_within(refs)
        nodes = [{**node, "label": ref.marked(shared).distinct_name} if ref.label in shared else node
                 for node, ref in zip(self.nodes.values(), refs, strict=True)]
        return {"nodes": nodes, "edges": list(self.edges.values())}


def support_subgraph(run: Run) -> dict:
    """The query triple (highlighted) and the triples and paths the verdict cites; while nothing is cited
    yet (a live run, a failed one) every triple and path retrieved so far."""
    task = run.task
    graph = SubgraphBuilder()
    graph.node(task.head.external_id, task.head.label, query=True)
    graph.node(task.tail.external_id, task.tail.label, query=True)
    graph.edge(task.head.external_id, task.relation.external_id, task.tail.external_id, task.relation.label, query=True)
    items = list(run.support_items.filter(kind__in=GRAPH_KINDS).order_by("id"))
    cited = [item for item in items if item.cited]
    for item in cited or items:
        graph.add_item(item)
    return {**graph.as_dict(), "cited_only": bool(cited),
            "query": {"head": task.head.external_id, "relation": task.relation.external_id, "tail": task.tail.external_id}}


@dataclass
class ReviewState:
    """``unreviewed``, ``accepted``, ``overridden``, ``not_enough_evidence`` or ``split`` (reviewers' latest
    decisions disagree: ``Agreement.SPLIT``), with each reviewer's latest decision."""

    state: str
    verdict: str
    latest: list[Review]


_STATE_OF = {Review.Decision.ACCEPT: "accepted", Review.Decision.OVERRIDE: "overridden",
             Review.Decision.NOT_ENOUGH_EVIDENCE: "not_enough_evidence"}


def review_state(reviews: list[Review]) -> ReviewState:
    """``reviews`` newest first (the model's ordering); comments do not change the state."""
    decisions = latest_decisions(reviews)
    if not decisions:
        return ReviewState("unreviewed", "", [])
    if agreement(decisions, "") == Agreement.SPLIT:
        return ReviewState("split", "", decisions)
    return ReviewState(_STATE_OF[decisions[0].decision], decisions[0].verdict, decisions)


def queue_tasks(queue: str, user=None) -> QuerySet:
    """The tasks of the queue page in its order: newest first, narrowed and sorted by the queue page's own
    filters (``verifier.queue_filters.filter_tasks``) when the run page was opened from a filtered queue.
    Filters the queue page would reject fall back to the whole queue."""
    tasks = VerificationTask.objects.all()
    if not queue:
        return tasks
    try:
        return filter_tasks(tasks, QueryDict(queue), user=user)
    except QueueFilterError:
        return tasks


def _ordering(tasks: QuerySet) -> list:
    """The queryset's ORDER BY as expressions, with the id as the last tie-breaker (a total order)."""
    terms = list(tasks.query.order_by or VerificationTask._meta.ordering)
    if not {"id", "-id", "pk", "-pk"} & {term for term in terms if isinstance(term, str)}:
        terms.append("-id")
    return [term if not isinstance(term, str) else F(term[1:]).desc() if term.startswith("-") else F(term).asc()
            for term in terms]


def next_to_review(task: VerificationTask, queue: str = "", user=None) -> int | None:
    """The task a reviewer who has just decided on ``task`` turns to: the next one after it in the view's order that
    awaits a reviewer's decision (verified: its run has a verdict nobody has decided on), else the first such one of
    the view; None when no other task of the view awaits review."""
    tasks = queue_tasks(queue, user)
    ordering = _ordering(tasks)
    awaiting = tasks.filter(Q(status=VerificationTask.Status.VERIFIED) | Q(pk=task.pk))
    ranked = awaiting.order_by().annotate(next_id=Window(Lead("id"), order_by=ordering)).values("id", "next_id")
    sql, params = ranked.query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT next_id FROM ({sql}) AS queue WHERE id = %s", [*params, task.pk])
        row = cursor.fetchone()
    if row and row[0]:
        return row[0]
    return awaiting.exclude(pk=task.pk).order_by(*ordering).values_list("id", flat=True).first()


def queue_neighbours(task: VerificationTask, queue: str = "", user=None) -> tuple[int | None, int | None]:
    """(previous, next) task ids around ``task`` in the queue order; one query, computed in the database."""
    tasks = queue_tasks(queue, user)
    ordering = _ordering(tasks)
    ranked = tasks.order_by().annotate(
        previous_id=Window(Lag("id"), order_by=ordering), next_id=Window(Lead("id"), order_by=ordering),
    ).values("id", "previous_id", "next_id")
    sql, params = ranked.query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT previous_id, next_id FROM ({sql}) AS queue WHERE id = %s", [*params, task.pk])
        row = cursor.fetchone()
    return (row[0], row[1]) if row else (None, None)
