"""The KG audit pages (not the audit log of who did what, which is /audit/): the audits of each KG and a form to run
one (curators), an audit's page — live progress while the audit workers score its chunks, then what it found: the
classifier's AUC, the distribution of suspicion, suspects per relation, what moved since the previous audit and the
suspects themselves — a suspect's page with its reasons and details, queueing the top suspects as flagged triples
(curators), and the downloads (CSV, report). Writes go through verifier.kg_audit.pipeline, as the API's do."""

from __future__ import annotations

from urllib.parse import urlencode

from django import forms
from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import path, reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from verifier.kg_audit import exports
from verifier.kg_audit.pipeline import AuditError, queue_suspects, start_audit, suspect_details
from verifier.kg_audit.selectors import audit_state, auditable_kgs, audits_by_kg, latest_run, suspects
from verifier.models import Entity, KGAudit, KnowledgeGraph, Suspect
from verifier.params import ParameterError, get_id
from verifier.roles import CURATOR, VIEWER, has_role, role_required
from verifier.web.links import run_url, task_url

SUSPECTS_PER_PAGE = 50
POLL_MS = 1500
CHART_WIDTH, CHART_HEIGHT = 400, 100  # the distribution's SVG, in its own units


class StartAuditForm(forms.Form):
    kg = forms.ModelChoiceField(queryset=KnowledgeGraph.objects.none(), label="Knowledge graph", empty_label=None)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["kg"].queryset = auditable_kgs()


class QueueSuspectsForm(forms.Form):
    top = forms.IntegerField(min_value=1, required=False, label="The top",
                             widget=forms.NumberInput(attrs={"placeholder": "N", "class": "narrow-num"}))
    threshold = forms.FloatField(min_value=0.0, max_value=1.0, required=False, label="or every suspect with suspicion at least",
                                 widget=forms.NumberInput(attrs={"placeholder": "0.5", "step": "0.05", "class": "narrow-num"}))

    def clean(self):
        data = super().clean()
        if not self.errors and data.get("top") is None and data.get("threshold") is None:
            raise forms.ValidationError("Say how many of the top suspects to queue, or from which suspicion on (or both).")
        return data


def audit_url(audit_id: int) -> str:
    return reverse("kg-audit-detail", args=[audit_id])


def _chosen_kg(request: HttpRequest) -> int | None:
    """``?kg=<id>``: the KG whose audits are listed and which the form offers first."""
    try:
        return get_id(request.GET, "kg", hint="a knowledge-graph id")
    except ParameterError:
        return None  # the list of every KG's audits


def _list_page(request: HttpRequest, form: StartAuditForm, status: int = 200) -> HttpResponse:
    kg_id = _chosen_kg(request)
    return render(request, "verifier/kg_audit/list.html", {
        "groups": audits_by_kg(kg_id), "form": form, "kg_id": kg_id, "can_curate": has_role(request.user, CURATOR),
    }, status=status)


@require_http_methods(["GET", "POST"])
@role_required(VIEWER)
def kg_audit_list(request: HttpRequest) -> HttpResponse:
    """GET: the audits of each KG, latest first. POST (curator): run an audit of the chosen KG on the audit workers."""
    if request.method == "GET":
        return _list_page(request, StartAuditForm(initial={"kg": _chosen_kg(request)}))
    if not has_role(request.user, CURATOR):
        raise PermissionDenied(f"running a KG audit needs the {CURATOR} role")
    form = StartAuditForm(request.POST)
    if not form.is_valid():
        return _list_page(request, form, status=400)
    kg = form.cleaned_data["kg"]
    try:
        audit = start_audit(kg=kg, actor=request.user)
    except AuditError as error:
        messages.error(request, f"No audit started: {error}.")
        return redirect(f"{reverse('kg-audit-list')}?{urlencode({'kg': kg.pk})}")
    messages.success(request, f"KG audit #{audit.pk} of {kg.name} is queued: the audit workers score its "
                              f"{audit.triples:,} triples, and this page follows them.")
    return redirect(audit_url(audit.pk))


def _chart(audit: KGAudit) -> list[dict]:
    """The distribution's bars (exports.histogram_rows) placed in the SVG: a bar's height is its count against the
    tallest, a bar that holds any triple at least a sliver."""
    rows = exports.histogram_rows(audit)
    width = CHART_WIDTH / max(len(rows), 1)
    bars = []
    for index, row in enumerate(rows):
        height = max(row["width"], 1.5) if row["count"] else 0.0
        bars.append({**row, "x": round(index * width + 1, 2), "bar_width": round(width - 2, 2), "height": height,
                     "y": round(CHART_HEIGHT - height, 2)})
    return bars


def _finished_context(request: HttpRequest, audit: KGAudit) -> dict:
    relation = get_id(request.GET, "relation", hint="a relation id")
    page = Paginator(suspects(audit, relation=relation), SUSPECTS_PER_PAGE).get_page(request.GET.get("page"))
    return {"auc": (audit.metrics or {}).get("auc") or {}, "bars": _chart(audit), "chart_width": CHART_WIDTH,
            "chart_height": CHART_HEIGHT, "relations": exports.relation_rows(audit), "relation": relation,
            "compared": (audit.summary or {}).get("compared"), "page": page,
            "queued": Suspect.objects.filter(audit=audit, task__isnull=False).count(),
            "queue_form": QueueSuspectsForm(initial={"top": min(20, (audit.summary or {}).get("suspects") or 20)})}


