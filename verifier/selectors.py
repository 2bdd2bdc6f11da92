"""Reads shared by the pages, the API and /health/, so one query answers each question: the structural model
of each local KG as people should read it (training 45 %, ready, stalled, failed, none; two queries, no
weights loaded), the pace and order of the run queue, unfinished evaluations' progress, the memory bank's listing and the audit log's."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass

from django.contrib.postgres.aggregates import ArrayAgg
from django.db.models import Count, Exists, F, Max, OuterRef, Q, QuerySet
from django.utils import timezone
from pgvector.django import CosineDistance

from verifier import redelivery
from verifier.memory import encoder
from verifier.models import (
    AuditEvent,
    EvaluationItem,
    KnowledgeGraph,
    MemoryEntry,
    Review,
    Run,
    StructuralModel,
    Triple,
    Verdict,
)
from verifier.models.memory import UNREVIEWED
from verifier.params import is_id
from verifier.queue_filters import EVALUATION_SOURCE_PREFIX
from verifier.queueing import RUN_VERIFICATION, queue_of
from verifier.roles import ADMIN, has_role


def standing_runs(task_ids) -> dict[int, int]:
    """task id → the run that stands for it: its latest reviewed run (a reviewer's decision stays the task's
    verdict until a reviewer decides again, whatever runs came after), else its latest succeeded run."""
    latest: dict[int, int] = {}
    reviewed = (Review.objects.filter(run__task_id__in=task_ids, run__status=Run.Status.SUCCEEDED).exclude(verdict="")
                .order_by("-created_at", "-id").values_list("run__task_id", "run_id"))
    for task_id, run_id in reviewed:
        latest.setdefault(task_id, run_id)
    finished = Run.objects.filter(task_id__in=task_ids, status=Run.Status.SUCCEEDED).order_by("-created_at", "-id")
    for task_id, run_id in finished.values_list("task_id", "id"):
        latest.setdefault(task_id, run_id)
    return latest


def stated_by_kg(task: str = "") -> Exists:
    """Whether the KG states the triple of the task reached through ``task`` (``"task__"`` from a run), as a
    subquery to annotate with. A remote KG's store is not looked up: read it through ``in_kg``."""
    return Exists(Triple.objects.filter(kg=OuterRef(f"{task}kg"), head=OuterRef(f"{task}head"),
                                        relation=OuterRef(f"{task}relation"), tail=OuterRef(f"{task}tail")))


def in_kg(kg: KnowledgeGraph, stated: bool) -> bool | None:
    """What the exports and pages say of a task's triple: ``stated`` (from ``stated_by_kg``) for a local KG, None
    (not known) for a remote one."""
    return None if kg.kind == KnowledgeGraph.Kind.SPARQL else bool(stated)


def answers_shown(user, tasks) -> set[int]:
    """Ids of ``tasks`` whose gold label and source ``user`` may see. A source can give the answer away (a benchmark's
    ``valid_negatives.txt:1383``) as plainly as the gold label, and a reviewer who sees either before deciding is no
    longer judging the evidence: an administrator sees them, anyone sees those of the triples an evaluation drew (they
    are the evaluation's data), a reviewer those of the triples they have decided on."""
    tasks = list(tasks)
    if has_role(user, ADMIN):
        return {task.pk for task in tasks}
    shown = {task.pk for task in tasks if task.source.startswith(EVALUATION_SOURCE_PREFIX)}
    if user is not None and user.is_authenticated:
        shown |= set(Review.objects.filter(reviewer=user, run__task__in=[task.pk for task in tasks])
                     .exclude(decision=Review.Decision.COMMENT).values_list("run__task_id", flat=True))
    return shown


def tasks_in_flight(tasks) -> set[int]:
    """Ids of the ``tasks`` (a queryset or ids) that have a run queued or running: a new run must wait."""
    return set(Run.objects.filter(task__in=tasks).in_flight().values_list("task_id", flat=True))


# Everything but the calibration maps, which can be megabytes a row and nobody here reads.
HEAVY_FIELDS = ("calibration",)
IN_FLIGHT = (StructuralModel.Status.QUEUED, StructuralModel.Status.TRAINING)


