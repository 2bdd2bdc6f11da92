"""The guide: the four steps of the work (import, weigh, investigate, review) and the few words of the workbench that
must stay, said plainly. Anyone with a role may read it; the queue of a new installation shows the same steps."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import path
from django.views.decorators.http import require_GET

from verifier.models import KnowledgeGraph
from verifier.roles import CURATOR, VIEWER, has_role, role_required


def first_steps_context(request: HttpRequest) -> dict:
    """What the first steps need to link to the right place for this user."""
    return {"can_curate": has_role(request.user, CURATOR), "has_kg": KnowledgeGraph.objects.filter(version__gt=0).exists()}


@require_GET
@role_required(VIEWER)
def guide(request: HttpRequest) -> HttpResponse:
    return render(request, "verifier/guide.html", first_steps_context(request))


urlpatterns = [path("guide/", guide, name="guide")]
