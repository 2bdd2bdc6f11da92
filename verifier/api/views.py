"""REST API views. Reads go through querysets, writes through verifier.services; roles via verifier.roles.HasRole
(``read_role`` for GET, ``write_role`` for other methods, ``action_roles`` per action)."""

from __future__ import annotations

from django.db.models import Prefetch
from django.http import HttpResponse
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, extend_schema_view
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView
from rest_framework import exceptions, mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.negotiation import BaseContentNegotiation
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from verifier import exports, services
from verifier.api import serializers as s
from verifier.api.errors import Conflict
from verifier.comparison import compare_runs
from verifier.errors import listed
from verifier.evaluation import control
from verifier.exports.records import select
from verifier.models import AuditEvent, Evaluation, MemoryEntry, Review, Run, RunMemory, SupportItem, VerificationTask
from verifier.params import get_ids, get_int
from verifier.queue_filters import annotate_latest, filter_tasks
from verifier.roles import ADMIN, REVIEWER, VIEWER, has_role
from verifier.selectors import HEAVY_FIELDS, audit_events, memory_entries, tasks_in_flight
from verifier.uploads import uploaded_file

QUEUE_PARAMETERS = [
    OpenApiParameter("status", str, description="pending, running, verified, reviewed (repeat or comma-separate)"),
    OpenApiParameter("kg", int, description="knowledge-graph id"),
    OpenApiParameter("relation", str, description="relation: id, the KG's id (P27) or label (country of citizenship)"),
    OpenApiParameter("verdict", str, description="verdict of the latest run: correct, incorrect, not_enough_evidence, none"),
    OpenApiParameter("agreement", str, description="agree, disagree, split (reviewers disagree), unreviewed: each "
                                                   "reviewer's latest decision on the latest reviewed run counts"),
    OpenApiParameter("confidence_min", float), OpenApiParameter("confidence_max", float),
    OpenApiParameter("disputed", str, enum=["true", "false"],
                     description="true: only tasks whose latest verdict the structural evidence disputes; false: exclude them"),
    OpenApiParameter("signal", str, description="verdict quality signals of the latest verdict (all must hold): cites_nothing, "
                     "off_claim, forced, looped, memory_other, weak_memory; or any / none"),
    OpenApiParameter("origin", str, enum=["work", "evaluation", "all"],
                     description="work (default): imported flagged triples; evaluation: benchmark triples of evaluations; all"),
    OpenApiParameter("source", str, description="search in the task's source (file name or evaluation:<name>)"),
    OpenApiParameter("claim", str, description="a claim id: the parts of that claim in plain language; any: of any claim"),
    OpenApiParameter("kg_audit", int, description="a KG audit id: the triples its suspects were queued as"),
    OpenApiParameter("assignee", str, description="user id, me or none"),
    OpenApiParameter("q", str, description="search in head, relation and tail labels"),
    OpenApiParameter("sort", str, description="created, updated, status, head, relation, tail, verdict, confidence, id; - for descending"),
]


