"""The structural model's status in the workbench: the header strip of the queue and run pages, and the
small JSON it polls while a model is training (viewer role, like every page that only reads)."""

from __future__ import annotations

from django.http import HttpRequest, JsonResponse
from django.urls import path, reverse
from django.views.decorators.http import require_GET

from verifier.roles import VIEWER, role_required
from verifier.selectors import structural_statuses

POLL_MS = 5000


def _kg_ids(value: str) -> list[int] | None:
    ids = [int(part) for part in value.split(",") if part.strip().isdigit()]
    return ids or None


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
    statuses = structural_statuses(_kg_ids(request.GET.get("kg", "")))
    return JsonResponse({"models": [status.as_dict() for status in statuses],
                         "in_flight": any(status.in_flight for status in statuses)})


urlpatterns = [
    path("structure/status.json", structure_status, name="structure-status"),
]
