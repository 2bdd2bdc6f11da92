from django.contrib.auth.decorators import login_required
from django.db.models import Count
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render

from verifier import health as health_checks
from verifier.models import KnowledgeGraph, VerificationTask


def health(request: HttpRequest) -> HttpResponse:
    """Service status for operators and load balancers: JSON by default, a page for browsers."""
    report = health_checks.check_all()
    status = 200 if report["ok"] else 503
    if "text/html" in request.headers.get("Accept", "") and request.GET.get("format") != "json":
        return render(request, "verifier/health.html", report, status=status)
    return JsonResponse(report, status=status)


@login_required
def home(request: HttpRequest) -> HttpResponse:
    graphs = list(KnowledgeGraph.objects.order_by("name"))
    for graph in graphs:  # a handful of graphs; one indexed count each beats a join across all tables
        graph.entity_count = graph.entities.count()
        graph.triple_count = graph.triples.count()
        graph.passage_count = graph.passages.count()
    task_counts = dict(
        VerificationTask.objects.values_list("status").annotate(n=Count("id")).values_list("status", "n")
    )
    return render(request, "verifier/home.html", {"graphs": graphs, "task_counts": task_counts})
