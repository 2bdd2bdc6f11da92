"""Request bodies refused before anyone reads them: ``RequestLimits`` wraps the whole ASGI application.

- A body over ``KGV_MAX_UPLOAD_BYTES`` is refused with 413, whoever sends it: from its Content-Length header before
  a byte of it is read, and, for a body sent without one (chunked), as soon as the bytes received pass the limit.
- A body over Django's in-memory limit (``DATA_UPLOAD_MAX_MEMORY_SIZE``, 2.5 MB) must be an upload
  (multipart/form-data; Django refuses any other body that large) from a signed-in caller — a session or a valid
  API token: otherwise it is refused (413, or 401 for an anonymous upload), again from the header or while it streams.
- A Content-Length that is not a number is a 400.

Django's ASGI handler reads the whole body before the first middleware runs, so these rules cannot live in Django's
middleware. Daphne receives a body before it calls the application at all; kgv_web/daphne_limits.py hands it the
requests these rules refuse from their headers at once, unread. Refusals come in the API's error shape under
/api/, as plain text elsewhere, and close the connection (the unread body must not be taken for a next request).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from http import HTTPStatus
from importlib import import_module
from types import SimpleNamespace

from channels.db import database_sync_to_async
from django.conf import settings
from django.contrib.auth import get_user
from django.http.cookie import parse_cookie
from rest_framework.authtoken.models import Token

from verifier.api.errors import error_body


@dataclass(frozen=True)
class Refusal:
    status: int
    code: str
    message: str


INVALID_LENGTH = Refusal(400, "invalid", "The Content-Length header is not a number.")
ANONYMOUS_UPLOAD = Refusal(401, "not_authenticated", "Sign in (or send an API token) before uploading.")


def _megabytes(size: int) -> str:
    return f"{size / (1024 * 1024):g} MB"


def refusal_for(size: int, *, signed_in: bool, upload: bool) -> Refusal | None:
    """What a body of ``size`` bytes (declared, or received so far) is refused with, if anything. Only an upload
    (multipart/form-data) may be larger than Django's in-memory limit, which Django enforces on any other body."""
    if size > settings.KGV_MAX_UPLOAD_BYTES:
        return Refusal(413, "too_large", f"The request body is larger than {_megabytes(settings.KGV_MAX_UPLOAD_BYTES)}.")
    if size <= settings.DATA_UPLOAD_MAX_MEMORY_SIZE:
        return None
    if not upload:
        return Refusal(413, "too_large", f"A request body other than a file upload is limited to "
                                         f"{_megabytes(settings.DATA_UPLOAD_MAX_MEMORY_SIZE)}.")
    return None if signed_in else ANONYMOUS_UPLOAD


def is_upload(headers: list[tuple[bytes, bytes]]) -> bool:
    return (header(headers, b"content-type") or "").lower().lstrip().startswith("multipart/form-data")


def header(headers: list[tuple[bytes, bytes]], name: bytes) -> str | None:
    for key, value in headers:
        if key.lower() == name:
            return value.decode("latin-1")
    return None


def declared_length(headers: list[tuple[bytes, bytes]]) -> int | None:
    """The Content-Length, None without one; ValueError when it is not a number."""
    value = header(headers, b"content-length")
    if value is None:
        return None
    value = value.strip()
    if not (value.isascii() and value.isdecimal()):
        raise ValueError(value)
    return int(value) if len(value) <= 18 else 10**18  # more digits than any limit: too large, not unreadable


def carries_credentials(headers: list[tuple[bytes, bytes]]) -> bool:
    """Whether the request comes with a session cookie or an Authorization header at all (valid or not)."""
    if header(headers, b"authorization"):
        return True
    return bool(parse_cookie(header(headers, b"cookie") or "").get(settings.SESSION_COOKIE_NAME))


def refusal_from_headers(headers: list[tuple[bytes, bytes]]) -> Refusal | None:
    """The refusal the headers alone decide: an invalid or too large Content-Length, or a large body that comes with
    no credentials at all. (A large body with credentials waits for them to be checked: ``RequestLimits``.)"""
    try:
        length = declared_length(headers)
    except ValueError:
        return INVALID_LENGTH
    if length is None:
        return None
    return refusal_for(length, signed_in=carries_credentials(headers), upload=is_upload(headers))


