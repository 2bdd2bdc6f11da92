"""Large bodies are refused before anyone reads them, by the ASGI guard around the whole application
(kgv_web/request_limits.py): from the Content-Length header, and for a body sent without one while it streams.
The application is driven as Daphne drives it (ASGI messages); a refusal that comes before any body message was
sent proves nothing of the body was read. (tests/faults/test_hostile_requests.py measures it on a real Daphne.)"""

from __future__ import annotations

import asyncio

import pytest
from asgiref.testing import ApplicationCommunicator
from channels.db import database_sync_to_async
from django.db import connections
from rest_framework.authtoken.models import Token

from kgv_web.asgi import application

pytestmark = pytest.mark.django_db(transaction=True)  # the guard checks tokens and sessions on its own connection

MB = 1024 * 1024
UPLOAD = b"multipart/form-data; boundary=x"


@pytest.fixture(autouse=True)
async def close_thread_connections():
    yield
    await database_sync_to_async(connections.close_all)()


def _scope(path: str, headers: dict[str, str]) -> dict:
    return {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
            "path": path, "raw_path": path.encode(), "root_path": "", "query_string": b"",
            "headers": [(b"host", b"localhost"), *((name.encode(), value.encode()) for name, value in headers.items())],
            "client": ("127.0.0.1", 50000), "server": ("localhost", 80)}


async def _answer(communicator: ApplicationCommunicator) -> tuple[int, dict, bytes]:
    start = await communicator.receive_output(timeout=10)
    body = b""
    while True:
        message = await communicator.receive_output(timeout=10)
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    return start["status"], dict(start["headers"]), body


async def _refused_unread(path: str, headers: dict[str, str]) -> tuple[int, dict, bytes]:
    """Headers only: the application answers without a single body message sent."""
    communicator = ApplicationCommunicator(application, _scope(path, headers))
    answer = await _answer(communicator)
    await communicator.wait(timeout=10)
    return answer


async def _streamed(path: str, headers: dict[str, str], size: int, chunk: int = MB) -> tuple[int, bytes, int]:
    """The body sent in chunks, as long as the application reads on: (status, body, bytes it took before answering)."""
    communicator = ApplicationCommunicator(application, _scope(path, headers))
    sent = 0
    while sent < size:
        part = min(chunk, size - sent)
        await communicator.send_input({"type": "http.request", "body": b"-" * part, "more_body": sent + part < size})
        sent += part
        if await _answered_before_taking_more(communicator):
            break
    status, _, body = await _answer(communicator)
    await communicator.wait(timeout=10)
    return status, body, sent


async def _answered_before_taking_more(communicator: ApplicationCommunicator) -> bool:
    """Wait until the application took the last chunk (False) or answered without taking it (True)."""
    for _ in range(10_000):
        if not communicator.output_queue.empty() or communicator.future.done():
            return True
        if communicator.input_queue.empty():
            return False
        await asyncio.sleep(0.001)
    raise AssertionError("the application neither took the body nor answered within 10 s")


@database_sync_to_async
def _token(make_user, role: str = "curator") -> str:
    return Token.objects.create(user=make_user(role)).key


async def test_an_anonymous_upload_is_refused_from_its_headers_unread():
    status, headers, body = await _refused_unread("/api/tasks/import/", {"content-type": UPLOAD.decode(),
                                                                           "content-length": str(10 * MB)})
    assert status == 401 and b'"code": "not_authenticated"' in body and headers[b"connection"] == b"close"


async def test_a_body_over_the_limit_is_refused_unread_even_from_a_valid_token(make_user):
    token = await _token(make_user)
    status, _, body = await _refused_unread("/api/tasks/import/", {"content-type": UPLOAD.decode(), "content-length": str(100 * MB),
                                                                     "authorization": f"Token {token}"})
    assert status == 413 and b"larger than 20 MB" in body
    status, headers, body = await _refused_unread("/import/", {"content-type": UPLOAD.decode(), "content-length": str(100 * MB)})
    assert status == 413 and headers[b"content-type"].startswith(b"text/plain") and b"larger than 20 MB" in body


async def test_a_large_json_body_is_too_large_not_a_nul_or_parse_error(make_user):
    token = await _token(make_user)
    status, _, body = await _refused_unread("/api/runs/", {"content-type": "application/json", "content-length": str(5 * MB),
                                                            "authorization": f"Token {token}"})
    assert status == 413 and b"other than a file upload is limited to 2.5 MB" in body


async def test_a_content_length_that_is_not_a_number_is_a_bad_request():
    status, _, body = await _refused_unread("/api/tasks/import/", {"content-type": UPLOAD.decode(), "content-length": "²"})
    assert status == 400 and b"Content-Length" in body


async def test_a_valid_token_may_send_an_upload_a_wrong_one_may_not(make_user):
    token = await _token(make_user)
    wrong = await _refused_unread("/api/tasks/import/", {"content-type": UPLOAD.decode(), "content-length": str(5 * MB),
                                                          "authorization": "Token nope"})
    assert wrong[0] == 401
    status, body, sent = await _streamed("/api/tasks/import/", {"content-type": UPLOAD.decode(), "content-length": str(5 * MB),
                                                                 "authorization": f"Token {token}"}, 5 * MB)
    assert sent == 5 * MB and status not in (401, 413), body  # the guard let it through to the view, which read it all


async def test_a_body_without_a_length_is_counted_as_it_arrives_and_cut_off(make_user):
    status, body, sent = await _streamed("/api/tasks/import/", {"content-type": UPLOAD.decode()}, 10 * MB, chunk=256 * 1024)
    assert status == 401 and b"Sign in" in body
    assert 2.5 * MB < sent <= 2.5 * MB + 2 * 256 * 1024  # refused at the first chunk past the anonymous limit
    token = await _token(make_user)
    status, body, sent = await _streamed("/api/tasks/import/", {"content-type": UPLOAD.decode(),
                                                                 "authorization": f"Token {token}"}, 30 * MB)
    assert status == 413 and 20 * MB < sent <= 22 * MB
