"""The run stream over a real Channels layer on Redis, through the full ASGI application."""

import pytest
from channels.db import database_sync_to_async as sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.auth import get_user_model
from django.db import connections, transaction

from kgv_web.asgi import application
from verifier.kg.loader import load_source
from verifier.kg.sources import KGSource
from verifier.models import Run, Step, VerificationTask
from verifier.realtime.publish import publish_step
from verifier.roles import set_role

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
async def close_thread_connections():
    """Async tests reach the database from asgiref's worker thread; close its connection afterwards
    so the test database can be dropped at the end of the session."""
    yield
    await sync_to_async(connections.close_all)()


def _make_run():
    kg = load_source(KGSource("stream", "stream", "", triples=lambda: iter([("a", "r", "b")])), embed=False).kg
    head, tail = kg.entities.get(external_id="a"), kg.entities.get(external_id="b")
    task = VerificationTask.objects.create(kg=kg, head=head, relation=kg.relations.get(), tail=tail)
    run = Run.objects.create(task=task, status=Run.Status.RUNNING)
    for seq, kind in enumerate(["plan", "thought", "action"], start=1):
        Step.objects.create(run=run, seq=seq, kind=kind, content=f"{kind} text")
    user = get_user_model().objects.create_user("watcher", password="pw-watcher-1")
    set_role(user, "viewer")
    return run, user


def _session_cookie(user):
    from django.test import Client

    client = Client()
    client.force_login(user)
    return client.cookies["sessionid"].value


def _add_step(run, seq):
    with transaction.atomic():
        step = Step.objects.create(run=run, seq=seq, kind="observation", content="observed")
        publish_step(step)


async def _connect(path, cookie=None):
    headers = [(b"origin", b"http://localhost"), (b"host", b"localhost")]
    if cookie:
        headers.append((b"cookie", f"sessionid={cookie}".encode()))
    communicator = WebsocketCommunicator(application, path, headers=headers)
    connected, code = await communicator.connect()
    return communicator, connected, code


async def test_anonymous_clients_are_refused():
    run, _ = await sync_to_async(_make_run)()
    communicator, connected, code = await _connect(f"/ws/runs/{run.pk}/")
    assert not connected and code == 4401


@pytest.mark.slow
async def test_backlog_after_last_seen_then_live_steps_without_duplicates():
    run, user = await sync_to_async(_make_run)()
    cookie = await sync_to_async(_session_cookie)(user)
    communicator, connected, _ = await _connect(f"/ws/runs/{run.pk}/?after=1", cookie)
    assert connected
    status = await communicator.receive_json_from(timeout=5)
    assert status["type"] == "run.status" and status["run"]["status"] == "running"
    backlog = [await communicator.receive_json_from(timeout=5) for _ in range(2)]
    assert [m["step"]["seq"] for m in backlog] == [2, 3]

    await sync_to_async(_add_step)(run, 4)
    live = await communicator.receive_json_from(timeout=5)
    assert live["type"] == "run.step" and live["step"]["seq"] == 4 and live["step"]["kind"] == "observation"
    assert await communicator.receive_nothing(timeout=0.3)
    await communicator.disconnect()
    # Each step comes rendered as the run page renders it (one renderer): the page's own markup of that step.
    page = await sync_to_async(_run_page)(run, user)
    for message in [*backlog, live]:
        assert message["step"]["html"].strip() in page


def _run_page(run, user) -> str:
    from django.test import Client

    client = Client()
    client.force_login(user)
    return client.get(f"/runs/{run.pk}/").content.decode()


async def test_unknown_run_is_refused():
    _, user = await sync_to_async(_make_run)()
    cookie = await sync_to_async(_session_cookie)(user)
    communicator, connected, code = await _connect("/ws/runs/999999/", cookie)
    assert not connected and code == 4404


async def test_signed_in_users_without_a_role_are_refused():
    run, user = await sync_to_async(_make_run)()
    await sync_to_async(set_role)(user, None)
    cookie = await sync_to_async(_session_cookie)(user)
    communicator, connected, code = await _connect(f"/ws/runs/{run.pk}/", cookie)
    assert not connected and code == 4403
