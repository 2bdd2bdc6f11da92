"""Workbench pages: evaluations — the list, one evaluation's results (with links to every run and the
calibration of its confidences), two evaluations side by side, a suite's results table, and the charts as SVG."""

from __future__ import annotations

from django.contrib import messages
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import path, reverse
from django.views.decorators.http import require_POST

from verifier.evaluation import charts, control, metrics, reports
from verifier.models import Evaluation
from verifier.params import get_id
from verifier.roles import ADMIN, VIEWER, role_required
from verifier.selectors import verified_so_far
from verifier.web.forms import EvaluationStartForm

app_name = "evaluations"
ITEMS_PER_PAGE = 200


@role_required(VIEWER)
def evaluation_list(request: HttpRequest) -> HttpResponse:
    evaluations = list(Evaluation.objects.select_related("kg").order_by("-created_at", "-id")[:500])
    rows = [{"evaluation": e, "benchmark": reports.benchmark_title(e), "interval": reports.accuracy_interval(e.metrics),
             "values": [reports.fmt(e.metrics.get(k)) if "n" in e.metrics else "" for k in ("accuracy", "f1", "precision", "recall")],
             "ece": reports.fmt(reports.value(e.metrics, "calibration.ece"), "ratio") if "n" in e.metrics else ""}
            for e in evaluations]
    done = verified_so_far([e.pk for e in evaluations if e.status != Evaluation.Status.FINISHED])
    for row in rows:
        row["done"] = done.get(row["evaluation"].pk)
    suites = sorted({e.suite for e in evaluations if e.suite})
    return render(request, "verifier/evaluations/list.html", {"rows": rows, "suites": suites, "evaluations": evaluations,
                                                              "start_form": EvaluationStartForm()})


@require_POST
@role_required(ADMIN)
def evaluation_start(request: HttpRequest) -> HttpResponse:
    """Draw a benchmark and have the worker verify it (an evaluation of the same parameters is resumed instead)."""
    form = EvaluationStartForm(request.POST)
    if not form.is_valid():
        for field, errors in form.errors.items():
            messages.error(request, f"No evaluation started: {form.fields[field].label or field}: {' '.join(errors)}")
        return redirect(reverse("evaluations:list"))
    try:
        evaluation, outcome = control.start(form.spec(), actor=request.user)
    except control.START_ERRORS as exc:
        messages.error(request, f"No evaluation started: {exc}")
        return redirect(reverse("evaluations:list"))
    if outcome in ("started", "resumed"):
        _with_the_worker(request, evaluation)
    else:
        messages.info(request, f"Evaluation {evaluation.name} with these parameters is {evaluation.get_status_display().lower()} "
                               "already; here it is.")
    return redirect(reverse("evaluations:detail", args=[evaluation.pk]))


@require_POST
@role_required(ADMIN)
def evaluation_resume(request: HttpRequest, pk: int) -> HttpResponse:
    evaluation = get_object_or_404(Evaluation, pk=pk)
    if control.resume(evaluation, actor=request.user):
        _with_the_worker(request, evaluation)
    else:
        messages.info(request, f"Evaluation {evaluation.name} is {evaluation.get_status_display().lower()}: nothing to resume.")
    return redirect(reverse("evaluations:detail", args=[pk]))


@require_POST
@role_required(ADMIN)
def evaluation_stop(request: HttpRequest, pk: int) -> HttpResponse:
    evaluation = get_object_or_404(Evaluation, pk=pk)
    outcome = control.stop(evaluation, actor=request.user)
    if outcome == "stopped":
        messages.success(request, f"Evaluation {evaluation.name} stops: no run is started for it any more (those under way "
                                  "finish and count); Resume verifies the rest.")
    elif outcome == "withdrawn":
        messages.success(request, f"Evaluation {evaluation.name} was waiting its turn with the worker; the worker will not "
                                  "drive it. Resume hands it back.")
    else:
        messages.info(request, f"Evaluation {evaluation.name} was not running.")
    return redirect(reverse("evaluations:detail", args=[pk]))


def _with_the_worker(request: HttpRequest, evaluation: Evaluation) -> None:
    messages.success(request, f"Evaluation {evaluation.name} is with the worker: {evaluation.items.count()} verification(s), "
                              "one at a time; this page follows its progress.")


