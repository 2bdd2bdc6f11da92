"""Requests refused before any view reads them."""

from __future__ import annotations

import re

from django.conf import settings
from django.http import HttpResponse, JsonResponse

_JSON_NUL = re.compile(rb"\\u0000", re.IGNORECASE)
MESSAGE = "The request contains a NUL character (\\u0000), which no text field accepts."


def _refusal(request, status: int, code: str, message: str) -> HttpResponse:
    """The API's one error shape under /api/, plain text elsewhere."""
    if request.path.startswith("/api/"):
        from verifier.api.errors import error_body

        return JsonResponse(error_body(code, message), status=status)
    return HttpResponse(message, status=status, content_type="text/plain; charset=utf-8")


class RejectNulMiddleware:
    """A NUL character in a query parameter, a form field or a JSON body is refused with a 400: PostgreSQL
    cannot store or compare text holding one, so letting it through would end in a server error. Uploaded
    files are not read here; the import readers report their NUL bytes by line."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if self._carries_nul(request):
            return _refusal(request, 400, "invalid", MESSAGE)
        return self.get_response(request)

    @staticmethod
    def _carries_nul(request) -> bool:
        if "\x00" in request.META.get("QUERY_STRING", "") or "%00" in request.META.get("QUERY_STRING", ""):
            return True
        content_type = request.META.get("CONTENT_TYPE", "")
        if content_type.startswith("application/json"):
            return b"\x00" in request.body or bool(_JSON_NUL.search(request.body))
        if content_type.startswith("application/x-www-form-urlencoded") and request.method == "POST":
            return any("\x00" in value for values in request.POST.lists() for value in values[1])
        return False




class RequestSizeGate:
    """Large bodies are judged by their headers, before a byte of them is read: over KGV_MAX_UPLOAD_BYTES
    they are refused (413); over Django's in-memory limit (an upload) they need a signed-in caller — a
    session or a valid API token — or they are refused (401) instead of being spooled to disk first."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        try:
            length = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            return _refusal(request, 400, "invalid", "The Content-Length header is not a number.")
        limit = settings.KGV_MAX_UPLOAD_BYTES
        if length > limit:
            return _refusal(request, 413, "too_large", f"The request body is larger than {limit // (1024 * 1024)} MB.")
        if length > settings.DATA_UPLOAD_MAX_MEMORY_SIZE and not self._signed_in(request):
            return _refusal(request, 401, "not_authenticated", "Sign in (or send an API token) before uploading.")
        return self.get_response(request)

    @staticmethod
    def _signed_in(request) -> bool:
        if request.user.is_authenticated:
            return True
        scheme, _, key = request.META.get("HTTP_AUTHORIZATION", "").partition(" ")
        if scheme.lower() != "token" or not key.strip():
            return False
        from rest_framework.authtoken.models import Token

        return Token.objects.filter(key=key.strip(), user__is_active=True).exists()
