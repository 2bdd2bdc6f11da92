"""Pages outside the workbench areas (those live in ``verifier.web``)."""

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render

from verifier import health as health_checks
from verifier.api.errors import error_body
from verifier.roles import ADMIN, VIEWER, has_role


def workbench_status(request: HttpRequest) -> JsonResponse:
    """The page header's service line (static/kgv/status.js): model answering, runs queued and running."""
    if not has_role(request.user, VIEWER):  # like every page: signed in, with a role
        message = "this needs the viewer role" if request.user.is_authenticated else "sign in to see the workbench status"
        return JsonResponse(error_body("permission_denied", message), status=403)
    return JsonResponse(health_checks.workbench_status())


def health(request: HttpRequest) -> HttpResponse:
    """Service status: the full report (services, worker, structural models) for administrators, a cheap
    liveness answer for everyone else (load balancers); JSON by default, a page for browsers."""
    user = request.user
    full = user.is_authenticated and (user.is_staff or has_role(user, ADMIN))
    report = health_checks.check_all() if full else health_checks.liveness()
    status = 200 if report["ok"] else 503
    if "text/html" in request.headers.get("Accept", "") and request.GET.get("format") != "json":
        return render(request, "verifier/health.html", report, status=status)
    return JsonResponse(report, status=status)
