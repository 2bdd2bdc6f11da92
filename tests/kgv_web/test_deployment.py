"""Production settings: the deploy checks pass with the documented variables, and the debug page never shows
credentials."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kgv_web.errors import CredentialFilter

PROJECT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_check_deploy_prints_no_warning_with_debug_off():
    env = {**os.environ, "DEBUG": "0", "SECRET_KEY": "k" * 60 + "-production-like-key-with-enough-entropy-0123456789"}
    done = subprocess.run([sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"], cwd=PROJECT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "WARNINGS" not in done.stderr and "no issues" in done.stdout


def test_the_debug_page_hides_urls_that_carry_credentials(settings):
    settings.DATABASE_URL = "postgresql://kgv:hunter2@db:5432/kgv"
    settings.REDIS_URL = "redis://:hunter2@redis:6379/0"
    safe = CredentialFilter().get_safe_settings()
    assert "hunter2" not in repr(safe)
    assert safe["DATABASE_URL"] == CredentialFilter.cleansed_substitute
