"""The probe's cases that need the real server (Daphne, tests/daphne_server.py), sent as an attacker sends them:

- bodies too large, or large and anonymous, refused before they are read: the test counts the bytes the server let
  the client send before its refusal arrived (a client that stops when the answer comes, over a socket whose send
  buffer is small), which must stay under 1 MB of a 50 MB upload;
- unrouted websocket paths refused at the handshake, with no traceback in the server's log;
- the same decision sent eight times at once (reviews, overrides, promotions): stored once, one audit event, one
  webhook delivery.
"""

from __future__ import annotations

import select
import socket
import threading
from urllib.parse import urlsplit

import pytest
import requests
from rest_framework.authtoken.models import Token

from tests.faults.tally import tally
from tests.http_fixtures import LocalHTTPServer, Reply
from tests.verifier.web.run_pages import make_finished_run, make_world
from tests.workers import wait_for
from verifier.models import AuditEvent, MemoryEntry, Review, Webhook, WebhookDelivery

pytestmark = pytest.mark.django_db(transaction=True)  # the server is another process: it sees committed rows

COUNTS = tally("Live server", "requests_sent", "refused_before_1_MB", "stored_once", "5xx", "tracebacks")
MB = 1024 * 1024
CHUNK = 64 * 1024


@pytest.fixture(autouse=True)
def no_tracebacks(daphne_server):
    """Nothing a test sends makes the server log a traceback."""
    before = daphne_server.log_text().count("Traceback")
    yield
    logged = daphne_server.log_text().count("Traceback") - before
    COUNTS["tracebacks"] += logged
    assert logged == 0, daphne_server.log_text()[-3000:]


def _send_until_answered(daphne_server, path: str, headers: dict[str, str], size: int, *, chunked: bool = False):
    """POST ``size`` bytes in 64 kB chunks, stopping as soon as an answer can be read: (status, answer, bytes sent)."""
    port = urlsplit(daphne_server.url).port
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, CHUNK)
        lines = [f"POST {path} HTTP/1.1", f"Host: 127.0.0.1:{port}", *(f"{name}: {value}" for name, value in headers.items())]
        lines.append("Transfer-Encoding: chunked" if chunked else f"Content-Length: {size}")
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        sent, block = 0, b"-" * CHUNK
        while sent < size and not select.select([sock], [], [], 0.005)[0]:
            part = block[: min(CHUNK, size - sent)]
            try:
                sock.sendall(b"%x\r\n%b\r\n" % (len(part), part) if chunked else part)
            except (BrokenPipeError, ConnectionResetError):  # the server answered and closed
                break
            sent += len(part)
        answer = b""
        try:
            while data := sock.recv(65536):
                answer += data
        except (ConnectionResetError, TimeoutError):
            pass
    COUNTS["requests_sent"] += 1
    status = int(answer.split(b" ", 2)[1]) if answer.startswith(b"HTTP/1.1 ") else 0
    COUNTS["5xx"] += status >= 500
    return status, answer, sent


UPLOAD = {"Content-Type": "multipart/form-data; boundary=x"}


@pytest.mark.parametrize("path, headers, size, status, message", [
    ("/import/", UPLOAD, 50 * MB, 413, b"larger than 20 MB"),
    ("/api/tasks/import/", UPLOAD, 50 * MB, 413, b'"code": "too_large"'),
    ("/api/tasks/import/", UPLOAD, 19 * MB, 401, b"Sign in (or send an API token) before uploading"),
    ("/api/runs/", {"Content-Type": "application/json"}, 5 * MB, 413, b"other than a file upload"),
    ("/api/tasks/import/", {**UPLOAD, "Cookie": "sessionid=forged"}, 50 * MB, 413, b"larger than 20 MB"),
])
def test_a_large_anonymous_body_is_refused_before_1_mb_of_it_is_read(daphne_server, path, headers, size, status, message):
    answered, answer, sent = _send_until_answered(daphne_server, path, headers, size)
    assert answered == status and message in answer, answer[:500]
    assert sent < MB, f"the server took {sent:,} bytes before refusing"
    COUNTS["refused_before_1_MB"] += 1


def test_a_body_without_a_length_is_cut_off_once_it_passes_the_anonymous_limit(daphne_server):
    answered, answer, sent = _send_until_answered(daphne_server, "/api/tasks/import/", UPLOAD, 50 * MB, chunked=True)
    assert answered == 401 and b"not_authenticated" in answer, answer[:500]
    assert sent < 3 * MB  # the anonymous limit is 2.5 MB


