"""A real HTTP server on 127.0.0.1 for tests of HTTP clients: canned responses, recorded requests, faults.

    with LocalHTTPServer() as server:
        server.route("/search", {"results": []})            # JSON body, 200
        server.route("/api.php", lambda request: Reply(...))  # computed from the request
        server.fail_next(500, times=2)                      # the next two requests get a 500
        server.delay_next(1.0)                              # the next request answers after 1 s
        server.malformed_next()                             # the next request gets a non-JSON body
        ...client calls server.url + "/search?q=x"...
        server.requests[-1].param("q")

Faults are consumed one per request, in the order they were queued, before routing.
"""

from __future__ import annotations

import json
import socket
import sys
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]  # names lower-cased
    body: bytes = b""

    def json(self) -> Any:
        return json.loads(self.body)

    def param(self, name: str) -> str | None:
        values = self.query.get(name)
        return values[0] if values else None

    def header(self, name: str) -> str | None:
        return self.headers.get(name.lower())


@dataclass(frozen=True)
class Reply:
    body: bytes | str | dict | list = b""
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0  # seconds to wait before answering

    def encoded(self) -> tuple[bytes, str]:
        if isinstance(self.body, dict | list):
            return json.dumps(self.body).encode(), "application/json; charset=utf-8"
        if isinstance(self.body, str):
            return self.body.encode(), "text/plain; charset=utf-8"
        return self.body, "application/octet-stream"


Responder = Reply | Callable[[RecordedRequest], Reply]
MALFORMED_BODY = b"<html><body><h1>502 Bad Gateway</h1></body></html>"


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False  # a handler still sleeping in a delay fault must not hold up teardown

    def handle_error(self, request, client_address) -> None:
        # Clients that time out hang up mid-reply; that is the scenario under test, not a failure to report.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class LocalHTTPServer:
    def __init__(self) -> None:
        self._routes: dict[str, Responder] = {}
        self._faults: deque[Reply] = deque()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self.requests: list[RecordedRequest] = []
        self._server = _Server(("127.0.0.1", 0), self._handler_class())
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> LocalHTTPServer:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stopping.set()  # wakes handlers sleeping in a delay
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    # -- configuration -------------------------------------------------------------------------------------

    def route(self, path: str, response: Responder | dict | list | str | bytes, *, status: int = 200) -> None:
        """Serve `response` at `path` (any query string). A callable gets the request and returns a Reply."""
        if not isinstance(response, Reply) and not callable(response):
            response = Reply(response, status=status)
        with self._lock:
            self._routes[path] = response

    def fail_next(self, status: int, *, times: int = 1, body: bytes | str | dict = b"", headers: dict[str, str] | None = None) -> None:
        self._queue(Reply(body, status=status, headers=headers or {}), times)

    def delay_next(self, seconds: float, *, times: int = 1) -> None:
        """The next requests are answered normally (by their route), but only after `seconds`."""
        self._queue(Reply(b"", status=0, delay=seconds), times)

    def malformed_next(self, *, times: int = 1, body: bytes = MALFORMED_BODY, status: int = 200) -> None:
        self._queue(Reply(body, status=status, headers={"Content-Type": "application/json"}), times)

    def _queue(self, reply: Reply, times: int) -> None:
        with self._lock:
            self._faults.extend([reply] * times)

    # -- serving -------------------------------------------------------------------------------------------

    def _respond(self, request: RecordedRequest) -> Reply:
        with self._lock:
            self.requests.append(request)
            fault = self._faults.popleft() if self._faults else None
            route = self._routes.get(request.path)
        if fault is not None and fault.delay:
            self._stopping.wait(fault.delay)
            fault = None  # after the delay, answer as usual (the client has usually given up by then)
        if fault is not None:
            return fault
        if route is None:
            return Reply({"error": f"no route for {request.path}"}, status=404)
        return route(request) if callable(route) else route

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                self._answer("GET")

            def do_POST(self) -> None:
                self._answer("POST")

            def _answer(self, method: str) -> None:
                parts = urlsplit(self.path)
                length = int(self.headers.get("Content-Length") or 0)
                request = RecordedRequest(
                    method=method,
                    path=parts.path,
                    query=parse_qs(parts.query, keep_blank_values=True),
                    headers={name.lower(): value for name, value in self.headers.items()},
                    body=self.rfile.read(length) if length else b"",
                )
                reply = owner._respond(request)
                body, content_type = reply.encoded()
                self.send_response(reply.status)
                headers = {"Content-Type": content_type, **reply.headers, "Content-Length": str(len(body))}
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
                pass

        return Handler


def refused_url() -> str:
    """An http URL on 127.0.0.1 where nothing listens (the port was free a moment ago)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}"
