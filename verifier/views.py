"""Pages outside the workbench areas (those live in ``verifier.web``)."""

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render

from verifier import health as health_checks


def health(request: HttpRequest) -> HttpResponse:
    """Service status for operators and load balancers: JSON by default, a page for browsers."""
    report = health_checks.check_all()
    status = 200 if report["ok"] else 503
    if "text/html" in request.headers.get("Accept", "") and request.GET.get("format") != "json":
        return render(request, "verifier/health.html", report, status=status)
    return JsonResponse(report, status=status)
