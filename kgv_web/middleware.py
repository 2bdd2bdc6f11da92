"""Requests refused before any view reads them (request sizes are limited earlier still, in kgv_web/request_limits.py),
and the Content-Security-Policy every answer carries."""

from __future__ import annotations

import re

from django.core.exceptions import SuspiciousOperation
from django.http import HttpResponse

from kgv_web.request_limits import Refusal, refusal_content
from verifier.errors import body_refusal

_JSON_NUL = re.compile(rb"\\u0000", re.IGNORECASE)
MESSAGE = "The request contains a NUL character (\\u0000), which no text field accepts."


def _refusal(request, status: int, code: str, message: str) -> HttpResponse:
    content_type, body = refusal_content(request.path, Refusal(status, code, message))
    return HttpResponse(body, status=status, content_type=content_type)


class RejectNulMiddleware:
    """A NUL character in a query parameter, a form field or a JSON body is refused with a 400: PostgreSQL
    cannot store or compare text holding one, so letting it through would end in a server error. Uploaded
    files are not read here; the import readers report their NUL bytes by line."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        try:
            carries_nul = self._carries_nul(request)
        except SuspiciousOperation as exc:  # a body Django will not parse: too many fields, too large
            if (refused := body_refusal(exc)) is None:
                raise
            return _refusal(request, *refused)
        if carries_nul:
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


# Scripts only from KGV's own files: no inline script or event handler runs, so markup that slipped through escaping
# could not execute. Inline styles stay allowed (style attributes that size bars, the report's stylesheet), which
# cannot run code.
CONTENT_SECURITY_POLICY = "; ".join([
    "default-src 'self'",
    "script-src 'self'",
    "style-src 'self' 'unsafe-inline'",
    "img-src 'self' data:",
    "connect-src 'self'",  # includes the page's own ws:// and wss:// origin
    "object-src 'none'",
    "base-uri 'self'",
    "form-action 'self'",
    "frame-ancestors 'none'",
])


class ContentSecurityPolicyMiddleware:
    """Every HTML answer carries CONTENT_SECURITY_POLICY (files — exports, charts, JSON — need none)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        if response.get("Content-Type", "").startswith("text/html"):
            response.headers.setdefault("Content-Security-Policy", CONTENT_SECURITY_POLICY)
        return response