@dataclass(frozen=True)
class StructuralStatus:
    """The structural model of one KG's current version.

    A structural model is several networks, each trained without one fold of the KG's triples, so that every triple
    is scored by a network that never saw it. ``state``: ``none`` (nothing trained for this version), ``queued``,
    ``training``, ``ready``, ``failed`` or ``stalled`` (in flight on paper, no heartbeat: its worker is gone). ``ok`` is False only when the
    latest job failed or stalled and no ready model serves the tools meanwhile: without a model the
    product still works (the tools say so), a broken job nobody will finish needs an operator.
    """

    kg_id: int
    kg: str
    kg_version: int
    state: str
    ok: bool
    text: str  # "training (45%), about 6 min left": in a curator's words
    detail: str  # "training: network 2 of 5, epoch 40/300, held-out MRR 0.351": the job's own words, for the title
    remedy: str  # what an administrator runs to train it ("" when nothing needs doing)
    progress: float  # 0–1 of the latest job
    model_id: int | None
    ready_model_id: int | None
    mrr: float | None  # the ready model's MRR on unseen triples (ranking_quality)

    @property
    def in_flight(self) -> bool:
        return self.state in ("queued", "training")

    @property
    def percent(self) -> int:
        return round(self.progress * 100)

    def as_dict(self) -> dict:
        return {**asdict(self), "in_flight": self.in_flight, "percent": self.percent}


def light_models() -> QuerySet:
    """StructuralModel rows without their weights and calibration maps."""
    return StructuralModel.objects.defer(*HEAVY_FIELDS)


def ranking_quality(model: StructuralModel) -> tuple[str, float] | None:
    """How well the model ranks triples it never saw, as the docs and benchmarks report it: the filtered MRR on the
    dataset's own validation split where the KG has one (CoDEx-S, FB15k-237), else on a sample of each network's own
    fold, which it never learnt (the networks' mean). (name of the figure, value), or None before validation."""
    metrics = model.metrics or {}
    for key, name in (("dataset_validation", "validation MRR"), ("validation", "held-out MRR")):
        mrr = (metrics.get(key) or {}).get("mrr")
        if isinstance(mrr, int | float):
            return name, float(mrr)
    return None


def model_summary(model: StructuralModel) -> str:
    """"ComplEx, validation MRR 0.383": the kind of embedding model and how well it ranks unseen triples, in the
    builders' terms (administrators' reports, the command line, a status line's title)."""
    kind = ((model.config or {}).get("kge") or {}).get("model") or "KGE"
    quality = ranking_quality(model)
    cut = ", cut short by its time budget" if (model.metrics or {}).get("cut_short") else ""
    return (f"{kind}, {quality[0]} {quality[1]:.3f}" if quality else kind) + cut


def ranking_words(model: StructuralModel) -> str:
    """"ranks unseen facts well: 0.40": how well the model puts a true fact it never saw above the false ones, in a
    curator's words (the figure is its MRR on facts held out of its training)."""
    quality = ranking_quality(model)
    if quality is None:
        return "not measured yet"
    mrr = quality[1]
    how = "well" if mrr >= 0.3 else "fairly" if mrr >= 0.15 else "poorly"
    return f"ranks unseen facts {how}: {mrr:.2f}"


def _time_left(stage: str, template: str = "{}") -> str:
    """The training's own estimate of its time left ("about 6 min left" at the end of its stage text), put into
    ``template``; "" before there is one."""
    match = re.search(r"— about (.+?) left$", stage or "")
    return template.format(match.group(1)) if match else ""


def _progress_text(model: StructuralModel) -> str:
    """"training (45%), about 6 min left" from the row's progress and the stage text its job writes
    ("training: network 2 of 5, epoch 40/300, held-out MRR 0.351 — about 6 min left")."""
    if model.status == StructuralModel.Status.QUEUED:
        return "waiting for a training worker"
    stage = (model.stage or "").partition(":")[0].strip() or "training"
    doing = "preparing its training" if stage == "preparing" else "checking its scores" if stage == "calibrating" else "training"
    return f"{doing} ({model.progress:.0%}){_time_left(model.stage, ', about {} left')}"


def _when(model: StructuralModel) -> str:
    last = model.heartbeat_at or model.created_at
    return f"{timezone.localtime(last):%Y-%m-%d %H:%M %Z}" if last else "it started"


def _first_line(text: str) -> str:
    line = (text or "").strip().splitlines()[0] if (text or "").strip() else "no error recorded"
    return line if len(line) <= 160 else line[:157] + "…"


