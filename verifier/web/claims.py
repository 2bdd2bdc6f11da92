"""The claims pages: paste claims in plain language (one per line; curators), follow each one — its pseudo-subgraph
with the unknowns marked and how they were resolved, each part's run, the claim's verdict — and retry a failed one.
The API offers the same (``/api/claims/``); both write through verifier.claims.pipeline."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import path, reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from verifier.claims.importing import MAX_CLAIM_CHARS, ClaimFileError, ReadClaims, read_claims_upload
from verifier.claims.pipeline import (
    ClaimError,
    PartView,
    outcome,
    parts_of,
    queue_claim,
    retry_claim,
    review_claim,
    submit_claim,
    submit_claims,
)
from verifier.models import Claim, ClaimReview, KnowledgeGraph
from verifier.queue_filters import EVALUATION_SOURCE_PREFIX
from verifier.roles import CURATOR, REVIEWER, VIEWER, has_role, role_required
from verifier.web.links import claim_export_links

MAX_CLAIMS_PER_SUBMISSION = 50
LISTED = 100


class ClaimsForm(forms.Form):
    kg = forms.ModelChoiceField(queryset=KnowledgeGraph.objects.none(), label="Graph", empty_label=None)
    claims = forms.CharField(widget=forms.Textarea(attrs={"rows": 4, "placeholder": "One claim per line, e.g. "
                                                          "“Douglas Adams was born in a city of the United Kingdom.”"}),
                             max_length=MAX_CLAIMS_PER_SUBMISSION * (MAX_CLAIM_CHARS + 1), required=False)
    file = forms.FileField(required=False, label="Or a file",
                           help_text="One claim per line (.txt), a 'claim' column with optional 'label' and 'category' "
                                     "(.csv), or JSON Lines as the claims benchmark writes them (.jsonl).")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["kg"].queryset = KnowledgeGraph.objects.filter(kind=KnowledgeGraph.Kind.LOCAL, version__gt=0).order_by("name")

    def clean_claims(self) -> list[str]:
        lines = [" ".join(line.split()) for line in self.cleaned_data["claims"].replace("\x00", "").splitlines()]
        lines = [line for line in lines if line]
        if len(lines) > MAX_CLAIMS_PER_SUBMISSION:
            raise forms.ValidationError(f"At most {MAX_CLAIMS_PER_SUBMISSION} claims at a time (these are {len(lines)}).")
        long = [n for n, line in enumerate(lines, start=1) if len(line) > MAX_CLAIM_CHARS]
        if long:
            raise forms.ValidationError(f"Claim {long[0]} has more than {MAX_CLAIM_CHARS} characters: split it.")
        return lines

    def clean(self):
        data = super().clean()
        if not data.get("claims") and not data.get("file") and not self.errors:
            raise forms.ValidationError("Write at least one claim, or choose a file of claims.")
        if data.get("file"):
            try:
                data["read"] = read_claims_upload(data["file"])
            except ClaimFileError as error:
                self.add_error("file", str(error))
        return data


def _list_page(request: HttpRequest, form: ClaimsForm, status: int = 200) -> HttpResponse:
    """The latest claims; those an evaluation drew from a benchmark only with ``?origin=all``."""
    everything = request.GET.get("origin") == "all"
    claims = Claim.objects.select_related("kg").prefetch_related("reviews__reviewer")
    if not everything:
        claims = claims.exclude(source__startswith=EVALUATION_SOURCE_PREFIX)
    rows = [(claim, outcome(claim)) for claim in claims[:LISTED]]
    return render(request, "verifier/claim_list.html", {"form": form, "rows": rows, "everything": everything}, status=status)


@require_http_methods(["GET", "POST"])
@role_required(VIEWER)
def claim_list(request: HttpRequest) -> HttpResponse:
    """GET: the latest claims and their verdicts. POST (curator): submit claims, one per line."""
    if request.method == "GET":
        return _list_page(request, ClaimsForm())
    if not has_role(request.user, CURATOR):
        return _list_page(request, ClaimsForm(), status=403)
    form = ClaimsForm(request.POST, request.FILES)
    if not form.is_valid():
        return _list_page(request, form, status=400)
    kg = form.cleaned_data["kg"]
    try:
        with transaction.atomic():
            claims = [submit_claim(kg=kg, text=text, actor=request.user, source="workbench")
                      for text in form.cleaned_data["claims"]]
            for claim in claims:
                queue_claim(claim)
            if read := form.cleaned_data.get("read"):
                from_file = submit_claims(kg=kg, read=read, actor=request.user, source=form.cleaned_data["file"].name)
                claims += from_file
    except ClaimError as error:
        form.add_error("claims", str(error))
        return _list_page(request, form, status=400)
    if read:
        _report_file(request, form.cleaned_data["file"].name, read, len(from_file))
        return redirect(reverse("claim-list"))
    if len(claims) == 1:
        return redirect(reverse("claim-detail", args=[claims[0].pk]))
    messages.success(request, f"{len(claims)} claims queued: each is written as triples of the graph, then its parts are verified.")
    return redirect(reverse("claim-list"))


SHOWN_PROBLEMS = 10


def _report_file(request: HttpRequest, name: str, read: ReadClaims, queued: int) -> None:
    messages.success(request, f"{queued} claims queued from {name}.")
    if read.problems:
        more = f" … and {len(read.problems) - SHOWN_PROBLEMS} more" if len(read.problems) > SHOWN_PROBLEMS else ""
        messages.warning(request, f"{len(read.problems)} row{'s' if len(read.problems) != 1 else ''} of {name} not taken: "
                                  + "; ".join(read.problems[:SHOWN_PROBLEMS]) + more)


def claim_graph(parts: list[PartView]) -> dict:
    """The pseudo-subgraph for the page's drawing (static/kgv/dist/graph.js): the entities as nodes, an unknown
    marked and labelled with what resolved it, each triple an edge coloured by whether it holds as claimed."""
    nodes, edges = {}, []
    for number, view in enumerate(parts, start=1):
        row = view.row
        for side in ("head", "tail"):
            unknown = row[f"{side}_unknown"]
            resolved = row[side] != unknown
            label = f"{unknown} → {row[f'{side}_label']}" if unknown and resolved else row[f"{side}_label"]
            nodes.setdefault(row[side], {"id": row[side], "label": label, "unknown": bool(unknown)})
        edges.append({"id": f"part-{number}", "source": row["head"], "target": row["tail"],
                      "label": f"{'NOT ' if row['negated'] else ''}{row['relation_label']}", "state": view.outcome.state,
                      "negated": row["negated"], "keys": []})
    return {"nodes": list(nodes.values()), "edges": edges}


def _state(claim: Claim) -> dict:
    parts = parts_of(claim)
    verdict = outcome(claim, parts)
    in_flight = any(v.run and not v.run.is_finished for v in parts)
    settled = claim.status in (Claim.Status.FAILED, Claim.Status.REFUSED) or (
        claim.status == Claim.Status.DECOMPOSED and verdict.verdict != "open" and not in_flight)
    return {"claim": claim, "parts": parts, "verdict": verdict, "graph": claim_graph(parts), "settled": settled}


@require_GET
@role_required(VIEWER)
def claim_detail(request: HttpRequest, claim_id: int) -> HttpResponse:
    claim = get_object_or_404(Claim.objects.select_related("kg").prefetch_related("reviews__reviewer"), pk=claim_id)
    reviews = claim.reviews.all()
    return render(request, "verifier/claim_detail.html", {**_state(claim), "reviews": reviews,
                                                           "verdicts": ClaimReview.Verdict.choices,
                                                           "can_review": has_role(request.user, REVIEWER),
                                                           "exports": claim_export_links(claim.pk)})


@require_GET
@role_required(VIEWER)
def claim_state(request: HttpRequest, claim_id: int) -> HttpResponse:
    """The claim page's live part (polled until the claim is settled): its status and its parts' panel as HTML."""
    claim = get_object_or_404(Claim.objects.select_related("kg").prefetch_related("reviews__reviewer"), pk=claim_id)
    state = _state(claim)
    html = render(request, "verifier/claim_parts.html", state).content.decode()
    return JsonResponse({"status": claim.status, "verdict": state["verdict"].verdict, "settled": state["settled"], "html": html,
                         "graph": state["graph"]})


@require_POST
@role_required(CURATOR)
def claim_retry(request: HttpRequest, claim_id: int) -> HttpResponse:
    claim = get_object_or_404(Claim, pk=claim_id)
    try:
        retry_claim(claim=claim, actor=request.user)
        messages.success(request, f"Claim {claim.pk} queued again.")
    except ClaimError as error:
        messages.error(request, str(error))
    return redirect(reverse("claim-detail", args=[claim.pk]))


@require_POST
@role_required(CURATOR)
def claim_review(request: HttpRequest, claim_id: int) -> HttpResponse:
    """Accept or override the claim's verdict as a whole, or comment on it."""
    claim = get_object_or_404(Claim, pk=claim_id)
    if request.POST.get("decision") != ClaimReview.Decision.COMMENT and not has_role(request.user, REVIEWER):
        raise PermissionDenied("Deciding on a claim's verdict needs the reviewer role; curators may comment.")
    try:
        review = review_claim(claim=claim, reviewer=request.user, decision=request.POST.get("decision", ""),
                              reason=request.POST.get("reason", ""), verdict=request.POST.get("verdict", ""))
        messages.success(request, f"Claim {claim.pk}: {review.get_decision_display().lower()} recorded.")
    except ClaimError as error:
        messages.error(request, str(error))
    return redirect(reverse("claim-detail", args=[claim.pk]) + "#claim-review")


urlpatterns = [
    path("claims/", claim_list, name="claim-list"),
    path("claims/<int:claim_id>/", claim_detail, name="claim-detail"),
    path("claims/<int:claim_id>/state/", claim_state, name="claim-state"),
    path("claims/<int:claim_id>/retry/", claim_retry, name="claim-retry"),
    path("claims/<int:claim_id>/review/", claim_review, name="claim-review"),
]