# ------------------------------------------------------------------------------------------------- tasks
@extend_schema_view(list=extend_schema(parameters=QUEUE_PARAMETERS))
class TaskViewSet(viewsets.ReadOnlyModelViewSet):
    """The verification queue: flagged triples with their latest verdict."""

    queryset = VerificationTask.objects.all()
    serializer_class = s.TaskSerializer

    def get_queryset(self):
        if self.action == "list":
            return filter_tasks(VerificationTask.objects.all(), self.request.query_params, user=self.request.user)
        return annotate_latest(VerificationTask.objects.select_related("kg", "head", "relation", "tail", "assignee"))

    @extend_schema(request={"multipart/form-data": s.TaskImportSerializer},
                   responses={201: s.TaskImportResultSerializer})
    @action(detail=False, methods=["post"], url_path="import", url_name="import")
    def import_file(self, request: Request) -> Response:
        """Queue the flagged triples of a CSV/TSV file; a bad row rejects the file (400 listing every bad row)
        unless ``skip_invalid`` is set, in which case the bad rows are reported in ``skipped``."""
        form = s.TaskImportSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        upload = form.validated_data["file"]
        with uploaded_file(upload) as path:
            report = services.import_flagged_triples(kg=form.validated_data["kg"], path=path, actor=request.user,
                                                     skip_invalid=form.validated_data["skip_invalid"])
        result = {"created": report.created, "already_queued": report.already_queued, "lines": report.lines,
                  "stated": report.stated, "skipped": [{"line": p.line, "message": p.message} for p in listed(report.skipped)],
                  "skipped_count": len(report.skipped)}
        return Response(result, status=status.HTTP_201_CREATED)

    @extend_schema(request=s.TaskBulkSerializer, responses={200: s.TaskBulkResultSerializer})
    @action(detail=False, methods=["post"])
    def bulk(self, request: Request) -> Response:
        """Run, assign or accept the verdicts of several tasks at once (all or nothing). Accepting needs the
        reviewer role: each task with a finished verdict and no reviewer decision gets an accept review."""
        form = s.TaskBulkSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        data = form.validated_data
        tasks = VerificationTask.objects.filter(pk__in=data["ids"])
        if data["action"] == "accept":
            if not has_role(request.user, REVIEWER):
                raise exceptions.PermissionDenied("accepting verdicts needs the reviewer role")
            reviews, left = services.accept_verdicts(tasks=tasks.order_by("pk"), reviewer=request.user)
            return Response({"action": "accept", "reviews": [review.pk for review in reviews], "left": left})
        if data["action"] == "assign":
            changed = services.assign_tasks(tasks=tasks, assignee=data["assignee"], actor=request.user)
            return Response({"action": "assign", "changed": changed})
        by_id = {task.pk: task for task in tasks}
        busy = tasks_in_flight(tasks)
        runs = services.start_runs(tasks=[by_id[pk] for pk in data["ids"] if pk not in busy], config=data["config"],
                                   actor=request.user)
        return Response({"action": "run", "runs": [run.pk for run in runs], "busy": sorted(busy)})


