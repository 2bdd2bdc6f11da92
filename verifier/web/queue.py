"""Workbench pages: the queue of flagged triples (the home page), its bulk actions and live rows, importing
flagged triples from a file, and the audit log.

Reading needs the viewer role (exporting too); running, assigning and importing the curator role; the
audit log the admin role. Filtering, search and sort are ``verifier.queue_filters.filter_tasks``, the same
function the API uses, so a filtered queue means the same thing on every door.
"""

from __future__ import annotations

import secrets
import shutil
import time
from pathlib import Path
from urllib.parse import urlencode

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.db.models import Count
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest
from django.shortcuts import redirect, render
from django.urls import path, reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from verifier import confidence, exports, services
from verifier.errors import listed
from verifier.exports.records import SelectionError, select
from verifier.kg.flagged import preview
from verifier.kg.loader import ImportRejected
from verifier.models import Agreement, AuditEvent, ClaimPart, KnowledgeGraph, Relation, Run, Verdict, VerificationTask
from verifier.params import ParameterError, get_ids, get_int, is_id
from verifier.quality import SIGNALS, described
from verifier.queue_filters import (
    FILTER_PARAMS,
    ORIGIN_VALUES,
    QueueFilterError,
    annotate_latest,
    by_origin,
    filter_tasks,
)
from verifier.roles import ADMIN, CURATOR, REVIEWER, VIEWER, has_role, role_required
from verifier.selectors import answers_shown, audit_events, run_pace, tasks_in_flight
from verifier.uploads import save_upload, uploaded_file
from verifier.web.forms import BulkActionForm, TaskImportForm, assignable_users, run_config, run_kinds
from verifier.web.links import run_url, task_url
from verifier.web.saved_views import saved_views, view_query
from verifier.web.structure import status_context

PAGE_SIZES = (25, 50, 100, 200)
DEFAULT_PAGE_SIZE = 50
SORT_CHOICES = (("-created", "Newest first"), ("created", "Oldest first"), ("-confidence", "Most confident"),
                ("confidence", "Least confident"), ("status", "Status"), ("relation", "Relation A→Z"),
                ("-relation", "Relation Z→A"), ("-updated", "Recently changed"))
# ``disputed`` is about the structural evidence, not the reviewers (whose disagreement is the Review filter's "reviewers
# disagree"): the filter is named for what it does.
DISPUTED_CHOICES = (("true", "disputes the verdict"), ("false", "does not dispute it"))
ORIGIN_CHOICES = (("work", "Work queue"), ("evaluation", "Evaluations"), ("all", "All tasks"))
# The filters folded under "More filters": a newcomer meets the search, status, verdict and sort; these open by
# themselves once one is in use.
MORE_FILTERS = ("kg", "relation", "agreement", "disputed", "origin", "source", "claim", "kg_audit", "signal",
                "confidence_min", "confidence_max", "assignee")


def _page_size(request: HttpRequest) -> int:
    return get_int(request.GET, "per_page", DEFAULT_PAGE_SIZE, allowed=PAGE_SIZES)


def queue_context_param(request: HttpRequest) -> str:
    """The queue's filters as the run page's ``queue`` parameter (previous/next follow the same list).
    "Assigned to me" becomes the user's id, so the run page needs no user to read it."""
    params = request.GET.copy()
    for name in list(params):
        if name not in FILTER_PARAMS:
            params.pop(name)
    if params.get("assignee") == "me":
        params["assignee"] = str(request.user.pk)
    return params.urlencode()


def _filter_choices(in_view) -> dict:
    """What the filters offer: the graphs and relations of the tasks in view (the work queue's, the evaluations'
    or all), the relations by graph."""
    relations = Relation.objects.filter(pk__in=in_view.values("relation_id")).select_related("kg")
    return {
        "statuses": VerificationTask.Status.choices,
        "kgs": list(KnowledgeGraph.objects.filter(pk__in=in_view.values("kg_id")).order_by("name")),
        "relations": list(relations.order_by("kg__name", "label", "external_id")),
        "verdicts": [*Verdict.choices, ("none", "No verdict yet")],
        "agreements": Agreement.choices,
        "disputed_choices": DISPUTED_CHOICES,
        "origins": ORIGIN_CHOICES,
        "signal_choices": [("any", "Any warning"), ("none", "No warning"),
                           *((code, f"⚠ {signal.label}") for code, signal in SIGNALS.items())],
        "assignees": list(assignable_users()),
        "sorts": SORT_CHOICES,
        "page_sizes": PAGE_SIZES,
        "export_formats": list(exports.FORMATS.values()),
    }


