"""Pages answer a request they cannot carry out — a query parameter that is not an id, a value they refuse, a form
with too many fields — with a 400 saying why, as the API does with its error shape: an ``ApplicationError`` a view
leaves uncaught becomes that page here (the small JSON views the pages poll answer in the API's error shape)."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render

from verifier.api.errors import error_body
from verifier.errors import ApplicationError, body_refusal
from verifier.params import ParameterError


class ApplicationErrorPages:
    """Middleware: an uncaught ``ApplicationError`` outside /api/ (DRF answers those) becomes a 400."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exc: Exception) -> HttpResponse | None:
        if request.path.startswith("/api/"):
            return None
        if refused := body_refusal(exc):  # a form with too many fields or files
            status, _, message = refused
            return render(request, "400.html", {"message": message.rstrip(".")}, status=status)
        if not isinstance(exc, ApplicationError):
            return None
        message = str(exc).rstrip(".")
        if request.path.endswith(".json"):
            details = {exc.param: [str(exc)]} if isinstance(exc, ParameterError) else None
            return JsonResponse(error_body("invalid", str(exc), details), status=400)
        return render(request, "400.html", {"message": message}, status=400)
