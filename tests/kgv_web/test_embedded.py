import os
import subprocess

import psycopg
import pytest
import redis
from django.conf import settings
from django.db import connection

from kgv_web import embedded
from kgv_web.embedded import EmbeddedRedis, _redis_answers


@pytest.mark.django_db
def test_the_database_is_postgresql_with_pgvector_and_trigram_extensions():
    with connection.cursor() as cursor:
        cursor.execute("SELECT extname, extversion FROM pg_extension")
        extensions = dict(cursor.fetchall())
        cursor.execute("SHOW server_version_num")
        version = int(cursor.fetchone()[0])
    assert "vector" in extensions and "pg_trgm" in extensions
    assert version >= 160000


@pytest.mark.django_db
def test_vector_cosine_distance_is_computed_by_the_database():
    with connection.cursor() as cursor:
        cursor.execute("SELECT '[1,0,0]'::vector <=> '[0,1,0]'::vector, '[1,1,0]'::vector <=> '[2,2,0]'::vector")
        orthogonal, parallel = cursor.fetchone()
    assert orthogonal == pytest.approx(1.0) and parallel == pytest.approx(0.0)


def test_redis_from_settings_answers():
    client = redis.Redis.from_url(settings.REDIS_URL)
    client.set("kgv:test", "ok", ex=10)
    assert client.get("kgv:test") == b"ok"


def test_embedded_redis_is_stopped_by_its_owner_and_only_attached_to_by_others(tmp_path, monkeypatch):
    monkeypatch.setattr(embedded, "others_attached", lambda: 0)  # this suite's own workers may hold connections
    owner = EmbeddedRedis(tmp_path / "redis").start()
    assert owner.owned and _redis_answers(owner.port)
    guest = EmbeddedRedis(tmp_path / "redis").start()
    assert not guest.owned and guest.port == owner.port
    guest.stop()
    assert _redis_answers(owner.port), "a process that only attached must not stop the server"
    owner.stop()
    assert not _redis_answers(owner.port)
    assert not (tmp_path / "redis" / "state.json").exists()


def test_services_started_by_settings_are_exported_to_child_processes():
    assert os.environ["DATABASE_URL"] == settings.DATABASE_URL
    assert os.environ["REDIS_URL"] == settings.REDIS_URL


def test_an_owner_leaves_its_services_running_while_other_kgv_processes_use_them(tmp_path, monkeypatch):
    owner = EmbeddedRedis(tmp_path / "redis").start()
    monkeypatch.setattr(embedded, "others_attached", lambda: 1)
    owner.stop()
    assert _redis_answers(owner.port), "an evaluation in another terminal still needs the broker"
    guest = EmbeddedRedis(tmp_path / "redis").start()
    assert not guest.owned and guest.port == owner.port  # the next command attaches to what was left running
    owner.process.terminate()
    owner.process.wait(timeout=10)


def test_connections_of_other_kgv_processes_are_counted_and_this_ones_are_not():
    before = embedded.others_attached()
    with psycopg.connect(os.environ["DATABASE_URL"], application_name=embedded.application_name()):
        assert embedded.others_attached() == before
    with psycopg.connect(os.environ["DATABASE_URL"], application_name="kgv-0"):
        assert embedded.others_attached() == before + 1


def test_a_process_attached_but_not_yet_connected_keeps_an_ending_owner_from_stopping(tmp_path, monkeypatch):
    """A command that attached while another ended (it has not connected yet) is counted by its marker."""
    monkeypatch.setenv("KGV_EMBEDDED_DIR", str(tmp_path))
    monkeypatch.setattr(embedded, "_others_connected", lambda: 0)  # this suite's own workers hold connections
    owner = EmbeddedRedis(tmp_path / "redis").start()
    guest = subprocess.Popen(["sleep", "60"])
    (tmp_path / "attached").mkdir()
    (tmp_path / "attached" / str(guest.pid)).touch()
    (tmp_path / "attached" / str(os.getpid())).touch()  # a process never counts itself
    try:
        assert embedded.others_attached() == 1
        owner.stop()
        assert _redis_answers(owner.port), "the attached command still needs the broker"
    finally:
        guest.kill()
        guest.wait()
        owner.process.terminate()
        owner.process.wait(timeout=10)
    assert embedded.others_attached() == 0  # a process gone is no longer counted, and its marker is dropped
    assert not (tmp_path / "attached" / str(guest.pid)).exists()