@require_GET
@role_required(VIEWER)
def kg_audit_detail(request: HttpRequest, audit_id: int) -> HttpResponse:
    audit = get_object_or_404(KGAudit.objects.select_related("kg", "created_by").defer("scorer"), pk=audit_id)
    context = {"audit": audit, "state": audit_state(audit), "poll_ms": POLL_MS, "can_curate": has_role(request.user, CURATOR)}
    if audit.status != KGAudit.Status.FINISHED:
        return render(request, "verifier/kg_audit/detail.html", context)
    try:
        context.update(_finished_context(request, audit))
    except ParameterError as error:
        return render(request, "verifier/kg_audit/detail.html", {**context, "filter_error": error}, status=400)
    return render(request, "verifier/kg_audit/detail.html", context)


@require_GET
@role_required(VIEWER)
def kg_audit_state(request: HttpRequest, audit_id: int) -> JsonResponse:
    """The audit's live state, polled by its page until it has finished or failed."""
    return JsonResponse(audit_state(get_object_or_404(KGAudit.objects.defer("scorer"), pk=audit_id)))


@require_GET
@role_required(VIEWER)
def kg_audit_suspect(request: HttpRequest, audit_id: int, rank: int) -> HttpResponse:
    """One suspect: its reasons, what the rules, the structural model and the reference KGs say (read on first
    opening), its ends in the entity look-up, and its flagged task and latest run once queued."""
    suspect = get_object_or_404(Suspect.objects.select_related("audit__kg", "relation", "task"), audit_id=audit_id, rank=rank)
    audit = suspect.audit
    ends = {entity.pk: entity for entity in Entity.objects.filter(pk__in=[suspect.head_id, suspect.tail_id])}
    head, tail = ends.get(suspect.head_id), ends.get(suspect.tail_id)
    details = suspect_details(suspect) if head is not None and tail is not None else None
    run = latest_run(suspect)
    lookup = reverse("entity-lookup")
    neighbours = dict(Suspect.objects.filter(audit=audit, rank__in=[rank - 1, rank + 1]).values_list("rank", "pk"))
    return render(request, "verifier/kg_audit/suspect.html", {
        "audit": audit, "suspect": suspect, "head": head, "tail": tail, "details": details, "run": run,
        "task_href": task_url(suspect.task_id) if suspect.task_id else "", "run_href": run_url(run.pk) if run else "",
        "head_href": f"{lookup}?{urlencode({'kg': audit.kg_id, 'q': head.external_id})}" if head else "",
        "tail_href": f"{lookup}?{urlencode({'kg': audit.kg_id, 'q': tail.external_id})}" if tail else "",
        "previous_rank": rank - 1 if rank - 1 in neighbours else None, "next_rank": rank + 1 if rank + 1 in neighbours else None,
    })


@require_POST
@role_required(CURATOR)
def kg_audit_queue(request: HttpRequest, audit_id: int) -> HttpResponse:
    """Queue the top N suspects (or those at a suspicion or above) as flagged triples, then show them in the queue."""
    audit = get_object_or_404(KGAudit.objects.defer("scorer"), pk=audit_id)
    form = QueueSuspectsForm(request.POST)
    if not form.is_valid():
        for errors in form.errors.values():
            for error in errors:
                messages.error(request, f"Nothing queued: {error}")
        return redirect(audit_url(audit.pk) + "#queue-suspects")
    try:
        queued = queue_suspects(audit=audit, actor=request.user, top=form.cleaned_data["top"],
                                threshold=form.cleaned_data["threshold"])
    except AuditError as error:
        messages.error(request, f"Nothing queued: {error}.")
        return redirect(audit_url(audit.pk))
    if queued:
        messages.success(request, f"{queued} suspect(s) of KG audit #{audit.pk} queued as flagged triples (source "
                                  f"audit:{audit.pk}); start their investigations from here.")
    else:
        messages.warning(request, f"No suspect queued: those asked for were queued already. These are the triples KG audit "
                                  f"#{audit.pk}'s suspects were queued as.")
    return redirect(f"{reverse('queue')}?{urlencode({'kg_audit': audit.pk})}")


def _download(audit_id: int, render_file, suffix: str, content_type: str) -> HttpResponse:
    audit = get_object_or_404(KGAudit.objects.select_related("kg").defer("scorer"), pk=audit_id)
    if audit.status != KGAudit.Status.FINISHED:
        return HttpResponse(f"KG audit #{audit.pk} is {audit.status}: its suspects are known when it has finished.\n",
                            status=409, content_type="text/plain; charset=utf-8")
    response = HttpResponse(render_file(audit), content_type=content_type)
    response["Content-Disposition"] = f'attachment; filename="{exports.file_name(audit, suffix)}"'
    return response


@require_GET
@role_required(VIEWER)
def kg_audit_csv(request: HttpRequest, audit_id: int) -> HttpResponse:
    return _download(audit_id, exports.to_csv, "csv", "text/csv; charset=utf-8")


@require_GET
@role_required(VIEWER)
def kg_audit_report(request: HttpRequest, audit_id: int) -> HttpResponse:
    return _download(audit_id, exports.to_html, "html", "text/html; charset=utf-8")


urlpatterns = [
    path("kg-audits/", kg_audit_list, name="kg-audit-list"),
    path("kg-audits/<int:audit_id>/", kg_audit_detail, name="kg-audit-detail"),
    path("kg-audits/<int:audit_id>/state/", kg_audit_state, name="kg-audit-state"),
    path("kg-audits/<int:audit_id>/suspects/<int:rank>/", kg_audit_suspect, name="kg-audit-suspect"),
    path("kg-audits/<int:audit_id>/queue/", kg_audit_queue, name="kg-audit-queue"),
    path("kg-audits/<int:audit_id>/suspects.csv", kg_audit_csv, name="kg-audit-csv"),
    path("kg-audits/<int:audit_id>/report.html", kg_audit_report, name="kg-audit-report"),
]