def test_a_signed_in_upload_still_reaches_its_view_whole(daphne_server, make_user):
    token = Token.objects.create(user=make_user("curator")).key
    world = make_world()
    body = "".join(f"Claim number {number}.\n" for number in range(150_000))  # about 3 MB: over the in-memory limit
    response = requests.post(f"{daphne_server.url}/api/claims/import/", headers={"Authorization": f"Token {token}"},
                             data={"kg": world.kg.pk}, files={"file": ("claims.txt", body.encode())}, timeout=60)
    COUNTS["requests_sent"] += 1
    # The view read the whole file: it names the KG (not loaded) or counts the claims; neither 401 nor 413.
    assert response.status_code == 400 and "kg" in response.json()["error"]["details"], response.text[:500]


@pytest.mark.parametrize("path", ["/ws/", "/ws/runs/abc/", "/ws/runs/1/extra/"])
def test_an_unrouted_websocket_path_is_refused_at_the_handshake_without_a_traceback(daphne_server, path):
    port = urlsplit(daphne_server.url).port
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall((f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                      f"Origin: http://127.0.0.1:{port}\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                      "Sec-WebSocket-Version: 13\r\n\r\n").encode())
        status_line = sock.recv(4096).split(b"\r\n", 1)[0]
    COUNTS["requests_sent"] += 1
    assert status_line.startswith(b"HTTP/1.1 403"), status_line


# ---- the same decision, eight times at once ------------------------------------------------------------------

def _at_once(times: int, send) -> list[requests.Response]:
    """``send()`` from ``times`` threads released together."""
    barrier, answers, lock = threading.Barrier(times), [], threading.Lock()

    def worker():
        barrier.wait()
        response = send()
        with lock:
            answers.append(response)

    threads = [threading.Thread(target=worker) for _ in range(times)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    COUNTS["requests_sent"] += len(answers)
    COUNTS["5xx"] += sum(answer.status_code >= 500 for answer in answers)
    return answers


@pytest.fixture
def receiver():
    with LocalHTTPServer() as server:
        server.route("/hook", Reply({"ok": True}))
        yield server


def test_eight_identical_decisions_at_once_are_stored_once_with_one_audit_event_and_one_webhook(daphne_server, make_user,
                                                                                               receiver):
    run = make_finished_run(make_world())
    Webhook.objects.create(url=receiver.url + "/hook")
    token = Token.objects.create(user=make_user("reviewer")).key
    session = requests.Session()
    session.headers["Authorization"] = f"Token {token}"

    def post(path: str, body: dict):
        return lambda: session.post(f"{daphne_server.url}{path}", json=body, timeout=120)

    for decision, body in (("accept", {"decision": "accept"}),
                           ("override", {"decision": "override", "reason": "The KG says otherwise.", "verdict": "incorrect"})):
        answers = _at_once(8, post(f"/api/runs/{run.pk}/reviews/", body))
        assert [answer.status_code for answer in answers] == [201] * 8, [answer.text[:300] for answer in answers]
        assert len({answer.json()["id"] for answer in answers}) == 1
        assert Review.objects.filter(run=run, decision=decision).count() == 1
        assert AuditEvent.objects.filter(action=f"review.{decision}").count() == 1
        COUNTS["stored_once"] += 1
    assert WebhookDelivery.objects.filter(event="review.recorded").count() == 2  # one per decision

    answers = _at_once(8, post(f"/api/runs/{run.pk}/promote/", {}))
    assert [answer.status_code for answer in answers] == [201] * 8, [answer.text[:300] for answer in answers]
    assert MemoryEntry.objects.filter(source_run=run).count() == 1
    assert AuditEvent.objects.filter(action="memory.promote").count() == 1
    assert WebhookDelivery.objects.filter(event="memory.promoted").count() == 1
    COUNTS["stored_once"] += 1

    again = session.post(f"{daphne_server.url}/api/runs/{run.pk}/reviews/", json={"decision": "accept"}, timeout=60)
    assert again.status_code == 201 and Review.objects.filter(run=run).count() == 3  # a new decision after the override
    wait_for(lambda: len(receiver.requests) == 4, 60, "the four webhook deliveries")
