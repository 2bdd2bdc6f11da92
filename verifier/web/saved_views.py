"""Saved views of the queue: a curator names the filters in use ("disputed, mine, least confident first") and
opens them again from the queue page with one click. Each user sees their own."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse, QueryDict
from django.shortcuts import get_object_or_404, redirect
from django.urls import path, reverse
from django.views.decorators.http import require_POST

from verifier import services
from verifier.models import SavedView, VerificationTask
from verifier.queue_filters import FILTER_PARAMS, QueueFilterError, filter_tasks
from verifier.roles import VIEWER, role_required

KEPT_PARAMS = (*FILTER_PARAMS, "per_page")


def view_query(params: QueryDict) -> str:
    """The queue parameters worth keeping (filters, sort, page size; not the page number), URL-encoded."""
    kept = QueryDict(mutable=True)
    for name in KEPT_PARAMS:
        values = [value for value in params.getlist(name) if value]
        if values:
            kept.setlist(name, values)
    return kept.urlencode()


def saved_views(user) -> list[SavedView]:
    views = list(SavedView.objects.filter(user=user))
    for view in views:
        view.href = f"{reverse('queue')}?{view.query}" if view.query else reverse("queue")
    return views


@require_POST
@role_required(VIEWER)
def save_view(request: HttpRequest) -> HttpResponse:
    """Save the filters posted as ``query`` under ``name``; a filter the queue would refuse is not saved."""
    query = view_query(QueryDict(request.POST.get("query", "")))
    try:
        filter_tasks(VerificationTask.objects.none(), QueryDict(query), user=request.user)
        view = services.save_view(user=request.user, name=request.POST.get("name", ""), query=query)
    except (QueueFilterError, services.ViewRejected) as error:
        messages.error(request, f"The view was not saved: {error}.")
        return redirect(f"{reverse('queue')}?{query}")
    messages.success(request, f"Saved the view “{view.name}”.")
    return redirect(f"{reverse('queue')}?{query}")


@require_POST
@role_required(VIEWER)
def delete_view(request: HttpRequest, view_id: int) -> HttpResponse:
    view = get_object_or_404(SavedView, pk=view_id, user=request.user)
    services.delete_view(view=view, user=request.user)
    messages.success(request, f"Removed the view “{view.name}”.")
    return redirect(reverse("queue"))


urlpatterns = [
    path("queue/views/", save_view, name="saved-view-save"),
    path("queue/views/<int:view_id>/delete/", delete_view, name="saved-view-delete"),
]