# -------------------------------------------------------------------------------------------------- runs
@extend_schema_view(
    list=extend_schema(parameters=[
        OpenApiParameter("task", str, description="task id(s), comma-separated"),
        OpenApiParameter("status", str, enum=Run.Status.values),
    ]),
    create=extend_schema(request=s.RunCreateSerializer, responses={
        201: s.RunDetailSerializer,
        409: OpenApiResponse(description="the task has a run queued or running, or the mode decides only by weighing "
                                         "(evidence, reading) and no confidence model is in force for the task's KG")}),
)
class RunViewSet(mixins.CreateModelMixin, viewsets.ReadOnlyModelViewSet):
    """Investigations: start (curator), follow, cancel (curator), review, promote to the memory bank (reviewer)."""

    queryset = Run.objects.all()
    action_roles = {"promote": REVIEWER}

    def get_serializer_class(self):
        return s.RunSerializer if self.action == "list" else s.RunDetailSerializer

    def get_queryset(self):
        runs = (Run.objects.select_related("task__head", "task__relation", "task__tail", "created_by", "structural_model__kg",
                                   "awaiting_model")
                .defer(*(f"{model}__{name}" for model in ("structural_model", "awaiting_model") for name in HEAVY_FIELDS)))
        if self.action == "list":
            params = self.request.query_params
            if tasks := get_ids(params, "task"):
                runs = runs.filter(task_id__in=tasks)
            if run_status := params.get("status"):
                if run_status not in Run.Status.values:
                    raise exceptions.ValidationError({"status": [f"one of {', '.join(Run.Status.values)}"]})
                runs = runs.filter(status=run_status)
            return runs
        return runs.prefetch_related(
            Prefetch("memories_used", queryset=RunMemory.objects.select_related("entry")),
            Prefetch("support_items", queryset=SupportItem.objects.select_related("step").order_by("id")),
            Prefetch("reviews", queryset=Review.objects.select_related("reviewer")),
        )

    def create(self, request: Request, *args, **kwargs) -> Response:
        form = s.RunCreateSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        run = services.start_run(task=form.validated_data["task"], config=form.validated_data["config"], actor=request.user)
        return Response(s.RunDetailSerializer(self.get_queryset().get(pk=run.pk)).data, status=status.HTTP_201_CREATED)

    @extend_schema(parameters=[OpenApiParameter("after", int, description="only steps with a larger seq")],
                   responses={200: s.StepSerializer(many=True)})
    @action(detail=True, methods=["get"])
    def steps(self, request: Request, pk=None) -> Response:
        """The run's steps in order; ``?after=<seq>`` resumes after the last one a client has."""
        run = self.get_object()
        after = get_int(request.query_params, "after", 0)
        steps = run.steps.filter(seq__gt=after).order_by("seq")
        return Response(s.StepSerializer(steps, many=True).data)

    @extend_schema(request=None, responses={200: s.RunSerializer, 409: OpenApiResponse(description="the run had already ended")})
    @action(detail=True, methods=["post"])
    def cancel(self, request: Request, pk=None) -> Response:
        run = self.get_object()
        if not services.cancel_run(run=run, actor=request.user):
            raise Conflict(f"run {run.pk} has already ended ({run.status})")
        return Response(s.RunSerializer(self.get_queryset().get(pk=run.pk)).data)

    @extend_schema(methods=["get"], responses={200: s.ReviewSerializer(many=True)})
    @extend_schema(methods=["post"], request=s.ReviewCreateSerializer, responses={201: s.ReviewSerializer})
    @action(detail=True, methods=["get", "post"])
    def reviews(self, request: Request, pk=None) -> Response:
        """Reviews of the run. Posting: accept / override (reason required) / not_enough_evidence need the
        reviewer role; a curator may post a ``comment``."""
        run = self.get_object()
        if request.method == "GET":
            return Response(s.ReviewSerializer(run.reviews.select_related("reviewer"), many=True).data)
        form = s.ReviewCreateSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        data = form.validated_data
        if data["decision"] != Review.Decision.COMMENT and not has_role(request.user, REVIEWER):
            raise exceptions.PermissionDenied("Deciding on a verdict needs the reviewer role; curators may comment.")
        review = services.review_run(run=run, reviewer=request.user, decision=data["decision"], reason=data["reason"],
                                     verdict=data["verdict"])
        return Response(s.ReviewSerializer(review).data, status=status.HTTP_201_CREATED)

    @extend_schema(responses={200: s.RunComparisonSerializer})
    @action(detail=True, methods=["get"], url_path=r"compare/(?P<other>[0-9]+)")
    def compare(self, request: Request, pk=None, other=None) -> Response:
        """This run and another run of the same task side by side, the older first: what a re-verification
        changed (verdict, confidence, evidence added and dropped, where the steps part)."""
        runs = sorted([self.get_object(), get_object_or_404(Run, pk=other)], key=lambda run: (run.created_at, run.pk))
        return Response(s.RunComparisonSerializer(compare_runs(*runs).as_dict()).data)

    @extend_schema(request=s.PromoteSerializer, responses={201: s.MemoryEntryDetailSerializer})
    @action(detail=True, methods=["post"])
    def promote(self, request: Request, pk=None) -> Response:
        """Copy the run (optionally with an edited trajectory) into the memory bank; the next run retrieves it."""
        run = self.get_object()
        form = s.PromoteSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        entry = services.promote_run(run=run, actor=request.user, trajectory=form.validated_data.get("trajectory"),
                                     triple_text=form.validated_data.get("triple_text"))
        return Response(memory_data(entry), status=status.HTTP_201_CREATED)


# ------------------------------------------------------------------------------------------------ memory
def memory_queryset():
    return memory_entries().prefetch_related(
        Prefetch("uses", queryset=RunMemory.objects.select_related("run").order_by("-run__created_at"))
    )


def memory_data(entry: MemoryEntry) -> dict:
    """The entry as the memory endpoints answer with it, as stored now."""
    return s.MemoryEntryDetailSerializer(memory_queryset().get(pk=entry.pk)).data