def _rows(tasks, queue_param: str, user) -> list[VerificationTask]:
    """Each task with the links its row shows; the task and run links carry the queue's filters along, so a
    review opened from either advances through this view. A row shows its gold label and source only to those who
    may see them (``answers_shown``)."""
    rows = list(tasks)
    shown = answers_shown(user, rows)
    suffix = f"?{urlencode({'queue': queue_param})}" if queue_param else ""
    verdict_labels = dict(Verdict.choices)
    claims: dict[int, list[int]] = {}
    for task_id, claim_id in ClaimPart.objects.filter(task_id__in=[t.pk for t in rows]).order_by(
            "claim_id").values_list("task_id", "claim_id").distinct():
        claims.setdefault(task_id, []).append(claim_id)
    for task in rows:
        task.claims = claims.get(task.pk, [])  # the claims in plain language it is a part of
        task.verdict_label = verdict_labels.get(task.verdict, "")
        task.href = task_url(task.pk) + suffix
        task.run_href = run_url(task.latest_run_id) + suffix if task.latest_run_id else ""
        task.live = task.latest_run_status in Run.IN_FLIGHT
        task.signal_list = described(task.signals)
        task.answer_shown = task.pk in shown
    return rows


@require_GET
@role_required(VIEWER)
def queue_page(request: HttpRequest) -> HttpResponse:
    """The flagged triples, filtered, searched, sorted and paginated; the filters live in the URL."""
    origin = request.GET.get("origin") if request.GET.get("origin") in ORIGIN_VALUES else "work"
    in_view = by_origin(VerificationTask.objects.all(), origin)
    status_counts = dict(in_view.values_list("status").annotate(n=Count("id")).values_list("status", "n"))
    context = {
        **_filter_choices(in_view),
        "params": request.GET,
        "selected_statuses": [value for item in request.GET.getlist("status") for value in item.split(",")],
        "status_tabs": [(value, label, status_counts.get(value, 0)) for value, label in VerificationTask.Status.choices],
        "sort": request.GET.get("sort") or "-created",
        "total_count": sum(status_counts.values()),
        "mine_count": in_view.filter(assignee=request.user).count(),
        "origin": origin,
        "can_curate": has_role(request.user, CURATOR),
        "can_review": has_role(request.user, REVIEWER),
        "per_page": DEFAULT_PAGE_SIZE,
        "queue_param": queue_context_param(request),
        "filtered": any(request.GET.get(name) for name in FILTER_PARAMS if name != "sort"),
        "more_filters_set": any(request.GET.get(name) for name in MORE_FILTERS),
        "saved_views": saved_views(request.user),
        "pace": run_pace(),
        "evidence_pace": run_pace("evidence"),
        "max_bulk": services.MAX_BULK,
        "run_kinds": run_kinds(in_view.order_by().values_list("kg_id", flat=True).distinct()),
        "view_query": view_query(request.GET),
        **status_context(),
    }
    context["show_graph"] = len(context["kgs"]) > 1
    context["rows_url"] = _rows_url(context["queue_param"], context["show_graph"])
    try:
        context["per_page"] = _page_size(request)
        tasks = filter_tasks(VerificationTask.objects.all(), request.GET, user=request.user)
        page = Paginator(tasks, context["per_page"]).get_page(request.GET.get("page"))
        page.object_list = _rows(page.object_list, context["queue_param"], request.user)
    except QueueFilterError as error:
        return render(request, "verifier/queue.html", {**context, "filter_error": error, "page": None}, status=400)
    return render(request, "verifier/queue.html", {**context, "page": page})


