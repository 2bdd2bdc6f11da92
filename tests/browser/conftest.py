"""Browser tests: Debian's chromium driven by Playwright against a real daphne server (HTTP + websockets)
on the test database, with a real Celery worker and the scripted OpenAI-compatible model.

The server and the worker (tests/conftest.py) are session-scoped, the browser module-scoped; tests are
transactional, so the server and the worker (separate processes) see what a test writes.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.workers import PROJECT_DIR, test_database_url

CHROMIUM = Path("/usr/bin/chromium")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="session")
def server_url(django_db_setup, django_db_blocker, app_env, celery_worker_process):
    """daphne serving kgv_web.asgi on a free port, against the test database."""
    port = _free_port()
    with django_db_blocker.unblock():
        env = {**os.environ, "DATABASE_URL": test_database_url(), **app_env}
    process = subprocess.Popen([sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "kgv_web.asgi:application"],
                               cwd=PROJECT_DIR, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        if process.poll() is not None:
            pytest.fail(f"daphne exited: {process.stderr.read().decode()[-2000:]}")
        try:
            urllib.request.urlopen(f"{url}/health/?format=json", timeout=2)
            break
        except OSError:
            if time.monotonic() > deadline:
                process.kill()
                pytest.fail("daphne did not answer within 60 s")
            time.sleep(0.3)
    yield url
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()


@pytest.fixture(scope="module")
def chromium():
    """Module-scoped: Playwright's sync API keeps an event loop running in this thread while it is open,
    which later asyncio tests could not share. Django's ORM calls from the test body are plain synchronous
    calls beside that loop, so its async-safety guard is lifted while the browser is open."""
    if not CHROMIUM.exists():
        pytest.fail("Debian's chromium is missing: scripts/install_browser.sh installs it (make test runs it)")
    from playwright.sync_api import sync_playwright

    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(CHROMIUM), headless=True,
            args=["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync"])
        yield browser
        browser.close()
    del os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"]


@pytest.fixture
def browser_context(chromium, server_url):
    context = chromium.new_context(base_url=server_url, accept_downloads=True, viewport={"width": 1400, "height": 900})
    context.set_default_timeout(15_000)
    yield context
    context.close()


def sign_in(context, username: str, password: str):
    """A new page signed in through the real login form."""
    page = context.new_page()
    page.goto("/accounts/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", password)
    page.click("button[type=submit], input[type=submit]")
    page.wait_for_url(lambda url: "/accounts/login/" not in url)
    return page
