"""Onboarding a KG from a file, for admins (who manage KGs): a form with the KG's name and a TSV or N-Triples file,
uploaded with its progress shown (static/kgv/onboarding.js), then the onboarding's page, which follows the training
workers stage by stage and ends with what was reached and the ways on: the KG's queue and running an audit.

A file that cannot be onboarded (a bad or taken name, a file the loader cannot read) is refused with the reason and
leaves nothing stored (verifier/onboarding_uploads.py, shared with the API)."""

from __future__ import annotations

from urllib.parse import urlencode

from django import forms
from django.conf import settings
from django.contrib import messages
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import path, reverse
from django.views.decorators.http import require_GET, require_http_methods

from verifier.kg.loader import ImportRejected
from verifier.models import Onboarding
from verifier.onboarding import OnboardingError, summary_lines
from verifier.onboarding_uploads import SUFFIXES, onboard_upload
from verifier.roles import ADMIN, role_required

POLL_MS = 2000
RECENT = 10
SHOWN_PROBLEMS = 10


class OnboardForm(forms.Form):
    name = forms.CharField(max_length=100, label="Name of the KG",
                           help_text="Letters, digits, - and _: the name commands, filters and the API use.",
                           widget=forms.TextInput(attrs={"placeholder": "my-kg", "autocomplete": "off"}))
    file = forms.FileField(label="File", help_text="A .tsv or .txt file of head<TAB>relation<TAB>tail lines, or an .nt "
                                                   "(N-Triples) file with labels and descriptions.",
                           widget=forms.ClearableFileInput(attrs={"accept": ",".join(SUFFIXES)}))


def onboarding_url(onboarding_id: int) -> str:
    return reverse("kg-onboarding", args=[onboarding_id])


def _wants_json(request: HttpRequest) -> bool:
    """The page's script uploads with XMLHttpRequest and asks for JSON; a plain form post gets pages."""
    return "application/json" in request.headers.get("Accept", "")


def _refusals(error: Exception) -> list[str]:
    if isinstance(error, ImportRejected):
        shown = [f"line {p.line}: {p.message}" for p in error.problems[:SHOWN_PROBLEMS]]
        more = len(error.problems) - SHOWN_PROBLEMS
        return [f"Nothing onboarded: {len(error.problems)} malformed line(s)" + (f" (the first {SHOWN_PROBLEMS} below)" if more > 0 else "")
                + ".", *shown]
    return [f"Nothing onboarded: {error}."]


def _form_page(request: HttpRequest, form: OnboardForm, status: int = 200) -> HttpResponse:
    return render(request, "verifier/onboard.html", {
        "form": form, "recent": Onboarding.objects.select_related("kg", "created_by")[:RECENT],
        "max_bytes": settings.KGV_MAX_UPLOAD_BYTES}, status=status)


@require_http_methods(["GET", "POST"])
@role_required(ADMIN)
def kg_onboard(request: HttpRequest) -> HttpResponse:
    """GET: the form and the latest onboardings. POST: check the file, keep it and send it to the training workers."""
    if request.method == "GET":
        return _form_page(request, OnboardForm())
    form = OnboardForm(request.POST, request.FILES)
    if not form.is_valid():
        if _wants_json(request):
            return JsonResponse({"errors": [f"{form.fields[name].label}: {' '.join(errors)}" if name in form.fields else
                                            " ".join(errors) for name, errors in form.errors.items()]}, status=400)
        return _form_page(request, form, status=400)
    try:
        onboarding = onboard_upload(upload=form.cleaned_data["file"], name=form.cleaned_data["name"].strip(), actor=request.user)
    except (OnboardingError, ImportRejected) as error:
        if _wants_json(request):
            return JsonResponse({"errors": _refusals(error)}, status=400)
        for line in _refusals(error):
            messages.error(request, line)
        return _form_page(request, form, status=400)
    if _wants_json(request):
        return JsonResponse({"id": onboarding.pk, "url": onboarding_url(onboarding.pk)}, status=201)
    messages.success(request, f"{onboarding.name} is uploaded and waits for a training worker.")
    return redirect(onboarding_url(onboarding.pk))


def onboarding_state(onboarding: Onboarding) -> dict:
    done = onboarding.status in (Onboarding.Status.FINISHED, Onboarding.Status.FAILED)
    return {"id": onboarding.pk, "status": onboarding.status, "status_label": onboarding.get_status_display(),
            "stage": onboarding.stage, "progress": round(onboarding.progress, 4), "percent": int(100 * onboarding.progress),
            "done": done, "error": onboarding.error, "kg": onboarding.kg_id}


@require_GET
@role_required(ADMIN)
def kg_onboarding(request: HttpRequest, onboarding_id: int) -> HttpResponse:
    """One onboarding: its stage and progress while the workers take it, then what was reached and where to go on."""
    onboarding = get_object_or_404(Onboarding.objects.select_related("kg", "created_by"), pk=onboarding_id)
    finished = onboarding.status == Onboarding.Status.FINISHED
    kg_id = onboarding.kg_id
    return render(request, "verifier/onboarding.html", {
        "onboarding": onboarding, "state": onboarding_state(onboarding), "poll_ms": POLL_MS,
        "summary": summary_lines(onboarding) if finished else [],
        "queue_href": f"{reverse('queue')}?{urlencode({'kg': kg_id})}" if kg_id else "",
        "audit_href": f"{reverse('kg-audit-list')}?{urlencode({'kg': kg_id})}#run-audit" if kg_id else ""})


@require_GET
@role_required(ADMIN)
def kg_onboarding_state(request: HttpRequest, onboarding_id: int) -> JsonResponse:
    """The onboarding's stage and progress, polled by its page until it has finished or failed."""
    return JsonResponse(onboarding_state(get_object_or_404(Onboarding, pk=onboarding_id)))


urlpatterns = [
    path("kgs/new/", kg_onboard, name="kg-onboard"),
    path("kgs/onboardings/<int:onboarding_id>/", kg_onboarding, name="kg-onboarding"),
    path("kgs/onboardings/<int:onboarding_id>/state/", kg_onboarding_state, name="kg-onboarding-state"),
]