@role_required(VIEWER)
def evaluation_detail(request: HttpRequest, pk: int) -> HttpResponse:
    evaluation = get_object_or_404(Evaluation.objects.select_related("kg"), pk=pk)
    figures = reports.current_metrics(evaluation)
    page = Paginator(reports.items(evaluation), ITEMS_PER_PAGE).get_page(request.GET.get("page"))
    headline = [{"heading": heading, "value": reports.fmt(reports.value(figures, key) if figures["n"] else None, kind)}
                for key, heading, kind in reports.COMPARED]  # nothing verified yet: no figure, not a zero
    headline.insert(1, {"heading": "Accuracy, 95% interval (over the triples)", "value": reports.accuracy_interval(figures)})
    confusion = [{"gold": gold, "counts": [figures["confusion"][gold][a] for a in metrics.ANSWER_CLASSES]}
                 for gold in ("true", "false")]
    return render(request, "verifier/evaluations/detail.html", {
        "evaluation": evaluation, "benchmark": reports.benchmark_title(evaluation), "figures": figures,
        "headline": headline, "confusion": confusion, "answer_names": list(charts.ANSWER_NAMES.values()),
        "relations": [{**r, "pct": reports.fmt(r["accuracy"])} for r in figures["per_relation"]],
        "tools": [{"tool": t, "calls": u["calls"], "pct": reports.fmt(u["share"])} for t, u in figures["efficiency"]["tool_usage"].items()],
        "calibration": reports.calibration_rows(figures.get("calibration")),
        "page": page, "others": Evaluation.objects.exclude(pk=pk).order_by("-created_at")[:200],
    })


@role_required(VIEWER)
def evaluation_chart(request: HttpRequest, pk: int, kind: str) -> HttpResponse:
    evaluation = get_object_or_404(Evaluation.objects.select_related("kg"), pk=pk)
    draw = charts.CHARTS.get(kind)
    if draw is None:
        raise Http404(f"no chart {kind!r}")
    figures = reports.current_metrics(evaluation)
    if kind == "reliability" and not figures.get("calibration"):
        raise Http404("no run of this evaluation has a confidence")
    figure = draw(figures, f"{evaluation.label} — {reports.benchmark_title(evaluation)}")
    return HttpResponse(charts.svg(figure), content_type="image/svg+xml")


@role_required(VIEWER)
def evaluation_compare(request: HttpRequest) -> HttpResponse:
    evaluations = Evaluation.objects.select_related("kg").order_by("-created_at", "-id")
    context = {"evaluations": evaluations[:500], "a": None, "b": None}
    ids = (get_id(request.GET, "a", hint="an evaluation id"), get_id(request.GET, "b", hint="an evaluation id"))
    if None not in ids:
        a, b = (get_object_or_404(Evaluation.objects.select_related("kg"), pk=pk) for pk in ids)
        comparison = reports.comparison(a, b)
        context.update(a=a, b=b, comparison=comparison, paired=reports.paired_line(comparison["triples"]),
                       a_benchmark=reports.benchmark_title(a), b_benchmark=reports.benchmark_title(b))
    return render(request, "verifier/evaluations/compare.html", context)


def _suite(name: str) -> list[Evaluation]:
    evaluations = reports.suite_evaluations(name)
    if not evaluations:
        raise Http404(f"no suite {name!r}")
    return evaluations


@role_required(VIEWER)
def suite_detail(request: HttpRequest, name: str) -> HttpResponse:
    evaluations = _suite(name)
    benchmarks, labels, cells = reports.table_cells(evaluations)
    by_cell = {(e.label, reports.benchmark_title(e)): e for e in evaluations}
    rows = []
    for label in labels:
        cells_row = []
        for benchmark in benchmarks:
            figures, evaluation = cells.get((label, benchmark)), by_cell.get((label, benchmark))
            cells_row.append({"evaluation": evaluation, "pending": figures.get("pending") if figures else 0,
                              "n": figures["n"] if figures else 0,
                              "values": [reports.fmt(figures.get(k)) if figures else ""
                                         for k in ("accuracy", "f1", "precision", "recall")]})
        rows.append({"label": label, "cells": cells_row})
    unfinished = any(cell["pending"] for row in rows for cell in row["cells"])
    return render(request, "verifier/evaluations/suite.html",
                  {"suite": name, "benchmarks": benchmarks, "rows": rows, "unfinished": unfinished})


@role_required(VIEWER)
def suite_chart(request: HttpRequest, name: str) -> HttpResponse:
    figure = charts.configuration_bars(reports.configuration_groups(_suite(name)))
    return HttpResponse(charts.svg(figure), content_type="image/svg+xml")


urlpatterns = [
    path("", evaluation_list, name="list"),
    path("compare/", evaluation_compare, name="compare"),
    path("start/", evaluation_start, name="start"),
    path("<int:pk>/resume/", evaluation_resume, name="resume"),
    path("<int:pk>/stop/", evaluation_stop, name="stop"),
    path("suite/<str:name>/", suite_detail, name="suite"),
    path("suite/<str:name>/configurations.svg", suite_chart, name="suite-chart"),
    path("<int:pk>/", evaluation_detail, name="detail"),
    path("<int:pk>/charts/<slug:kind>.svg", evaluation_chart, name="chart"),
]
