"""Browser tests: Debian's chromium driven by Playwright against a real daphne server (HTTP + websockets,
tests/live_server.py) on the test database, with a real Celery worker and the scripted OpenAI-compatible model.

The server and the worker (tests/conftest.py) are session-scoped, the browser module-scoped; tests are
transactional, so the server and the worker (separate processes) see what a test writes.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

CHROMIUM = Path("/usr/bin/chromium")


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
    """A fresh browser context. Every page it opens keeps the Content-Security-Policy: a violation (an inline script
    or handler, a script from elsewhere) is reported on the console, and fails the test. (The policy allows no eval,
    which Playwright's wait_for_function needs: tests wait for selectors instead.)"""
    context = chromium.new_context(base_url=server_url, accept_downloads=True, viewport={"width": 1400, "height": 900})
    context.set_default_timeout(15_000)
    violations = policy_violations(context)
    yield context
    context.close()
    assert not violations, f"Content-Security-Policy violations: {violations}"


def policy_violations(context) -> list[str]:
    """The Content-Security-Policy violations the context's pages report on the console, as they happen."""
    violations: list[str] = []
    context.on("console", lambda message: violations.append(f"{message.page.url if message.page else ''}: {message.text}")
               if message.type == "error" and "Content Security Policy" in message.text else None)
    return violations


def sign_in(context, username: str, password: str):
    """A new page signed in through the real login form."""
    page = context.new_page()
    page.goto("/accounts/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", password)
    page.click("button[type=submit], input[type=submit]")
    page.wait_for_url(lambda url: "/accounts/login/" not in url)
    return page
