"""Publishing from sync code (a Celery worker thread) through the process's publisher loop and real Redis."""

import pytest
from channels.db import database_sync_to_async as sync_to_async
from django.db import transaction

from tests.verifier.realtime.test_run_stream import _connect, _make_run, _session_cookie
from verifier.models import Run, Step
from verifier.realtime.publish import publish_step
from verifier.services import cancel_run

pytestmark = pytest.mark.django_db(transaction=True)


def _add_steps(run, first, count):
    for seq in range(first, first + count):
        with transaction.atomic():
            publish_step(Step.objects.create(run=run, seq=seq, kind="thought", content=f"thought {seq}"))


async def _follow(run, user, after):
    cookie = await sync_to_async(_session_cookie)(user)
    communicator, connected, _ = await _connect(f"/ws/runs/{run.pk}/?after={after}", cookie)
    assert connected
    status = await communicator.receive_json_from(timeout=5)
    assert status["type"] == "run.status"
    return communicator, status


@pytest.mark.slow
async def test_a_burst_of_steps_arrives_complete_and_in_order():
    run, user = await sync_to_async(_make_run)()
    communicator, _ = await _follow(run, user, after=3)
    await sync_to_async(_add_steps)(run, 4, 40)
    received = [(await communicator.receive_json_from(timeout=5))["step"]["seq"] for _ in range(40)]
    assert received == list(range(4, 44))
    assert await communicator.receive_nothing(timeout=0.3)
    await communicator.disconnect()


async def test_cancelling_a_run_tells_its_followers():
    run, user = await sync_to_async(_make_run)()
    communicator, status = await _follow(run, user, after=3)
    assert status["run"]["status"] == "running" and status["run"]["finished_at"] is None
    assert status["run"]["finished"] is False
    assert await sync_to_async(cancel_run)(run=run, actor=user)
    message = await communicator.receive_json_from(timeout=5)
    assert message["type"] == "run.status" and message["run"]["status"] == Run.Status.CANCELLED
    assert message["run"]["finished"] is True  # the browser ends the live view on this, not on its own list
    assert message["run"]["finished_at"] is not None
    await communicator.disconnect()


@pytest.mark.slow
async def test_a_step_rolled_back_is_never_broadcast():
    run, user = await sync_to_async(_make_run)()
    communicator, _ = await _follow(run, user, after=3)

    def add_and_roll_back():
        with pytest.raises(RuntimeError), transaction.atomic():
            publish_step(Step.objects.create(run=run, seq=4, kind="thought", content="never committed"))
            raise RuntimeError("the worker died mid-step")

    await sync_to_async(add_and_roll_back)()
    assert await communicator.receive_nothing(timeout=0.5)
    await communicator.disconnect()