@extend_schema_view(list=extend_schema(parameters=[
    OpenApiParameter("q", str, description="text search in triple, relation, trajectory, lesson and provenance"),
    OpenApiParameter("similar", str, description="rank by embedding cosine similarity to this text; adds `similarity`"),
    OpenApiParameter("relation", str, description="the relation label, exactly"),
    OpenApiParameter("kg", str, description="the name of the KG the case was investigated on"),
    OpenApiParameter("status", str, enum=MemoryEntry.Status.values),
    OpenApiParameter("verdict", str, enum=["correct", "incorrect"]),
    OpenApiParameter("review", str, enum=["awaiting", "done"],
                     description="bootstrapped entries awaiting a curator's review, or the others"),
]))
class MemoryViewSet(viewsets.ReadOnlyModelViewSet):
    """The memory bank of curated investigations: search, see which runs used an entry, review its lesson and
    retire/restore it (reviewer)."""

    queryset = MemoryEntry.objects.all()
    action_roles = {"retire": REVIEWER, "restore": REVIEWER, "review": REVIEWER, "bulk_review": REVIEWER}

    def get_serializer_class(self):
        return s.MemoryEntrySerializer if self.action == "list" else s.MemoryEntryDetailSerializer

    def get_queryset(self):
        if self.action != "list":
            return memory_queryset()
        params = self.request.query_params
        for name, choices in (("status", MemoryEntry.Status.values), ("verdict", ["correct", "incorrect"]),
                              ("review", ["awaiting", "done"])):
            if (value := params.get(name)) and value not in choices:
                raise exceptions.ValidationError({name: [f"one of {', '.join(choices)}"]})
        return memory_entries(status=params.get("status", ""), verdict=params.get("verdict", ""),
                              relation=params.get("relation", "").strip(), kg=params.get("kg", "").strip(),
                              review=params.get("review", ""), text=params.get("q", "").strip(),
                              similar=params.get("similar", "").strip())

    def _set_status(self, new_status: str) -> Response:
        entry = self.get_object()
        form = s.MemoryRetireSerializer(data=self.request.data)
        form.is_valid(raise_exception=True)
        services.set_memory_status(entry=entry, status=new_status, actor=self.request.user,
                                   reason=form.validated_data.get("reason", ""))
        return Response(memory_data(entry))

    @extend_schema(request=s.MemoryRetireSerializer, responses={200: s.MemoryEntryDetailSerializer})
    @action(detail=True, methods=["post"])
    def retire(self, request: Request, pk=None) -> Response:
        """Stop retrieving this entry (kept, and restorable); an optional ``reason`` goes into the provenance of
        an entry that awaited review."""
        return self._set_status(MemoryEntry.Status.RETIRED)

    @extend_schema(request=None, responses={200: s.MemoryEntryDetailSerializer})
    @action(detail=True, methods=["post"])
    def restore(self, request: Request, pk=None) -> Response:
        return self._set_status(MemoryEntry.Status.ACTIVE)

    @extend_schema(request=s.MemoryReviewSerializer, responses={200: s.MemoryEntryDetailSerializer})
    @action(detail=True, methods=["post"])
    def review(self, request: Request, pk=None) -> Response:
        """Keep the entry with its lesson as the curator words it; a bootstrapped entry no longer awaits review."""
        entry = self.get_object()
        form = s.MemoryReviewSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        services.review_memory(entry=entry, actor=request.user, lesson=form.validated_data["lesson"])
        return Response(memory_data(entry))

    @extend_schema(request=s.MemoryBulkReviewSerializer, responses={200: s.MemoryBulkReviewResultSerializer})
    @action(detail=False, methods=["post"], url_path="bulk-review")
    def bulk_review(self, request: Request) -> Response:
        """Keep (with the lessons they have) the given entries that await review, or retire the active ones with
        one reason; each is recorded as its own review. The others are returned in ``skipped`` with why."""
        form = s.MemoryBulkReviewSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        ids = form.validated_data["ids"]
        entries = list(MemoryEntry.objects.filter(pk__in=ids).order_by("pk"))
        missing = sorted(set(ids) - {entry.pk for entry in entries})
        if missing:
            raise exceptions.ValidationError({"ids": [f"no memory entry {', '.join(map(str, missing))}"]})
        review = services.review_memories(entries=entries, actor=request.user, action=form.validated_data["action"],
                                          reason=form.validated_data.get("reason", ""))
        return Response({"done": review.done, "skipped": [{"id": pk, "reason": why} for pk, why in review.skipped.items()]})


