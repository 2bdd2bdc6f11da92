"""Real Celery worker processes for tests, attached to the test database and the embedded Redis."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

from django.db import connection

PROJECT_DIR = Path(__file__).resolve().parent.parent


def test_database_url() -> str:
    """DATABASE_URL of the database this test session uses (``test_…``), for processes started by a test."""
    s = connection.settings_dict
    auth = quote(s["USER"]) + (f":{quote(s['PASSWORD'])}" if s["PASSWORD"] else "")
    host = s["HOST"]
    if host.startswith("/"):
        return f"postgresql://{auth}@localhost:{s['PORT'] or 5432}/{s['NAME']}?host={quote(host)}"
    return f"postgresql://{auth}@{host or 'localhost'}:{s['PORT'] or 5432}/{s['NAME']}"


class WorkerHandle:
    def __init__(self, process: subprocess.Popen, hostname: str, queue: str):
        self.process, self.hostname, self.queue = process, hostname, queue

    def pool_children(self) -> list[int]:
        import psutil

        return [child.pid for child in psutil.Process(self.process.pid).children()]


@contextmanager
def configured_as(env: dict):
    """This process's model endpoint, as ``env`` gives a worker's (its settings read it from there): the processes of a
    deployment share one configuration, and a run created here is settled for the model that answers it there."""
    from django.test import override_settings

    grammar = env.get("LLM_GRAMMAR", "1").strip().lower() not in ("0", "false", "no", "off")
    with override_settings(LLM_BASE_URL=env["LLM_BASE_URL"], LLM_MODEL=env.get("LLM_MODEL", "local"),
                           LLM_LOCAL_GRAMMAR=grammar):
        yield


@contextmanager
def celery_worker(*, pool: str = "prefork", concurrency: int = 1, env: dict | None = None, timeout: float = 90,
                  queue: str | None = None, name: str | None = None):
    """A worker on the test database, stopped on exit, consuming ``queue`` (comma-separated queues). Without one it
    gets a private queue (so no other test's worker takes its tasks), which is deleted afterwards. Its hostname
    starts with ``name`` (default: the queues)."""
    from kgv_web.celery import app

    private = queue is None
    queue = queue or f"test-{uuid.uuid4().hex[:8]}"
    hostname = f"{name or queue.replace(',', '-')}-{uuid.uuid4().hex[:6]}@localhost"
    process = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "kgv_web", "worker", "--pool", pool, "--concurrency", str(concurrency),
         "--queues", queue, "--hostname", hostname, "--loglevel", "WARNING", "--without-gossip", "--without-mingle"],
        cwd=PROJECT_DIR, env={**os.environ, "DATABASE_URL": test_database_url(), **(env or {})},
    )
    try:
        deadline = time.monotonic() + timeout
        while not (app.control.ping(destination=[hostname], timeout=0.5) or []):
            if process.poll() is not None:
                raise RuntimeError("the Celery worker exited during start-up")
            if time.monotonic() > deadline:
                raise RuntimeError(f"the Celery worker did not answer a ping within {timeout:.0f} s")
        yield WorkerHandle(process, hostname, queue)
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if private:
            with app.connection_for_write() as conn:  # the queue was only for this worker
                conn.default_channel.queue_delete(queue)


@contextmanager
def routed(routes: dict):
    """Celery's routes replaced by ``routes`` in this process for the block (tasks sent to queues of a test's own)."""
    from kgv_web.celery import app

    original = app.conf.task_routes
    app.conf.task_routes = routes
    app.amqp.flush_routes()
    app.amqp.__dict__.pop("router", None)  # the router is cached with the routes it was made with
    try:
        yield
    finally:
        app.conf.task_routes = original
        app.amqp.flush_routes()
        app.amqp.__dict__.pop("router", None)


def wait_for(condition, timeout: float = 60, what: str = "the condition"):
    """Poll ``condition`` until it returns something truthy (returned), or fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
