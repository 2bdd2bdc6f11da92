import os
import subprocess
import sys

import pytest
from django.core.exceptions import ImproperlyConfigured

from kgv_web.env import database_from_url, env_bool, env_float, env_int, env_list, env_url

PROJECT_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_booleans_accept_common_spellings_and_reject_typos(monkeypatch):
    monkeypatch.setenv("FLAG", "Yes")
    assert env_bool("FLAG", False) is True
    monkeypatch.setenv("FLAG", "off")
    assert env_bool("FLAG", True) is False
    monkeypatch.setenv("FLAG", "ture")
    with pytest.raises(ImproperlyConfigured, match="FLAG='ture' is not a boolean"):
        env_bool("FLAG", False)


def test_numbers_are_parsed_and_bounded(monkeypatch):
    monkeypatch.setenv("N", "12")
    assert env_int("N", 1, minimum=1) == 12
    monkeypatch.setenv("N", "zero")
    with pytest.raises(ImproperlyConfigured, match="not an integer"):
        env_int("N", 1)
    monkeypatch.setenv("N", "0")
    with pytest.raises(ImproperlyConfigured, match="at least 1"):
        env_int("N", 1, minimum=1)
    monkeypatch.setenv("T", "3.5")
    with pytest.raises(ImproperlyConfigured, match="between 0.0 and 2.0"):
        env_float("T", 0.0, minimum=0.0, maximum=2.0)


def test_lists_split_on_commas(monkeypatch):
    monkeypatch.setenv("HOSTS", "a.example, b.example,,")
    assert env_list("HOSTS", []) == ["a.example", "b.example"]
    monkeypatch.delenv("HOSTS")
    assert env_list("HOSTS", ["x"]) == ["x"]


def test_urls_must_have_an_allowed_scheme(monkeypatch):
    monkeypatch.setenv("REDIS", "http://localhost:6379")
    with pytest.raises(ImproperlyConfigured, match="must start with one of redis://"):
        env_url("REDIS", schemes=("redis",))


def test_database_url_with_host_port_and_credentials():
    db = database_from_url("postgresql://kgv:s%40cret@db.internal:6543/kgv_prod?sslmode=require")
    assert (db["NAME"], db["USER"], db["PASSWORD"], db["HOST"], db["PORT"]) == (
        "kgv_prod", "kgv", "s@cret", "db.internal", "6543"
    )
    assert db["OPTIONS"] == {"sslmode": "require"}


def test_database_url_with_a_unix_socket_directory():
    db = database_from_url("postgresql://postgres@/kgv?host=/run/kgv/sockets")
    assert db["HOST"] == "/run/kgv/sockets" and db["NAME"] == "kgv" and db["OPTIONS"] == {}


@pytest.mark.parametrize(
    "url, message",
    [("mysql://u@h/db", "must be a postgresql:// URL"), ("postgresql://u@h", "names no database")],
)
def test_database_url_errors_say_what_is_wrong(url, message):
    with pytest.raises(ImproperlyConfigured, match=message):
        database_from_url(url)


@pytest.mark.parametrize(
    "variables, message",
    [
        ({"DEBUG": "maybe"}, "DEBUG='maybe' is not a boolean"),
        ({"DEBUG": "0", "SECRET_KEY": ""}, "SECRET_KEY is not set"),
        ({"DATABASE_URL": "sqlite:///x.db"}, "must start with one of postgres://"),
        ({"LLM_BASE_URL": "localhost:8080"}, "LLM_BASE_URL='localhost:8080' must start with one of http://"),
    ],
)
def test_a_bad_value_stops_start_up_with_a_clear_message(variables, message):
    env = {**os.environ, **variables}
    result = subprocess.run(
        [sys.executable, "manage.py", "check"], cwd=PROJECT_DIR, env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode != 0
    assert message in result.stderr