@database_sync_to_async
def signed_in(headers: list[tuple[bytes, bytes]]) -> bool:
    """Whether the credentials name an active user: a valid API token, else a valid session."""
    scheme, _, key = (header(headers, b"authorization") or "").partition(" ")
    if scheme.lower() == "token" and key.strip():
        return Token.objects.filter(key=key.strip(), user__is_active=True).exists()
    session_key = parse_cookie(header(headers, b"cookie") or "").get(settings.SESSION_COOKIE_NAME)
    if not session_key:
        return False
    session = import_module(settings.SESSION_ENGINE).SessionStore(session_key)
    user = get_user(SimpleNamespace(session=session))
    return bool(user.is_authenticated and user.is_active)


def refusal_content(path: str, refusal: Refusal) -> tuple[str, bytes]:
    """Content type and body of a refusal: the API's error shape under /api/, plain text elsewhere."""
    if path.startswith("/api/"):
        return "application/json", json.dumps(error_body(refusal.code, refusal.message)).encode()
    return "text/plain; charset=utf-8", refusal.message.encode()


def refusal_response(path: str, refusal: Refusal) -> tuple[list[tuple[bytes, bytes]], bytes]:
    """Headers and body of a refusal that leaves the body unread: the connection closes after it."""
    content_type, body = refusal_content(path, refusal)
    return [(b"content-type", content_type.encode()), (b"content-length", str(len(body)).encode()),
            (b"connection", b"close")], body


def raw_response(path: str, refusal: Refusal) -> bytes:
    """The refusal as HTTP/1.1 bytes, for a server that has to answer before the application is called."""
    headers, body = refusal_response(path, refusal)
    lines = [f"HTTP/1.1 {refusal.status} {HTTPStatus(refusal.status).phrase}".encode()]
    lines += [name + b": " + value for name, value in headers]
    return b"\r\n".join(lines) + b"\r\n\r\n" + body


class RequestLimits:
    """ASGI middleware around the whole application (kgv_web/asgi.py): the rules of the module docstring."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = scope.get("headers", [])
        refusal = refusal_from_headers(headers)
        if refusal is None and (declared_length(headers) or 0) > settings.DATA_UPLOAD_MAX_MEMORY_SIZE:
            refusal = refusal_for(declared_length(headers), signed_in=await signed_in(headers), upload=True)
        if refusal is not None:
            return await self._refuse(scope, send, refusal)
        await self.app(scope, *self._counting(scope, receive, send, headers))

    def _counting(self, scope, receive, send, headers):
        """``receive`` counting the body's bytes (refusing past a limit: the application then sees a disconnect) and
        ``send`` dropping what the application says after a refusal."""
        state = {"received": 0, "refused": False, "started": False, "signed_in": None}
        upload = is_upload(headers)

        async def counted_receive():
            if state["refused"]:
                return {"type": "http.disconnect"}
            message = await receive()
            if message["type"] != "http.request":
                return message
            state["received"] += len(message.get("body", b""))
            if upload and state["received"] > settings.DATA_UPLOAD_MAX_MEMORY_SIZE and state["signed_in"] is None:
                state["signed_in"] = await signed_in(headers)
            refusal = refusal_for(state["received"], signed_in=bool(state["signed_in"]), upload=upload)
            if refusal is None:
                return message
            state["refused"] = True
            if not state["started"]:
                await self._refuse(scope, send, refusal)
            return {"type": "http.disconnect"}

        async def guarded_send(message):
            if state["refused"]:
                return
            if message["type"] == "http.response.start":
                state["started"] = True
            await send(message)

        return counted_receive, guarded_send

    @staticmethod
    async def _refuse(scope, send, refusal: Refusal) -> None:
        headers, body = refusal_response(scope.get("path", ""), refusal)
        await send({"type": "http.response.start", "status": refusal.status, "headers": headers})
        await send({"type": "http.response.body", "body": body})
