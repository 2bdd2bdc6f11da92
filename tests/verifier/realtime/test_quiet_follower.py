"""A follower of a quiet run (a local-model step takes several seconds) must still get the next step."""

import asyncio

import pytest
from channels.db import database_sync_to_async as sync_to_async

from tests.verifier.realtime.test_run_stream import _add_step, _connect, _make_run, _session_cookie

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


async def test_a_follower_quiet_for_longer_than_the_redis_timeouts_still_receives_the_next_step():
    run, user = await sync_to_async(_make_run)()
    cookie = await sync_to_async(_session_cookie)(user)
    communicator, connected, _ = await _connect(f"/ws/runs/{run.pk}/?after=3", cookie)
    assert connected
    assert (await communicator.receive_json_from(timeout=5))["type"] == "run.status"
    await asyncio.sleep(11)  # longer than both the 5 s blocking pop and redis-py's 5 s read timeout
    await sync_to_async(_add_step)(run, 4)
    live = await communicator.receive_json_from(timeout=5)
    assert live["step"]["seq"] == 4
    await communicator.disconnect()
