"""A run's state as its page shows it while it waits and runs: its status, its place in the workers' line, why it
has not started and when it should. The page renders it once and then polls ``runs/<id>/state.json`` while the run
is queued (static/kgv/run.js); the run's websocket brings the moment it starts and ends."""

from __future__ import annotations

from django.contrib.humanize.templatetags.humanize import ordinal
from django.http import HttpRequest, JsonResponse
from django.shortcuts import get_object_or_404
from django.views.decorators.http import require_GET

from verifier.health import run_wait_reason, verification_workers
from verifier.models import Run
from verifier.roles import VIEWER, role_required
from verifier.selectors import queue_place, queue_wait


def run_state(run: Run) -> dict:
    """``position_text``: "2nd in the queue; a worker takes it in about 40 s" ("" unless it is in the workers' line);
    ``waiting``: why it has not started, in a curator's words ("" once it has)."""
    place = queue_place(run)
    position_text = ""
    if place.position is not None:
        eta = queue_wait(run, place)
        position_text = f"{ordinal(place.position)} in the queue" + (f"; a worker takes it in {eta}" if eta else "")
    return {
        "id": run.pk,
        "status": run.status,
        "status_label": run.get_status_display(),
        "finished": run.is_finished,
        "position": place.position,
        "position_text": position_text,
        "waiting": run_wait_reason(run, place, verification_workers()) if run.status == Run.Status.QUEUED else "",
        "started_at": run.started_at.isoformat() if run.started_at else None,
    }


@require_GET
@role_required(VIEWER)
def run_state_json(request: HttpRequest, run_id: int) -> JsonResponse:
    return JsonResponse(run_state(get_object_or_404(Run.objects.select_related("task__kg"), pk=run_id)))
