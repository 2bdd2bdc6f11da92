"""Workbench pages: the memory bank (list, text and similarity search, one entry with the runs it guided),
retiring and restoring entries, and promoting a run into the bank with an edited trajectory.

Reading needs the viewer role; promoting, reviewing, retiring and restoring the reviewer role. A promoted entry is
embedded as it is saved, so the next run retrieves it.
"""

from __future__ import annotations

from django.contrib import messages
from django.core.paginator import Paginator
from django.db.models import Count
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import path, reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from verifier import services
from verifier.memory import bank
from verifier.models import MemoryEntry, Run, RunMemory, Verdict
from verifier.roles import REVIEWER, VIEWER, has_role, role_required
from verifier.selectors import MEMORY_SEARCH_MODES, MEMORY_STATUSES, memory_view
from verifier.web.forms import MemoryBulkForm, MemoryReviewForm, PromoteForm
from verifier.web.links import run_url, task_url

PAGE_SIZE = 50
SEARCH_MODES = tuple(zip(MEMORY_SEARCH_MODES, ("Text", "Similar meaning"), strict=True))
STATUS_TABS = tuple(zip(MEMORY_STATUSES, ("Active", "Retired", "All"), strict=True))
REVIEW_FILTERS = (("awaiting", "awaiting review"), ("done", "reviewed or curated"))
USES_SHOWN = 200
CLOSEST_SHOWN = 3


@require_GET
@role_required(VIEWER)
def memory_list(request: HttpRequest) -> HttpResponse:
    view = memory_view(request.GET)
    status, mode, text = view.status, view.mode, view.text
    page = Paginator(view.entries, PAGE_SIZE).get_page(request.GET.get("page"))
    counts = dict(MemoryEntry.objects.values_list("status").annotate(n=Count("id")).values_list("status", "n"))
    return render(request, "verifier/memory_list.html", {
        "page": page,
        "params": request.GET,
        "status": status,
        "status_tabs": [(value, label, counts.get(value, 0) if value != "all" else sum(counts.values()))
                        for value, label in STATUS_TABS],
        "mode": mode,
        "modes": SEARCH_MODES,
        "q": text,
        "verdicts": Verdict.choices,
        "review_filters": REVIEW_FILTERS,
        "relations": MemoryEntry.objects.exclude(relation_label="").order_by("relation_label")
                                        .values_list("relation_label", flat=True).distinct(),
        "graphs": MemoryEntry.objects.exclude(kg_name="").order_by("kg_name").values_list("kg_name", flat=True).distinct(),
        "can_review": has_role(request.user, REVIEWER),
        "bulk_actions": services.MEMORY_BULK_ACTIONS,
        "reason_chars": services.REASON_CHARS,
        "max_bulk": services.MAX_BULK,
    })


@require_GET
@role_required(VIEWER)
def memory_detail(request: HttpRequest, entry_id: int) -> HttpResponse:
    """One entry, where it came from, its lesson, and every run it guided (newest first) at the similarity it
    was retrieved at."""
    entry = get_object_or_404(MemoryEntry.objects.select_related("source_run", "promoted_by", "kg"), pk=entry_id)
    return _memory_page(request, entry, MemoryReviewForm(initial={"lesson": entry.lesson}))


def _memory_page(request: HttpRequest, entry: MemoryEntry, form: MemoryReviewForm, error: str = "",
                 status: int = 200) -> HttpResponse:
    uses = (RunMemory.objects.filter(entry=entry)
            .select_related("run__task__head", "run__task__relation", "run__task__tail")
            .order_by("-run__created_at", "-run_id"))
    shown = list(uses[:USES_SHOWN])
    for use in shown:
        use.run_href = run_url(use.run_id)
    return render(request, "verifier/memory_detail.html", {
        "entry": entry,
        "uses": shown,
        "use_count": uses.count(),
        "source_run_href": run_url(entry.source_run_id) if entry.source_run_id else "",
        "can_review": has_role(request.user, REVIEWER),
        "review_form": form,
        "review_error": error,
        "reason_chars": services.REASON_CHARS,
    }, status=status)


@require_POST
@role_required(REVIEWER)
def memory_review(request: HttpRequest, entry_id: int) -> HttpResponse:
    """Keep an entry with its lesson as the reviewer words it (a bootstrapped entry then no longer awaits review)."""
    entry = get_object_or_404(MemoryEntry.objects.select_related("source_run", "promoted_by", "kg"), pk=entry_id)
    form = MemoryReviewForm(request.POST)
    if form.is_valid():
        try:
            services.review_memory(entry=entry, actor=request.user, lesson=form.cleaned_data["lesson"])
        except services.ReviewRejected as rejected:
            return _memory_page(request, entry, form, str(rejected), status=400)
        messages.success(request, f"Memory {entry.pk} reviewed: later runs are shown its lesson as you worded it.")
        return redirect(reverse("memory-detail", args=[entry.pk]))
    return _memory_page(request, entry, form, status=400)


