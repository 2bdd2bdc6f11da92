"""What the reviewers' decisions change in each KG (``/changes/``): the removals and additions still to make, to
download for the KG's own store, and for an admin to apply to KGV's copy of a local KG (``manage.py apply_changes``)."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import path, reverse
from django.views.decorators.http import require_GET, require_POST

from verifier.errors import ApplicationError
from verifier.exports.records import MAX_SELECTION
from verifier.models import KnowledgeGraph
from verifier.roles import ADMIN, VIEWER, has_role, role_required
from verifier.settled_changes import apply_changes, settled_changes
from verifier.web.links import export_url


def _section(kg: KnowledgeGraph) -> dict:
    pending = settled_changes(kg)
    task_ids = [change.record.task_id for change in pending][:MAX_SELECTION]
    return {"kg": kg, "changes": pending, "local": kg.kind == KnowledgeGraph.Kind.LOCAL,
            "downloads": [(label, export_url(fmt, task_ids)) for fmt, label in
                          (("sparql-update", "SPARQL Update"), ("changes", "TSV"))] if task_ids else [],
            "more_than_a_file": len(pending) > MAX_SELECTION}


@require_GET
@role_required(VIEWER)
def changes_page(request: HttpRequest) -> HttpResponse:
    sections = [_section(kg) for kg in KnowledgeGraph.objects.filter(tasks__isnull=False).distinct().order_by("name")]
    return render(request, "verifier/kg_changes.html", {"sections": sections, "can_apply": has_role(request.user, ADMIN),
                                                         "max_selection": MAX_SELECTION})


@require_POST
@role_required(ADMIN)
def apply(request: HttpRequest, kg_id: int) -> HttpResponse:
    kg = get_object_or_404(KnowledgeGraph, pk=kg_id)
    try:
        applied = apply_changes(kg=kg, actor=request.user)
    except ApplicationError as exc:
        messages.error(request, f"Nothing changed: {exc}.")
    else:
        if applied.amended is None:
            messages.info(request, f"Nothing to change: {kg.name} already follows every settled decision.")
        else:
            retrain = (f" Structural model #{applied.training.pk} is queued to train on it; the current one scores meanwhile."
                       if applied.training else " A structural model is being trained already: train one on this version once it ends.")
            messages.success(request, f"KGV's copy of {kg.name}: {applied.amended.removed} triple(s) removed and "
                                      f"{applied.amended.added} added (version {applied.amended.version}).{retrain}")
    return redirect(f"{reverse('kg-changes')}#kg-{kg.pk}")


urlpatterns = [path("changes/", changes_page, name="kg-changes"),
               path("changes/<int:kg_id>/apply/", apply, name="kg-changes-apply")]
