"""Workbench pages: one run (live steps, evidence, review) and one task (its latest run, or a start button).

Reading needs the viewer role; starting, cancelling and commenting the curator role; decisions on a
verdict (accept, override, not enough evidence) the reviewer role.
"""

from __future__ import annotations

from urllib.parse import urlencode

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import path, reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from verifier import confidence, services
from verifier.comparison import NotComparable, compare_runs
from verifier.models import Review, Run, RunMemory, Verdict, VerificationTask
from verifier.quality import described
from verifier.queue_filters import EVALUATION_SOURCE_PREFIX
from verifier.roles import CURATOR, REVIEWER, VIEWER, has_role, role_required
from verifier.selectors import answers_shown, in_kg, stated_by_kg
from verifier.web.forms import RunStartForm, run_config, run_kinds
from verifier.web.run_assessment import run_assessment
from verifier.web.run_evidence import next_to_review, queue_neighbours, review_state, support_subgraph
from verifier.web.run_state import run_state, run_state_json
from verifier.web.structure import status_context

UNDO_SESSION_KEY = "kgv_undo_review"
DECISIONS_NEEDING_REVIEWER = {Review.Decision.ACCEPT, Review.Decision.OVERRIDE, Review.Decision.NOT_ENOUGH_EVIDENCE}


def _with_queue(url: str, queue: str) -> str:
    return f"{url}?{urlencode({'queue': queue})}" if queue else url


def _promote_url(run: Run) -> str:
    return reverse("run-promote", args=[run.pk])


def _marked_repeats(steps: list) -> list:
    """Each step that repeats an earlier one word for word (a loop) gets ``repeat_of``, that step's number:
    the page folds it to one line."""
    first: dict[tuple, int] = {}
    for step in steps:
        step.repeat_of = first.setdefault((step.kind, step.tool, step.content), step.seq)
        if step.repeat_of == step.seq:
            step.repeat_of = None
    return steps


def _run_context(request: HttpRequest, run: Run) -> dict:
    queue = request.GET.get("queue", request.POST.get("queue", ""))
    steps = _marked_repeats(list(run.steps.order_by("seq")))
    items = list(run.support_items.select_related("step").order_by("id"))
    reviews = list(run.reviews.select_related("reviewer"))
    previous_id, next_id = queue_neighbours(run.task, queue, request.user)
    overridden_to = Verdict.overridden(run.verdict)
    return {
        "run": run,
        "task": run.task,
        "in_kg": in_kg(run.task.kg, run.stated),
        "answer_shown": bool(answers_shown(request.user, [run.task])),
        "live": not run.is_finished,
        "steps": steps,
        "last_seq": steps[-1].seq if steps else 0,
        "cited_items": [item for item in items if item.cited],
        "items": items,
        "memories": list(RunMemory.objects.filter(run=run).select_related("entry").order_by("rank")),
        "reviews": reviews,
        "review": review_state(reviews),
        "elapsed_seconds": run.elapsed_seconds,
        "can_curate": has_role(request.user, CURATOR),
        "can_review": has_role(request.user, REVIEWER),
        "reviewable": run.is_reviewable,
        "override_to": Verdict(overridden_to).label if overridden_to else "",
        "verdict_choices": [(Verdict.CORRECT.value, Verdict.CORRECT.label), (Verdict.INCORRECT.value, Verdict.INCORRECT.label)],
        "queue": queue,
        "run_kinds": run_kinds([run.task.kg_id]),
        "previous_url": _with_queue(reverse("task-detail", args=[previous_id]), queue) if previous_id else "",
        "next_url": _with_queue(reverse("task-detail", args=[next_id]), queue) if next_id else "",
        "promote_url": _promote_url(run),
        "promotable": any(r.verdict for r in reviews) and not run.task.source.startswith(EVALUATION_SOURCE_PREFIX),
        "undo_review": undoable_review(request),
        "other_runs": list(run.task.runs.exclude(pk=run.pk).order_by("-created_at", "-id")[:10]),
        "assessment": run_assessment(run, frozenset(item.key for item in items if item.cited)),
        "signals": described(run.signals),
        "state": run_state(run),
        **status_context([run.task.kg_id]),
    }


