"""Workbench page: the verdicts' confidence per KG — the confidence model in force, how its verdicts fared against
reviewers' decisions, and (admins) candidate confidence models, compared and put in force: one refitted on those
decisions (verifier/confidence_reviews.py), or, for a KG weighed by the model for every KG, one fitted on its
verified structural calibration triples (verifier/confidence_own.py)."""

from __future__ import annotations

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import path, reverse
from django.views.decorators.http import require_GET, require_POST

from verifier import confidence_own, confidence_reviews
from verifier.evaluation import charts, reports
from verifier.models import ConfidenceModel, KnowledgeGraph
from verifier.roles import ADMIN, VIEWER, role_required


@require_GET
@role_required(VIEWER)
def confidence_page(request: HttpRequest) -> HttpResponse:
    rows = [{"kg": row, "in_force": _model_row(row.in_force), "candidates": [_model_row(m) for m in row.candidates],
             "reviewed": _reviewed_row(row.figures), "id_prefix": f"kg-{row.kg.pk}-",
             "own": confidence_own.own_model_state(row.kg) if confidence_own.wanted(row.kg) else None}
            for row in confidence_reviews.every_kg()]
    return render(request, "verifier/confidence.html", {"rows": rows})


def _model_row(model: ConfidenceModel | None) -> dict | None:
    """A confidence model as the page lists it: what it was fitted on and its out-of-fold figures."""
    if model is None:
        return None
    cv = (model.metrics or {}).get("cross_validated") or {}
    return {"model": model, "n": (model.metrics or {}).get("n"), "folds": cv.get("folds"),
            "accuracy": reports.fmt(cv.get("combined_accuracy")), "ece": reports.fmt(cv.get("ece"), "ratio"),
            "structural": reports.fmt(cv.get("structural_accuracy")),
            "in_force_then": (f"{reports.fmt(cv['in_force_accuracy'])} (#{cv['in_force_model']}, ECE "
                              f"{reports.fmt(cv['in_force_ece'], 'ratio')})" if cv.get("in_force_model") else "–"),
            "scope": model.kg.name if model.kg_id else "every KG without a model of its own"}


def _reviewed_row(figures: dict | None) -> dict | None:
    if figures is None:
        return None
    return {"n": figures["n"], "right": figures["right"], "accuracy": reports.fmt(figures["accuracy"]),
            "interval": f"{reports.fmt(figures['low'])}–{reports.fmt(figures['high'])}",
            "calibration": reports.calibration_rows(figures["calibration"])}


@require_GET
@role_required(VIEWER)
def reliability_chart(request: HttpRequest, kg_id: int) -> HttpResponse:
    kg = get_object_or_404(KnowledgeGraph, pk=kg_id)
    figures = confidence_reviews.kg_confidence(kg).figures
    if not figures or not figures["calibration"]:
        raise Http404("no reviewed run of this KG has a confidence")
    figure = charts.reliability_diagram(figures, f"{kg.name}: verdicts against reviewers' decisions", right="kept")
    return HttpResponse(charts.svg(figure), content_type="image/svg+xml")


@require_POST
@role_required(ADMIN)
def refit(request: HttpRequest, kg_id: int) -> HttpResponse:
    return _on_kg(request, kg_id, lambda kg: confidence_reviews.refit_on_reviews(kg, actor=request.user), "No model fitted",
                  lambda kg, model: f"Confidence model #{model.pk} fitted on {model.metrics['n']} reviewed runs of {kg.name}; "
                                    f"not in force yet.{_out_of_fold(model, 'its weighing agrees with the reviewers')}")


@require_POST
@role_required(ADMIN)
def verify_calibration_triples(request: HttpRequest, kg_id: int) -> HttpResponse:
    return _on_kg(request, kg_id, lambda kg: confidence_own.verify_calibration_triples(kg, actor=request.user),
                  "Its calibration triples are not verified",
                  lambda kg, evaluation: (f"The {evaluation.sample_size} calibration triples of {kg.name} are verified already "
                                          f"(evaluation {evaluation.name})." if evaluation.status == evaluation.Status.FINISHED
                                          else f"The worker verifies the {evaluation.sample_size} calibration triples of {kg.name} "
                                          f"in the evidence mode (evaluation {evaluation.name}); fit a model on them here when "
                                          "it has finished."))


@require_POST
@role_required(ADMIN)
def fit_on_calibration_triples(request: HttpRequest, kg_id: int) -> HttpResponse:
    return _on_kg(request, kg_id, lambda kg: confidence_own.fit_on_calibration_triples(kg, actor=request.user), "No model fitted",
                  lambda kg, model: f"Confidence model #{model.pk} fitted on {model.metrics['n']} verified calibration triples "
                                    f"of {kg.name}; not in force yet.{_out_of_fold(model, 'its weighing is right')}")


def _on_kg(request: HttpRequest, kg_id: int, act, refused: str, done) -> HttpResponse:
    """An admin's action on one KG's confidence: ``act(kg)`` calls the service; its ValueError is shown after
    ``refused``, its result as ``done(kg, result)``; back to the KG's section of the page."""
    kg = get_object_or_404(KnowledgeGraph, pk=kg_id)
    try:
        result = act(kg)
    except ValueError as exc:
        messages.error(request, f"{refused}: {exc}")
    else:
        messages.success(request, done(kg, result))
    return redirect(f"{reverse('confidence')}#kg-{kg.pk}")


def _out_of_fold(model: ConfidenceModel, says: str) -> str:
    cv = model.metrics.get("cross_validated") or {}
    return f" Out of fold {says} {cv['combined_accuracy']:.1%} of the time at ECE {cv['ece']:.3f}." if cv else ""


@require_POST
@role_required(ADMIN)
def activate(request: HttpRequest, pk: int) -> HttpResponse:
    model = get_object_or_404(ConfidenceModel.objects.select_related("kg"), pk=pk)
    confidence_reviews.put_in_force(model, actor=request.user)
    scope = model.kg.name if model.kg_id else "every KG without a model of its own"
    messages.success(request, f"Confidence model #{model.pk} is in force for {scope}; its finished runs are being re-weighed.")
    return redirect(f"{reverse('confidence')}#kg-{model.kg_id}" if model.kg_id else reverse("confidence"))


@require_POST
@role_required(ADMIN)
def stand_down(request: HttpRequest, pk: int) -> HttpResponse:
    model = get_object_or_404(ConfidenceModel.objects.select_related("kg"), pk=pk, active=True, kg__isnull=False)
    confidence_reviews.stand_down(model, actor=request.user)
    messages.success(request, f"Confidence model #{model.pk} stood down; the model for every KG weighs the runs of "
                              f"{model.kg.name} again, and they are being re-weighed.")
    return redirect(f"{reverse('confidence')}#kg-{model.kg_id}")


urlpatterns = [
    path("confidence/", confidence_page, name="confidence"),
    path("confidence/<int:kg_id>/reliability.svg", reliability_chart, name="confidence-reliability"),
    path("confidence/<int:kg_id>/refit/", refit, name="confidence-refit"),
    path("confidence/<int:kg_id>/calibration-triples/verify/", verify_calibration_triples, name="confidence-verify-calibration"),
    path("confidence/<int:kg_id>/calibration-triples/fit/", fit_on_calibration_triples, name="confidence-fit-calibration"),
    path("confidence/models/<int:pk>/activate/", activate, name="confidence-activate"),
    path("confidence/models/<int:pk>/stand-down/", stand_down, name="confidence-stand-down"),
]