@require_GET
@role_required(VIEWER)
def queue_rows(request: HttpRequest) -> HttpResponse:
    """The rows ``?tasks=1,2,3`` of the queue table as the page renders them (templates/verifier/queue_row.html):
    static/kgv/queue.js swaps them in while their runs are queued or running. ``queue`` is the view's filters the
    rows' links carry (the page's ``queue_param``); ``graph=1`` when the table has a Graph column."""
    try:
        ids = get_ids(request.GET, "tasks")
    except ParameterError as error:  # said in words to whoever asked, as the pages do; a script only skips the answer
        return HttpResponseBadRequest(f"{error}\n", content_type="text/plain; charset=utf-8")
    tasks = annotate_latest(VerificationTask.objects.filter(pk__in=ids))
    tasks = tasks.select_related("kg", "head", "relation", "tail", "assignee").order_by("pk")
    return render(request, "verifier/queue_rows.html", {
        "rows": _rows(tasks, request.GET.get("queue", ""), request.user),
        "show_graph": request.GET.get("graph") == "1",
    })


def _rows_url(queue_param: str, show_graph: bool) -> str:
    """Where the page asks for its live rows again (queue_rows), for the view it shows."""
    return f"{reverse('queue-rows')}?{urlencode({'queue': queue_param, 'graph': '1' if show_graph else ''})}"


def _back_to_queue(request: HttpRequest) -> HttpResponse:
    """Back to the queue as the curator left it (filters, sort and page)."""
    query = request.POST.get("return_query", "")
    return redirect(f"{reverse('queue')}?{query}" if query else reverse("queue"))


def _run_selected(request: HttpRequest, tasks, kind: str) -> None:
    busy = tasks_in_flight(tasks)
    config = run_config(kind)
    try:
        started = services.start_runs(tasks=[task for task in tasks if task.pk not in busy], config=config, actor=request.user)
    except confidence.Unweighed as exc:
        messages.error(request, f"No run started: {exc}.")
        return
    if started:
        what = "run(s)" if kind == "agent" else "run(s) weighing the evidence only"
        messages.success(request, f"{len(started)} {what} queued; each row shows its status as a worker takes it.")
    if busy:
        messages.warning(request, f"{len(busy)} task(s) already had a run queued or running and were left alone.")


def _assign(request: HttpRequest, tasks, assignee) -> None:
    changed = services.assign_tasks(tasks=VerificationTask.objects.filter(pk__in=[t.pk for t in tasks]),
                                    assignee=assignee, actor=request.user)
    who = assignee.get_username() if assignee else "nobody"
    unchanged = len(tasks) - changed
    suffix = f" ({unchanged} already were)" if unchanged else ""
    messages.success(request, f"{changed} task(s) assigned to {who}{suffix}.")


def _export_selected(request: HttpRequest, tasks, fmt: str) -> HttpResponse:
    """The ticked tasks' file as a download, answered to the form's POST (a URL of a thousand ids is too long for
    some proxies); what cannot be exported is said on the queue instead."""
    try:
        return exports.file_response(select(task_ids=[task.pk for task in tasks]), fmt,
                                     base=request.build_absolute_uri("/api/"))
    except SelectionError as exc:
        messages.error(request, f"Nothing exported: {exc}.")
        return _back_to_queue(request)


def _accept_selected(request: HttpRequest, tasks) -> None:
    reviews, left = services.accept_verdicts(tasks=tasks, reviewer=request.user)
    if reviews:
        messages.success(request, f"{len(reviews)} verdict(s) accepted.")
    if left:
        messages.warning(request, f"{left} task(s) had no finished verdict or were already reviewed and were left alone.")