@require_POST
@role_required(REVIEWER)
def memory_status(request: HttpRequest, entry_id: int) -> HttpResponse:
    """Retire (never retrieved again; ``reason`` says why) or restore an entry."""
    entry = get_object_or_404(MemoryEntry, pk=entry_id)
    status = request.POST.get("status", "")
    if status not in MemoryEntry.Status.values:
        return HttpResponseBadRequest(f"status must be one of {', '.join(MemoryEntry.Status.values)}")
    try:
        services.set_memory_status(entry=entry, status=status, actor=request.user, reason=request.POST.get("reason", ""))
    except services.ReviewRejected as rejected:
        messages.error(request, f"Memory {entry.pk} unchanged: {rejected}.")
        return redirect(reverse("memory-detail", args=[entry.pk]))
    if status == MemoryEntry.Status.RETIRED:
        messages.success(request, f"Memory {entry.pk} retired: later runs no longer retrieve it.")
    else:
        messages.success(request, f"Memory {entry.pk} restored: later runs can retrieve it again.")
    return redirect(reverse("memory-detail", args=[entry.pk]))


@require_POST
@role_required(REVIEWER)
def memory_bulk(request: HttpRequest) -> HttpResponse:
    """Keep (with their lessons) or retire the ticked entries; back to the list as the reviewer left it."""
    query = request.POST.get("return_query", "")
    back = redirect(f"{reverse('memory-list')}?{query}" if query else reverse("memory-list"))
    form = MemoryBulkForm(request.POST)
    if not form.is_valid():
        for error in (e for errors in form.errors.values() for e in errors):
            messages.error(request, error)
        return back
    action = form.cleaned_data["action"]
    try:
        review = services.review_memories(entries=form.cleaned_data["entries"], actor=request.user, action=action,
                                          reason=form.cleaned_data["reason"])
    except services.ReviewRejected as rejected:
        messages.error(request, f"Nothing changed: {rejected}.")
        return back
    done = "kept with their lessons" if action == "keep" else "retired"
    if review.done:
        messages.success(request, f"{len(review.done)} entr{'y' if len(review.done) == 1 else 'ies'} {done}, each "
                                  f"recorded as your review: {', '.join(map(str, review.done))}.")
    if review.skipped:
        messages.warning(request, "Left as they were: " + "; ".join(f"{pk} ({why})" for pk, why in review.skipped.items()) + ".")
    return back


def _claim_text(run: Run) -> str:
    task = run.task
    return " ".join(part.label or part.external_id for part in (task.head, task.relation, task.tail))


def _normalised(text: str) -> str:
    return text.replace("\r\n", "\n").strip()


@require_http_methods(["GET", "POST"])
@role_required(REVIEWER)
def run_promote(request: HttpRequest, run_id: int) -> HttpResponse:
    """Promote a run into the memory bank. The form starts from the run's own trajectory; what the reviewer
    edits is what later runs will read."""
    run = get_object_or_404(Run.objects.select_related("task__kg", "task__head", "task__relation", "task__tail"), pk=run_id)
    original = bank.trajectory_of(run)
    form = PromoteForm(request.POST or None, initial={"triple_text": _claim_text(run), "trajectory": original})
    error = ""
    if request.method == "POST" and form.is_valid():
        trajectory = _normalised(form.cleaned_data["trajectory"])
        try:
            entry = services.promote_run(run=run, actor=request.user, triple_text=form.cleaned_data["triple_text"],
                                         trajectory=trajectory if trajectory != _normalised(original) else None)
        except services.ReviewRejected as rejected:
            error = str(rejected)
        else:
            messages.success(request, f"Run {run.pk} promoted to memory {entry.pk}; the next run can retrieve it.")
            return redirect(reverse("memory-detail", args=[entry.pk]))
    status = 400 if request.method == "POST" else 200
    return render(request, "verifier/memory_promote.html", {
        "run": run,
        "task": run.task,
        "form": form,
        "error": error,
        "run_href": run_url(run.pk),
        "task_href": task_url(run.task_id),
        "latest_review": run.reviews.exclude(verdict="").select_related("reviewer").first(),
        "already_promoted": list(MemoryEntry.objects.filter(source_run=run).order_by("-created_at")),
        "closest": bank.retrieve(_claim_text(run), k=CLOSEST_SHOWN),
    }, status=status)


urlpatterns = [
    path("memory/", memory_list, name="memory-list"),
    path("memory/bulk/", memory_bulk, name="memory-bulk"),
    path("memory/<int:entry_id>/", memory_detail, name="memory-detail"),
    path("memory/<int:entry_id>/status/", memory_status, name="memory-status"),
    path("memory/<int:entry_id>/review/", memory_review, name="memory-review"),
    path("runs/<int:run_id>/promote/", run_promote, name="run-promote"),
]