def describe(kg: KnowledgeGraph, latest: StructuralModel | None, ready: StructuralModel | None) -> StructuralStatus:
    """The status of ``kg`` from its latest model and its newest ready model of the current version (``latest``
    may carry ``waiting``: the queued runs that wait for it): ``text`` in a curator's words, ``detail`` in the
    builders' (the job's stage, the kind of model and its MRR)."""
    older = ready is not None and latest is not None and ready.pk != latest.pk
    serving = f"; meanwhile the previous model scores facts ({ranking_words(ready)})" if older else ""
    detail = ""
    if latest is None:
        referenced = sorted(name for name in getattr(kg, "referenced", None) or [] if name)
        state = "none"
        text = f"none needed: {kg.name} is the reference KG of {', '.join(referenced)}" if referenced else "not trained yet"
    elif latest.is_stale:
        state, text = "stalled", f"its training stopped (no sign of life since {_when(latest)}){serving}"
        detail = latest.stage
    elif latest.status in IN_FLIGHT:
        state, waiting = latest.status, getattr(latest, "waiting", 0)
        text = _progress_text(latest) + (f"; {waiting} run{'s wait' if waiting != 1 else ' waits'} for it" if waiting else "") + serving
        detail = latest.stage
    elif latest.status == StructuralModel.Status.READY:
        cut = "; its training ran out of time, more could improve it" if (latest.metrics or {}).get("cut_short") else ""
        state, text, detail = "ready", f"ready ({ranking_words(latest)}){cut}", model_summary(latest)
    else:
        state, text, detail = "failed", f"its training failed{serving}", _first_line(latest.error)
    if older:
        detail = f"{detail}; serving model #{ready.pk}: {model_summary(ready)}"
    stuck = state in ("failed", "stalled") or (state == "none" and not text.startswith("none needed"))
    return StructuralStatus(
        kg_id=kg.pk, kg=kg.name, kg_version=kg.version, state=state, ok=state not in ("failed", "stalled") or ready is not None,
        text=text, detail=detail, remedy=f"manage.py train_kge {kg.name}" if stuck else "",
        progress=1.0 if state == "ready" else (latest.progress if latest else 0.0),
        model_id=latest.pk if latest else None, ready_model_id=ready.pk if ready else None,
        mrr=quality[1] if ready and (quality := ranking_quality(ready)) else None,
    )


def structural_statuses(kg_ids: list[int] | None = None) -> list[StructuralStatus]:
    """The structural model status of every local KG with data (or of ``kg_ids``), by KG name.

    Two queries: the KGs, then every model of their current versions, newest first (a version has a
    handful: one per training job)."""
    kgs = KnowledgeGraph.objects.filter(kind=KnowledgeGraph.Kind.LOCAL, version__gt=0).order_by("name")
    if kg_ids is not None:
        kgs = kgs.filter(pk__in=kg_ids)
    kgs = list(kgs.only("id", "name", "version", "kind").annotate(referenced=ArrayAgg("referenced_by__name")))
    models = (light_models().filter(kg__in=kgs, kg_version=F("kg__version")).order_by("-id")
              .annotate(waiting=Count("awaiting_runs", filter=Q(awaiting_runs__status=Run.Status.QUEUED))))
    latest: dict[int, StructuralModel] = {}
    ready: dict[int, StructuralModel] = {}
    for model in models:
        if model.status != StructuralModel.Status.SUPERSEDED:  # a retraining replaced by a restored model
            latest.setdefault(model.kg_id, model)
        if model.status == StructuralModel.Status.READY:
            ready.setdefault(model.kg_id, model)
    return [describe(kg, latest.get(kg.pk), ready.get(kg.pk)) for kg in kgs]


def scoring_model(model_id: int | None) -> StructuralModel | None:
    """The structural model that scored a run, with its KG, without its weights."""
    if model_id is None:
        return None
    return light_models().select_related("kg").filter(pk=model_id).first()


@dataclass(frozen=True)
class RunPace:
    """How long recent runs took and what they cost: the basis of queue ETAs and bulk-run estimates."""

    runs: int  # how many recent succeeded runs the figures come from (0: no basis yet)
    median_seconds: float | None
    mean_cost_usd: float

    def duration(self, count: int, parallel: int = 1) -> str:
        """"about 4 min" for ``count`` runs (or "" without a basis)."""
        if not self.runs or self.median_seconds is None or count <= 0:
            return ""
        seconds = self.median_seconds * count / max(parallel, 1)
        return f"about {seconds / 60:.0f} min" if seconds >= 90 else f"about {seconds:.0f} s"


PACE_WINDOW = 50