@require_POST
@role_required(VIEWER)
def bulk_action(request: HttpRequest) -> HttpResponse:
    """Run, assign, accept or export the ticked tasks. Exporting is reading (viewer); accepting the verdicts needs
    a reviewer; the rest a curator."""
    form = BulkActionForm(request.POST, user=request.user)
    if not form.is_valid():
        for errors in form.errors.values():
            for error in errors:
                messages.error(request, error)
        return _back_to_queue(request)
    action, tasks = form.cleaned_data["action"], list(form.cleaned_data["tasks"].order_by("pk"))
    if action == "export":
        return _export_selected(request, tasks, form.cleaned_data["fmt"])
    needed = REVIEWER if action == "accept" else CURATOR
    if not has_role(request.user, needed):
        raise PermissionDenied(f"{dict(BulkActionForm.ACTIONS)[action].lower()} needs the {needed} role")
    if action == "accept":
        _accept_selected(request, tasks)
    elif action == "run":
        _run_selected(request, tasks, form.cleaned_data["kind"])
    else:
        _assign(request, tasks, form.cleaned_data["assignee"])
    return _back_to_queue(request)


def _import_file(form: TaskImportForm, actor) -> services.TaskImportReport:
    with uploaded_file(form.cleaned_data["file"]) as path:
        return services.import_flagged_triples(kg=form.cleaned_data["kg"], path=path, actor=actor)


PREVIEW_SESSION_KEY = "kgv_import_preview"
PREVIEW_MAX_AGE_SECONDS = 24 * 3600


def _previews_dir() -> Path:
    return Path(settings.KGV_CACHE_DIR) / "import-previews"


def _keep_for_confirmation(request: HttpRequest, form: TaskImportForm) -> Path:
    """Keep a previewed upload until the curator confirms it (this session only); older ones are removed."""
    root = _previews_dir()
    root.mkdir(parents=True, exist_ok=True)
    for old in root.iterdir():
        if time.time() - old.stat().st_mtime > PREVIEW_MAX_AGE_SECONDS:
            shutil.rmtree(old, ignore_errors=True)
    token = secrets.token_hex(16)
    (root / token).mkdir()
    path = save_upload(form.cleaned_data["file"], root / token)
    request.session[PREVIEW_SESSION_KEY] = {"token": token, "kg": form.cleaned_data["kg"].pk, "name": path.name,
                                            "then": form.cleaned_data["then"]}
    return path


def _confirm_preview(request: HttpRequest) -> HttpResponse:
    """Queue the file previewed in this session."""
    kept = request.session.get(PREVIEW_SESSION_KEY) or {}
    folder = _previews_dir() / str(kept.get("token", ""))
    path = folder / str(kept.get("name", ""))
    if not kept or kept.get("token") != request.POST.get("confirm") or not path.is_file():
        messages.error(request, "That preview is no longer available (confirmed already, or too old): upload the file again.")
        return redirect(reverse("queue-import"))
    kg = KnowledgeGraph.objects.filter(pk=kept["kg"]).first()
    if kg is None:
        shutil.rmtree(folder, ignore_errors=True)
        messages.error(request, "The knowledge graph of that preview is gone; nothing was queued.")
        return redirect(reverse("queue-import"))
    try:
        report = services.import_flagged_triples(kg=kg, path=path, actor=request.user)
    except ImportRejected as rejected:
        messages.error(request, f"{path.name} was not imported: {len(rejected.problems)} bad row(s).")
        return redirect(reverse("queue-import"))
    finally:
        request.session.pop(PREVIEW_SESSION_KEY, None)
        shutil.rmtree(folder, ignore_errors=True)
    return _imported(request, kg, report, kept.get("then", ""))


def _imported(request: HttpRequest, kg: KnowledgeGraph, report: services.TaskImportReport, then: str) -> HttpResponse:
    messages.success(request, f"{report.created} triple(s) queued on {kg.name} from {report.lines} row(s)"
                              + (f"; {report.already_queued} were already queued." if report.already_queued else ".")
                              + (f" {report.stated} of them are facts the KG states." if report.stated else ""))
    if then:
        _run_imported(request, report.task_ids, then)
    return redirect(f"{reverse('queue')}?{urlencode({'kg': kg.pk})}")


def _run_imported(request: HttpRequest, task_ids: list[int], kind: str) -> None:
    """Start the run the curator chose at import (``RUN_KINDS``) on each triple queued now that has none yet (one
    an evaluation verified keeps its run), at most MAX_BULK of them."""
    tasks = list(VerificationTask.objects.filter(pk__in=task_ids, runs__isnull=True).order_by("pk"))
    if len(tasks) > services.MAX_BULK:
        messages.warning(request, f"Runs were started for the first {services.MAX_BULK:,} of the {len(tasks):,} triples; the "
                                  "queue's bulk run (tick the page, then all of the view) starts the rest.")
    _run_selected(request, tasks[:services.MAX_BULK], kind)


