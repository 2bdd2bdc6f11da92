"""One error shape for every API error: ``{"error": {"code": ..., "message": ..., "details": ...}}``.

- ``code``: a stable machine-readable word (``invalid``, ``not_authenticated``, ``permission_denied``,
  ``not_found``, ``method_not_allowed``, ``conflict``, ``rejected``, ``import_rejected``, …);
- ``message``: one sentence for a person;
- ``details``: per-field messages of a validation error, the bad rows of an import (the first 100, with their
  ``count``), otherwise null.

Services raise an ``ApplicationError`` (``ReviewRejected``, ``ImportRejected``, ``ParameterError``, …) for
requests they cannot carry out; those become 4xx here, so views never translate them one by one. Any other
exception is a defect: a 500 through Django's normal reporting (logged with its traceback).
"""

from __future__ import annotations

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.http import Http404
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler

from verifier.confidence import Unweighed
from verifier.errors import MAX_LISTED_PROBLEMS, ApplicationError, body_refusal, listed
from verifier.kg.loader import ImportRejected
from verifier.params import ParameterError
from verifier.services import ReviewRejected, TaskBusy


class Conflict(exceptions.APIException):
    """The request is valid but the object's state does not allow it (e.g. cancelling a finished run)."""

    status_code = status.HTTP_409_CONFLICT
    default_detail = "The request conflicts with the current state of the object."
    default_code = "conflict"


def error_body(code: str, message: str, details=None) -> dict:
    return {"error": {"code": code, "message": message, "details": details}}


def _application_error(exc: ApplicationError) -> Response:
    if isinstance(exc, ImportRejected):
        count = len(exc.problems)
        rows = [{"line": p.line, "message": p.message} for p in listed(exc.problems)]
        message = f"{count} bad row(s); nothing was imported." + (f" The first {len(rows)} are listed." if count > len(rows) else "")
        return Response(error_body("import_rejected", message, {"rows": rows, "count": count}),
                        status=status.HTTP_400_BAD_REQUEST)
    if isinstance(exc, ParameterError):
        return Response(error_body("invalid", str(exc), {exc.param: [str(exc)]}), status=status.HTTP_400_BAD_REQUEST)
    if isinstance(exc, (TaskBusy, Unweighed)):  # valid, but not while the task or the installation is in this state
        return Response(error_body("conflict", str(exc)), status=status.HTTP_409_CONFLICT)
    code = "rejected" if isinstance(exc, ReviewRejected) else "invalid"
    return Response(error_body(code, str(exc)), status=status.HTTP_400_BAD_REQUEST)


def _capped(details, depth: int = 0):
    """Validation details with every list and object of problems cut to MAX_LISTED_PROBLEMS entries (a list of 100,000
    bad ids is 100,000 messages), the rest counted in a last entry."""
    if depth > 3:
        return details
    if isinstance(details, dict):
        items = list(details.items())
        kept = {key: _capped(value, depth + 1) for key, value in items[:MAX_LISTED_PROBLEMS]}
        if len(items) > MAX_LISTED_PROBLEMS:
            kept["…"] = [f"and {len(items) - MAX_LISTED_PROBLEMS} more problems"]
        return kept
    if isinstance(details, list) and len(details) > MAX_LISTED_PROBLEMS:
        return [_capped(item, depth + 1) for item in details[:MAX_LISTED_PROBLEMS]] + [
            f"and {len(details) - MAX_LISTED_PROBLEMS} more problems"]
    if isinstance(details, list):
        return [_capped(item, depth + 1) for item in details]
    return details


def _message(exc: exceptions.APIException) -> str:
    if isinstance(exc, exceptions.ValidationError):
        details = exc.detail
        if isinstance(details, dict) and len(details) == 1:
            field, messages = next(iter(details.items()))
            first = messages[0] if isinstance(messages, list) and messages else messages
            if isinstance(first, str):
                return f"Invalid input: {field}: {first}" if field != "non_field_errors" else f"Invalid input: {first}"
        if isinstance(details, list) and details and isinstance(details[0], str):
            return f"Invalid input: {details[0]}"
        return "Invalid input."
    return str(exc.detail)


def api_exception_handler(exc, context):
    """DRF's EXCEPTION_HANDLER: DRF's own handling (status, headers such as WWW-Authenticate), our shape."""
    if isinstance(exc, ApplicationError):
        return _application_error(exc)
    if refused := body_refusal(exc):  # too many fields or files: Django would answer HTML and log a traceback
        status_code, code, message = refused
        return Response(error_body(code, message), status=status_code)
    if isinstance(exc, Http404):
        exc = exceptions.NotFound(str(exc) or None)
    elif isinstance(exc, DjangoPermissionDenied):
        exc = exceptions.PermissionDenied(str(exc) or None)
    response = exception_handler(exc, context)
    if response is None:
        return None  # an unexpected error: a 500 through Django's normal reporting
    if isinstance(exc, exceptions.ValidationError):
        code, details = "invalid", _capped(exc.detail)
    else:
        codes = exc.get_codes()
        code, details = (codes if isinstance(codes, str) else exc.default_code), None
    response.data = error_body(code, _message(exc), details)
    return response