# ------------------------------------------------------------------------------------------- evaluations
@extend_schema_view(list=extend_schema(parameters=[
    OpenApiParameter("suite", str, description="the evaluations of one results table"),
    OpenApiParameter("status", str, enum=Evaluation.Status.values),
]))
class EvaluationViewSet(viewsets.ReadOnlyModelViewSet):
    """Evaluations (manage.py evaluate / evaluate_suite, or started here): configuration, sampling and every figure;
    the detail lists each verification with its run. Starting, resuming and stopping one needs the admin role, as
    on the workbench."""

    queryset = Evaluation.objects.select_related("kg")
    write_role = ADMIN

    def get_serializer_class(self):
        return s.EvaluationSerializer if self.action == "list" else s.EvaluationDetailSerializer

    def get_queryset(self):
        evaluations = super().get_queryset().order_by("-created_at", "-id")
        params = self.request.query_params
        if suite := params.get("suite"):
            evaluations = evaluations.filter(suite=suite)
        if value := params.get("status"):
            if value not in Evaluation.Status.values:
                raise exceptions.ValidationError({"status": [f"one of {', '.join(Evaluation.Status.values)}"]})
            evaluations = evaluations.filter(status=value)
        return evaluations

    @extend_schema(request=s.EvaluationStartSerializer,
                   responses={201: s.EvaluationHandedSerializer, 200: s.EvaluationHandedSerializer})
    def create(self, request: Request) -> Response:
        """Draw a dataset benchmark and hand the evaluation to the worker (201, outcome "started"). An evaluation of
        the same parameters is answered with 200: resumed when it had stopped, else as it is (running or finished)."""
        form = s.EvaluationStartSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        try:
            evaluation, outcome = control.start(form.spec(), actor=request.user)
        except ValueError as exc:
            raise exceptions.ValidationError(str(exc)) from None
        return _handed(evaluation, outcome, status.HTTP_201_CREATED if outcome == "started" else status.HTTP_200_OK)

    @extend_schema(request=None, responses={200: s.EvaluationHandedSerializer})
    @action(detail=True, methods=["post"])
    def resume(self, request: Request, pk=None) -> Response:
        """Hand a created or interrupted evaluation back to the worker (409 when it is running or finished)."""
        evaluation = self.get_object()
        if not control.resume(evaluation, actor=request.user):
            raise Conflict(f"evaluation {evaluation.name} is {evaluation.status}: nothing to resume")
        return _handed(evaluation, "resumed")

    @extend_schema(request=None, responses={200: s.EvaluationHandedSerializer})
    @action(detail=True, methods=["post"])
    def stop(self, request: Request, pk=None) -> Response:
        """Stop a running evaluation (outcome "stopped": the runs under way finish and count) or take it back from the
        worker while it waits its turn ("withdrawn"); 409 when it is doing neither."""
        evaluation = self.get_object()
        outcome = control.stop(evaluation, actor=request.user)
        if not outcome:
            raise Conflict(f"evaluation {evaluation.name} is {evaluation.status} and not waiting for the worker: nothing to stop")
        return _handed(evaluation, outcome)


def _handed(evaluation: Evaluation, outcome: str, code: int = status.HTTP_200_OK) -> Response:
    return Response({"outcome": outcome, **s.EvaluationSerializer(evaluation).data}, status=code)


