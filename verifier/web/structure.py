"""The structural model's status in the workbench: the header strip of the queue and run pages, the small JSON it
polls while a model is training (viewer role, like every page that only reads), and an admin's request to train a
KG's model again where none serves it (failed, stalled or never trained)."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect
from django.urls import path, reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET, require_POST

from verifier import services
from verifier.models import KnowledgeGraph
from verifier.params import get_ids
from verifier.roles import ADMIN, VIEWER, role_required
from verifier.selectors import structural_statuses

POLL_MS = 5000


def status_context(kg_ids: list[int] | None = None) -> dict:
    """What templates/verifier/structure_status.html needs: the statuses and the URL that refreshes them."""
    statuses = structural_statuses(kg_ids)
    query = f"?kg={','.join(str(pk) for pk in kg_ids)}" if kg_ids else ""
    return {"structural_statuses": statuses, "structure_status_url": reverse("structure-status") + query,
            "structure_poll_ms": POLL_MS}


@require_GET
@role_required(VIEWER)
def structure_status(request: HttpRequest) -> JsonResponse:
    """``?kg=1,2`` (default: every local KG with data): each KG's structural model, for the header strip."""
    statuses = structural_statuses(get_ids(request.GET, "kg") or None)
    return JsonResponse({"models": [status.as_dict() for status in statuses],
                         "in_flight": any(status.in_flight for status in statuses)})


@require_POST
@role_required(ADMIN)
def train_again(request: HttpRequest, kg_id: int) -> HttpResponse:
    """Queue a training of the KG's model, then back to the page the strip was on (``next``)."""
    kg = get_object_or_404(KnowledgeGraph, pk=kg_id)
    try:
        row = services.train_structural_model(kg=kg, actor=request.user)
    except ValueError as exc:
        messages.error(request, f"No training queued: {exc}")
    else:
        messages.success(request, f"Structural model #{row.pk} of {kg.name} is queued; a worker trains it (minutes to an hour), "
                                  "and the strip follows it.")
    back = request.POST.get("next", "")
    safe = url_has_allowed_host_and_scheme(back, allowed_hosts={request.get_host()}, require_https=request.is_secure())
    return redirect(back if back and safe else reverse("queue"))


urlpatterns = [
    path("structure/status.json", structure_status, name="structure-status"),
    path("structure/<int:kg_id>/train/", train_again, name="structure-train"),
]