def _graph_summaries() -> list[KnowledgeGraph]:
    """The loaded graphs with their sizes and their work queues (the triples evaluations drew are not work); a
    handful of graphs, so one indexed count each beats a join."""
    graphs = list(KnowledgeGraph.objects.order_by("name"))
    for graph in graphs:
        graph.entity_count = graph.entities.count()
        graph.triple_count = graph.triples.count()
        graph.task_count = by_origin(graph.tasks.all()).count()
    return graphs


@require_http_methods(["GET", "POST"])
@role_required(CURATOR)
def import_tasks(request: HttpRequest) -> HttpResponse:
    """Queue flagged triples from a CSV/TSV file. All or nothing: a file with any bad row is rejected with
    every bad row listed, and nothing is queued."""
    if request.method == "POST" and request.POST.get("confirm"):
        return _confirm_preview(request)
    form = TaskImportForm(request.POST or None, request.FILES or None)
    context = {"form": form, "problems": [], "graphs": _graph_summaries()}
    if request.method == "POST" and form.is_valid() and request.POST.get("step") == "preview":
        path = _keep_for_confirmation(request, form)
        context["preview"] = preview(form.cleaned_data["kg"], path)
        context["preview_problems"] = listed(context["preview"].problems)
        context["preview_kg"] = form.cleaned_data["kg"]
        context["preview_name"] = path.name
        context["preview_token"] = request.session[PREVIEW_SESSION_KEY]["token"]
        context["preview_then"] = form.cleaned_data["then"]
        return render(request, "verifier/queue_import.html", context)
    if request.method == "POST" and form.is_valid():
        try:
            report = _import_file(form, request.user)
        except ImportRejected as rejected:
            context["problems"], context["problem_count"] = listed(rejected.problems), len(rejected.problems)
            context["rejected_name"] = form.cleaned_data["file"].name
            return render(request, "verifier/queue_import.html", context, status=400)
        return _imported(request, form.cleaned_data["kg"], report, form.cleaned_data["then"])
    status = 400 if request.method == "POST" else 200
    return render(request, "verifier/queue_import.html", context, status=status)


def _audit_object_href(event: AuditEvent) -> str:
    """The page of the object an audit event is about, when it has one."""
    if not is_id(event.object_id):
        return ""
    pk = int(event.object_id)
    if event.object_type == "verifier.run":
        return run_url(pk)
    if event.object_type == "verifier.verificationtask":
        return task_url(pk)
    if event.object_type == "verifier.memoryentry":
        return reverse("memory-detail", args=[pk])
    return ""


@require_GET
@role_required(ADMIN)
def audit_log(request: HttpRequest) -> HttpResponse:
    """Who did what, newest first, with the values before and after; filter by action, user and object."""
    events = audit_events(**{name: request.GET.get(name, "").strip() for name in ("action", "actor", "object_type", "object_id")})
    page = Paginator(events, 100).get_page(request.GET.get("page"))
    page.object_list = list(page.object_list)
    for event in page.object_list:
        event.href = _audit_object_href(event)
    return render(request, "verifier/audit.html", {
        "page": page,
        "actions": AuditEvent.objects.order_by("action").values_list("action", flat=True).distinct(),
        "object_types": AuditEvent.objects.order_by("object_type").values_list("object_type", flat=True).distinct(),
        "actors": get_user_model().objects.filter(auditevent__isnull=False).distinct().order_by("username"),
        "params": request.GET,
    })


urlpatterns = [
    path("", queue_page, name="queue"),
    path("", queue_page, name="home"),  # the site root is the queue
    path("queue/rows/", queue_rows, name="queue-rows"),
    path("queue/bulk/", bulk_action, name="queue-bulk"),
    path("import/", import_tasks, name="queue-import"),
    path("audit/", audit_log, name="audit-log"),
]