def run_pace(mode: str = "agent") -> RunPace:
    """The median duration and mean cost of the last PACE_WINDOW succeeded runs of ``mode`` curators started
    (evaluation runs excluded: their modes are not the curators'). A run that names no mode is an investigation."""
    of_mode = Q(config__mode=mode) | (Q(config__mode__isnull=True) if mode == "agent" else Q(pk__in=[]))
    recent = list(Run.objects.filter(of_mode, status=Run.Status.SUCCEEDED, started_at__isnull=False,
                                     finished_at__isnull=False, evaluation_items__isnull=True)
                  .order_by("-finished_at").values_list("started_at", "finished_at", "cost_usd")[:PACE_WINDOW])
    if not recent:
        return RunPace(0, None, 0.0)
    durations = sorted((finished - started).total_seconds() for started, finished, _ in recent)
    middle = len(durations) // 2
    median = durations[middle] if len(durations) % 2 else (durations[middle - 1] + durations[middle]) / 2
    return RunPace(len(recent), median, float(sum(cost for _, _, cost in recent)) / len(recent))


@dataclass(frozen=True)
class QueuePlace:
    """Where a queued run stands in the verification workers' line."""

    position: int | None  # 1: the next run a worker takes; None: not in the line (not sent yet, or waiting for a training)
    ahead: tuple[int, ...] = ()  # the queued runs the workers take before it, in that order


def queue_place(run: Run) -> QueuePlace:
    """The run's place in the order the workers take runs: the order of their messages in the broker
    (redelivery.waiting_line; runs sent again after a training, or by the sweep, stand where their message is), counting
    only runs still queued. Without a Redis broker, the order the runs were made in."""
    if run.status != Run.Status.QUEUED or run.awaiting_model_id:
        return QueuePlace(None)
    return place_in_line(run, redelivery.waiting_line(queue_of(RUN_VERIFICATION)))


def place_in_line(run: Run, line: list[int] | None) -> QueuePlace:
    """The run's place in ``line``, the run ids in the order the workers take them (None: the order runs were made
    in), counting only runs still queued."""
    if run.status != Run.Status.QUEUED or run.awaiting_model_id:
        return QueuePlace(None)
    if line is None:
        earlier = Run.objects.filter(status=Run.Status.QUEUED, awaiting_model__isnull=True).filter(
            Q(created_at__lt=run.created_at) | Q(created_at=run.created_at, pk__lt=run.pk)).order_by("created_at", "pk")
        ahead = tuple(earlier.values_list("pk", flat=True))
        return QueuePlace(len(ahead) + 1, ahead)
    if run.pk not in line:
        return QueuePlace(None)
    before = line[:line.index(run.pk)]
    queued = set(Run.objects.filter(pk__in=before, status=Run.Status.QUEUED).values_list("pk", flat=True))
    ahead = tuple(pk for pk in before if pk in queued)
    return QueuePlace(len(ahead) + 1, ahead)


def queue_position(run: Run) -> int | None:
    """1 for the next run a worker will take, … ; None unless the run is in the workers' line."""
    return queue_place(run).position


def queue_wait(run: Run, place: QueuePlace | None = None) -> str:
    """When a worker should take a queued run ("about 4 min"; "" without a basis): the runs ahead of it and the run
    itself, each kind at the pace of its recent runs (an evidence-only run takes a second, an investigation far longer)."""
    place = place or queue_place(run)
    if place.position is None:
        return ""
    ahead = Run.objects.filter(pk__in=place.ahead).aggregate(n=Count("id"), weighing=Count("id", filter=Q(config__mode="evidence")))
    weighing = ahead["weighing"] + (run.config.get("mode") == "evidence")
    others = ahead["n"] + 1 - weighing
    paces = [(run_pace(), others), (run_pace("evidence"), weighing)]
    if any(count and pace.median_seconds is None for pace, count in paces):
        return ""
    return RunPace(1, sum((pace.median_seconds or 0) * count for pace, count in paces), 0.0).duration(1)


def awaited_training(run: Run) -> str:
    """What a queued run waits for when it waits for its KG's structural model (verifier/runner.py)."""
    if run.status != Run.Status.QUEUED or not run.awaiting_model_id:
        return ""
    model = StructuralModel.objects.defer(*HEAVY_FIELDS).filter(pk=run.awaiting_model_id).first()
    if model is None:
        return ""
    if model.status in IN_FLIGHT:
        state = "waiting for a training worker" if model.status == model.Status.QUEUED else \
            f"{model.progress:.0%} trained{_time_left(model.stage, ', about {} left')}"
        return (f"Waits for the structural model of {run.task.kg.name} ({state}): the verdict's confidence rests on it. "
                "The run starts by itself when the training ends.")
    return f"Waited for the structural model of {run.task.kg.name}, whose training {model.get_status_display().lower()}; it starts shortly."