def _get_run(run_id: int) -> Run:
    return get_object_or_404(Run.objects.select_related("task__kg", "task__head", "task__relation", "task__tail")
                             .annotate(stated=stated_by_kg("task__")), pk=run_id)


@require_GET
@role_required(VIEWER)
def run_detail(request: HttpRequest, run_id: int) -> HttpResponse:
    run = _get_run(run_id)
    return render(request, "verifier/run_detail.html", _run_context(request, run))


@require_GET
@role_required(VIEWER)
def run_sections(request: HttpRequest, run_id: int) -> HttpResponse:
    """The parts of the run page an ended run settles (confidence, signals, assessment, evidence, review), as the
    page renders them: static/kgv/run.js swaps them in when the run ends."""
    run = _get_run(run_id)
    return render(request, "verifier/run_sections.html", _run_context(request, run))


@require_GET
@role_required(VIEWER)
def run_graph(request: HttpRequest, run_id: int) -> JsonResponse:
    """The support subgraph of a run, for the page's graph (static/kgv/dist/graph.js)."""
    return JsonResponse(support_subgraph(_get_run(run_id)))


@require_GET
@role_required(VIEWER)
def run_compare(request: HttpRequest, run_id: int, other_id: int) -> HttpResponse:
    """Two runs of one task side by side, the older on the left, whichever order the URL names them in."""
    runs = sorted([_get_run(run_id), _get_run(other_id)], key=lambda run: (run.created_at, run.pk))
    try:
        comparison = compare_runs(*runs)
    except NotComparable as exc:
        return render(request, "verifier/run_compare.html", {"error": str(exc), "task": runs[1].task}, status=400)
    return render(request, "verifier/run_compare.html", {"comparison": comparison, "task": runs[1].task,
                                                         "before": runs[0], "after": runs[1]})


@require_POST
@role_required(CURATOR)
def run_cancel(request: HttpRequest, run_id: int) -> HttpResponse:
    run = _get_run(run_id)
    if services.cancel_run(run=run, actor=request.user):
        messages.success(request, f"Run {run.pk} was cancelled; its worker stores no further step.")
    else:
        messages.error(request, f"Run {run.pk} had already ended ({run.get_status_display().lower()}); nothing to cancel.")
    return redirect(_with_queue(reverse("run-detail", args=[run.pk]), request.POST.get("queue", "")))


@require_POST
@role_required(CURATOR)
def run_review(request: HttpRequest, run_id: int) -> HttpResponse:
    """Record a decision or a comment; a rejected review re-renders the page with the reason and the text
    the reviewer typed, and stores nothing."""
    run = _get_run(run_id)
    decision = request.POST.get("decision", "")
    if decision in DECISIONS_NEEDING_REVIEWER and not has_role(request.user, REVIEWER):
        raise PermissionDenied("deciding on a verdict needs the reviewer role")
    queue = request.POST.get("queue", "")
    # The next task awaiting review in the view as the reviewer saw it: a decision may take this task out of the view
    # (a queue of verified tasks no longer holds it once reviewed), and then it has no place to count from.
    next_id = next_to_review(run.task, queue, request.user)
    try:
        review = services.review_run(run=run, reviewer=request.user, decision=decision, reason=request.POST.get("reason", ""),
                            verdict=request.POST.get("verdict", ""))
    except services.ReviewRejected as rejected:
        context = _run_context(request, run)
        context.update(review_error=str(rejected), review_reason=request.POST.get("reason", ""), review_decision=decision)
        return render(request, "verifier/run_detail.html", context, status=400)
    label = dict(Review.Decision.choices)[decision]
    request.session[UNDO_SESSION_KEY] = review.pk
    if decision != Review.Decision.COMMENT and request.POST.get("advance"):
        if next_id:
            messages.success(request, f"{label} recorded for run {run.pk}; this is the next task awaiting review.")
            return redirect(_with_queue(reverse("task-detail", args=[next_id]), queue))
        messages.success(request, f"{label} recorded for run {run.pk}; no other task of this view awaits review.")
        return redirect(_with_queue(reverse("run-detail", args=[run.pk]), queue))
    messages.success(request, f"{label} recorded for run {run.pk}.")
    return redirect(_with_queue(reverse("run-detail", args=[run.pk]), queue))


