"""A real Daphne server (HTTP + websockets) on the test database, for the browser tests and the live fault tests:
session-scoped, started with the session's app environment (tests/conftest.py) beside its Celery worker. What it
logs goes to a file, which the fault suites read for tracebacks."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.workers import PROJECT_DIR, test_database_url

# Daphne imports Django, Channels and the app before it answers: seconds alone, minutes on two cores under a full suite.
START_TIMEOUT_SECONDS = 180


@dataclass(frozen=True)
class LiveServer:
    url: str
    port: int
    log: Path  # the server's stderr: Django's and Daphne's log lines, tracebacks included

    def log_text(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="session")
def daphne_server(django_db_setup, django_db_blocker, app_env, celery_worker_process, tmp_path_factory):
    """daphne serving kgv_web.asgi on a free port, against the test database."""
    port = _free_port()
    log = tmp_path_factory.mktemp("daphne") / "daphne.log"
    with django_db_blocker.unblock():
        env = {**os.environ, "DATABASE_URL": test_database_url(), **app_env}
    with log.open("wb") as stderr:
        process = subprocess.Popen([sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port),
                                    "kgv_web.asgi:application"], cwd=PROJECT_DIR, env=env, stdout=subprocess.DEVNULL,
                                   stderr=stderr)
    server = LiveServer(f"http://127.0.0.1:{port}", port, log)
    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    while True:
        if process.poll() is not None:
            pytest.fail(f"daphne exited: {server.log_text()[-2000:]}")
        try:
            urllib.request.urlopen(f"{server.url}/health/?format=json", timeout=10)
            break
        except OSError:
            if time.monotonic() > deadline:
                process.kill()
                pytest.fail(f"daphne did not answer within {START_TIMEOUT_SECONDS} s")
            time.sleep(0.3)
    yield server
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()


@pytest.fixture(scope="session")
def server_url(daphne_server) -> str:
    return daphne_server.url