MEMORY_TEXT_FIELDS = ("triple_text", "relation_label", "trajectory", "lesson", "provenance")


def memory_entries(*, status: str = "", verdict: str = "", relation: str = "", kg: str = "", review: str = "",
                   text: str = "", similar: str = "") -> QuerySet[MemoryEntry]:
    """The memory bank as the page and the API list it, each entry with ``use_count`` and ``last_used``.

    Filters (empty: any): status, verdict, the exact relation label, the name of the KG the case was
    investigated on, ``review`` ("awaiting": bootstrapped
    entries no curator has reviewed yet, "done": the others); ``text``: the words anywhere in the
    triple, relation, trajectory, lesson or provenance. With ``similar`` every entry is ranked by the cosine
    similarity of its embedded triple text to it (``similarity``), as a run retrieves; else newest first."""
    entries = MemoryEntry.objects.select_related("source_run", "promoted_by")
    for name, value in (("status", status), ("verdict", verdict), ("relation_label", relation), ("kg_name", kg)):
        if value:
            entries = entries.filter(**{name: value})
    if review in ("awaiting", "done"):
        awaiting = Q(provenance__contains=UNREVIEWED)
        entries = entries.filter(awaiting if review == "awaiting" else ~awaiting)
    if text:
        entries = entries.filter(Q.create([(f"{field}__icontains", text) for field in MEMORY_TEXT_FIELDS], connector=Q.OR))
    entries = entries.annotate(use_count=Count("uses"), last_used=Max("uses__run__created_at"))
    if similar:
        distance = CosineDistance("embedding", encoder.encode_one(similar))
        return entries.annotate(similarity=1 - distance).order_by(F("similarity").desc(), "-id")
    return entries.order_by("-created_at", "-id")


MEMORY_STATUSES = ("active", "retired", "all")  # the bank list's tabs, the first the default
MEMORY_SEARCH_MODES = ("text", "similar")  # words anywhere, or every entry ranked by similarity of meaning


@dataclass(frozen=True)
class MemoryView:
    """The bank's list page for its query parameters: the entries it lists and the status tab, search mode and
    text it shows (unknown values fall back to the defaults)."""

    entries: QuerySet
    status: str  # "active", "retired" or "all"
    mode: str  # "text" or "similar" (every entry, ranked by similarity)
    text: str


def memory_view(params) -> MemoryView:
    status = params.get("status", MEMORY_STATUSES[0])
    status = status if status in MEMORY_STATUSES else MEMORY_STATUSES[0]
    mode = params.get("mode", MEMORY_SEARCH_MODES[0])
    mode = mode if mode in MEMORY_SEARCH_MODES else MEMORY_SEARCH_MODES[0]
    text, verdict = params.get("q", "").strip(), params.get("verdict", "")
    entries = memory_entries(status="" if status == "all" else status, verdict=verdict if verdict in Verdict.values else "",
                             relation=params.get("relation", "").strip(), kg=params.get("kg", "").strip(),
                             review=params.get("review", ""), **({"similar": text} if mode == "similar" else {"text": text}))
    return MemoryView(entries, status, mode, text)


def audit_events(*, action: str = "", actor: str = "", object_type: str = "", object_id: str = "") -> QuerySet[AuditEvent]:
    """The audit log as the page and the API filter it (empty: any), newest first. ``action``: exactly, or
    every action under a prefix ending in a dot ("review."); ``actor``: a username or a user id."""
    events = AuditEvent.objects.select_related("actor")
    if action:
        events = events.filter(action__startswith=action) if action.endswith(".") else events.filter(action=action)
    if actor:
        events = events.filter(Q(actor__username=actor) | Q(actor_id=int(actor)) if is_id(actor) else Q(actor__username=actor))
    for field, value in (("object_type", object_type), ("object_id", object_id)):
        if value:
            events = events.filter(**{field: value})
    return events


def verified_so_far(evaluation_ids: list[int]) -> dict[int, str]:
    """Per unfinished evaluation, how many of its verifications have a run that ended (the progress its row shows)."""
    ended = Q(run__isnull=False) & ~Q(run__status__in=Run.IN_FLIGHT)
    counts = (EvaluationItem.objects.filter(evaluation_id__in=evaluation_ids).values("evaluation_id")
              .annotate(total=Count("pk"), done=Count("pk", filter=ended)))
    return {row["evaluation_id"]: f"{row['done']} of {row['total']}" for row in counts}