def undoable_review(request: HttpRequest) -> Review | None:
    """The decision the user recorded last in this session, while it can still be undone."""
    pk = request.session.get(UNDO_SESSION_KEY)
    review = Review.objects.select_related("run").filter(pk=pk, reviewer_id=request.user.pk).first() if pk else None
    if review is None or (timezone.now() - review.created_at).total_seconds() > services.UNDO_SECONDS:
        return None
    return review


@require_POST
@role_required(CURATOR)
def review_undo(request: HttpRequest, review_id: int) -> HttpResponse:
    review = get_object_or_404(Review.objects.select_related("run"), pk=review_id)
    run_id = review.run_id
    try:
        services.undo_review(review=review, actor=request.user)
    except services.ReviewRejected as rejected:
        messages.error(request, f"Nothing undone: {rejected}.")
    else:
        request.session.pop(UNDO_SESSION_KEY, None)
        messages.success(request, f"Undid the {review.get_decision_display().lower()} on run {run_id}.")
    return redirect(_with_queue(reverse("run-detail", args=[run_id]), request.POST.get("queue", "")))


@require_http_methods(["GET", "POST"])
@role_required(VIEWER)
def task_detail(request: HttpRequest, task_id: int) -> HttpResponse:
    """GET: the task's latest run, or the task with a start button. POST (curator): start a run."""
    task = get_object_or_404(VerificationTask.objects.select_related("kg", "head", "relation", "tail"), pk=task_id)
    queue = request.GET.get("queue", request.POST.get("queue", ""))
    if request.method == "POST":
        if not has_role(request.user, CURATOR):
            raise PermissionDenied("starting a run needs the curator role")
        form = RunStartForm(request.POST)
        if not form.is_valid():
            messages.error(request, f"No new run: {form.errors['kind'][0]}")
            return redirect(_with_queue(reverse("task-detail", args=[task.pk]), queue))
        try:
            run = services.start_run(task=task, config=run_config(form.cleaned_data["kind"]), actor=request.user)
        except services.TaskBusy as exc:
            messages.warning(request, f"No new run: {exc}.")
            latest = task.runs.order_by("-created_at", "-id").first()
            return redirect(_with_queue(reverse("run-detail", args=[latest.pk]), queue))
        except confidence.Unweighed as exc:
            messages.error(request, f"No new run: {exc}.")
            return redirect(_with_queue(reverse("task-detail", args=[task.pk]), queue))
        # tagged: the page drops it once the run has started (static/kgv/run.js)
        messages.success(request, f"Run {run.pk} queued; its steps appear here as a worker takes them.", extra_tags="run-queued")
        return redirect(_with_queue(reverse("run-detail", args=[run.pk]), queue))
    latest = task.runs.order_by("-created_at", "-id").first()
    if latest is not None:
        return redirect(_with_queue(reverse("run-detail", args=[latest.pk]), queue))
    previous_id, next_id = queue_neighbours(task, queue, request.user)
    return render(request, "verifier/task_detail.html", {
        "task": task,
        "answer_shown": bool(answers_shown(request.user, [task])),
        "undo_review": undoable_review(request),
        "queue": queue,
        "run_kinds": run_kinds([task.kg_id]),
        "can_curate": has_role(request.user, CURATOR),
        "previous_url": _with_queue(reverse("task-detail", args=[previous_id]), queue) if previous_id else "",
        "next_url": _with_queue(reverse("task-detail", args=[next_id]), queue) if next_id else "",
    })


urlpatterns = [
    path("runs/<int:run_id>/", run_detail, name="run-detail"),
    path("runs/<int:run_id>/compare/<int:other_id>/", run_compare, name="run-compare"),
    path("runs/<int:run_id>/sections/", run_sections, name="run-sections"),
    path("runs/<int:run_id>/graph.json", run_graph, name="run-graph"),
    path("runs/<int:run_id>/state.json", run_state_json, name="run-state"),
    path("runs/<int:run_id>/cancel/", run_cancel, name="run-cancel"),
    path("runs/<int:run_id>/review/", run_review, name="run-review"),
    path("reviews/<int:review_id>/undo/", review_undo, name="review-undo"),
    path("tasks/<int:task_id>/", task_detail, name="task-detail"),
]