# ------------------------------------------------------------------------------------------------- audit
@extend_schema_view(list=extend_schema(parameters=[
    OpenApiParameter("action", str, description="e.g. review.accept, or a prefix ending in a dot: review."),
    OpenApiParameter("object_type", str, description="e.g. verifier.run"),
    OpenApiParameter("object_id", str), OpenApiParameter("actor", str, description="username or user id"),
]))
class AuditEventViewSet(viewsets.ReadOnlyModelViewSet):
    """Who did what, with before/after values (admins only)."""

    queryset = AuditEvent.objects.select_related("actor")
    serializer_class = s.AuditEventSerializer
    read_role = ADMIN
    write_role = ADMIN

    def get_queryset(self):
        return audit_events(**{name: self.request.query_params.get(name, "").strip()
                               for name in ("action", "actor", "object_type", "object_id")})


# ----------------------------------------------------------------------------------------------- exports
class FileContentNegotiation(BaseContentNegotiation):
    """Export files are not content-negotiated (the format is in the path): any Accept header gets the file,
    and errors are JSON."""

    def select_parser(self, request, parsers):
        return parsers[0]

    def select_renderer(self, request, renderers, format_suffix=None):
        return JSONRenderer(), JSONRenderer.media_type


class ExportView(APIView):
    """``/api/export/<fmt>/?tasks=1,2``, ``?runs=4,5`` and/or ``?claims=6``: a file of the chosen runs (a task stands
    for its latest finished run; a claim for its own record and its parts' runs). ``?inline=1`` shows HTML/PDF in
    the browser instead of downloading."""

    read_role = VIEWER
    content_negotiation_class = FileContentNegotiation

    @extend_schema(
        parameters=[
            OpenApiParameter("fmt", str, OpenApiParameter.PATH, enum=list(exports.FORMATS)),
            OpenApiParameter("tasks", str, description="comma-separated task ids"),
            OpenApiParameter("runs", str, description="comma-separated run ids"),
            OpenApiParameter("claims", str, description="comma-separated claim ids (each with its parts' runs)"),
            OpenApiParameter("inline", bool, description="Content-Disposition inline instead of attachment"),
        ],
        responses={200: OpenApiResponse(OpenApiTypes.BINARY, description="the export file")},
    )
    def get(self, request: Request, fmt: str) -> HttpResponse:
        if fmt not in exports.FORMATS:
            raise exceptions.NotFound(f"unknown export format {fmt!r}; use {', '.join(exports.FORMATS)}")
        params = request.query_params
        selection = select(task_ids=get_ids(params, "tasks"), run_ids=get_ids(params, "runs"),
                           claim_ids=get_ids(params, "claims"))
        return exports.file_response(selection, fmt, base=request.build_absolute_uri("/api/"),
                                     inline=request.query_params.get("inline") in ("1", "true"))


class JSONErrorsMixin:
    """For views whose renderers are not JSON (the schema in YAML, the docs page in HTML): errors still in JSON."""

    def finalize_response(self, request, response, *args, **kwargs):
        if response.status_code >= 400 and isinstance(getattr(response, "data", None), dict) and "error" in response.data:
            request.accepted_renderer, request.accepted_media_type = JSONRenderer(), JSONRenderer.media_type
        return super().finalize_response(request, response, *args, **kwargs)


class SchemaView(JSONErrorsMixin, SpectacularAPIView):
    """The OpenAPI 3 schema (YAML; ``?format=json`` for JSON)."""


class DocsView(JSONErrorsMixin, SpectacularSwaggerSplitView):
    """Swagger UI over the schema, assets served locally by drf-spectacular-sidecar; its start-up script is a file
    of its own (``?script``), not inline, so the page keeps the Content-Security-Policy."""


class NotFoundView(APIView):
    """Any other path under /api/: a 404 in the API's error shape rather than an HTML page."""

    permission_classes: list = []
    authentication_classes: list = []
    schema = None

    def _not_found(self, request: Request, *args, **kwargs):
        raise exceptions.NotFound(f"no API endpoint at {request.path}")

    get = post = put = patch = delete = _not_found

    def options(self, request, *args, **kwargs):
        return self._not_found(request)
