"""Daphne, KGV's server, receives a request's whole body (Twisted stores it in memory or a temporary file) before it
calls the application, so an ASGI middleware alone would refuse a 50 MB upload only once 50 MB had arrived.

``install()`` (called by kgv_web/asgi.py) teaches Daphne's request the rules of kgv_web/request_limits.py that the
headers decide: as soon as the headers of a request are in, one those rules refuse (a Content-Length over the
limit, or a large body with no credentials at all) is handed to the application at once with its body unread —
``RequestLimits`` then answers it from the headers — and the connection closes after the answer instead of reading
on. A body sent without a Content-Length (chunked) is counted as it arrives and cut off with the same refusal once
it passes a limit. Twisted's parsing of form bodies, which Daphne never uses, is switched off. Everything else is
served exactly as before.
"""

from __future__ import annotations

import logging

from kgv_web.request_limits import carries_credentials, is_upload, raw_response, refusal_for, refusal_from_headers

logger = logging.getLogger(__name__)


def _headers(request) -> list[tuple[bytes, bytes]]:
    return [(name.lower(), value) for name, values in request.requestHeaders.getAllRawHeaders() for value in values]


def install() -> None:
    """Patch Daphne's request class (once; nothing happens when Daphne is not installed)."""
    try:
        from daphne.http_protocol import WebRequest
    except ImportError:  # served by another ASGI server: RequestLimits alone applies
        return
    if getattr(WebRequest, "kgv_limits", False):
        return
    got_length, handle_chunk = WebRequest.gotLength, WebRequest.handleContentChunk

    def gotLength(self, length):  # noqa: N802 - Twisted's name
        got_length(self, length)
        self.kgv_received = 0
        # Twisted would also parse every form body into ``args`` (a second copy of an upload in memory, and more);
        # Daphne never reads them: it hands the application the raw body.
        self._parsePOSTFormSubmission = False
        if length and refusal_from_headers(_headers(self)) is not None:
            # Twisted takes a request whose length is 0 as complete and processes it at once; the body behind it
            # is only buffered (a few kB, then the socket is paused) and dropped when the connection closes.
            self.channel.length = 0
            self.channel.persistent = False
            self.requestHeaders.removeHeader(b"expect")  # no "100 Continue" invites the body

    def handleContentChunk(self, data):  # noqa: N802 - Twisted's name
        if getattr(self, "kgv_cut_off", False):
            return
        self.kgv_received = getattr(self, "kgv_received", 0) + len(data)
        if self.channel is not None and self.channel.length is None:  # no Content-Length: count what arrives
            headers = _headers(self)
            refusal = refusal_for(self.kgv_received, signed_in=carries_credentials(headers), upload=is_upload(headers))
            if refusal is not None:
                self.kgv_cut_off = True
                path = getattr(self.channel, "_path", b"").decode("ascii", "replace")  # the request line's path
                logger.info("refused a body without Content-Length after %s bytes: %s", self.kgv_received, refusal.message)
                self.channel.transport.write(raw_response(path, refusal))
                self.channel.transport.loseConnection()
                return
        handle_chunk(self, data)

    WebRequest.gotLength, WebRequest.handleContentChunk = gotLength, handleContentChunk
    WebRequest.kgv_limits = True
