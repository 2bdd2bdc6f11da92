"""Broadcast of persisted run events to the run's channel group, after the transaction commits.

Publishing happens on one long-lived event loop per process (a daemon thread), not through
``async_to_sync`` per message: from a sync worker thread that would start a new event loop, open a new
Redis connection and close both again for every step. Here every worker thread of a process shares one
loop and one Redis connection, and a publish costs one PUBLISH round trip.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from concurrent.futures import Future

from channels.layers import get_channel_layer
from django.db import transaction
from django.template.loader import render_to_string

from verifier import webhooks
from verifier.models import Run, Step, Webhook
from verifier.realtime.events import RunStatusMessage, StepMessage, run_group
from verifier.retrying import Transient, call_with_retries

logger = logging.getLogger(__name__)

SEND_TIMEOUT_SECONDS = 5


def step_payload(step: Step) -> dict:
    """A step as followers receive it: its fields, and ``html``, the step as the run page renders it
    (templates/verifier/run_step.html, the one renderer of a step: the browser inserts it as it is)."""
    return {
        "run": step.run_id,
        "seq": step.seq,
        "kind": step.kind,
        "content": step.content,
        "tool": step.tool,
        "arguments": step.arguments,
        "prompt_tokens": step.prompt_tokens,
        "completion_tokens": step.completion_tokens,
        "cost_usd": str(step.cost_usd),
        "duration_ms": step.duration_ms,
        "created_at": step.created_at.isoformat() if step.created_at else None,
        "html": render_to_string("verifier/run_step.html", {"step": step}),
    }


def run_payload(run: Run) -> dict:
    return {
        "id": run.pk,
        "status": run.status,
        "finished": run.is_finished,
        "verdict": run.verdict,
        "prompt_tokens": run.prompt_tokens,
        "completion_tokens": run.completion_tokens,
        "cost_usd": str(run.cost_usd),
        "error": run.error,
        "started_at": run.started_at.isoformat() if run.started_at else None,
        "finished_at": run.finished_at.isoformat() if run.finished_at else None,
    }


class _PublisherLoop:
    """The process's publishing event loop, started on first use and again after a fork."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pid: int | None = None

    def loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None or self._pid != os.getpid():
                loop = asyncio.new_event_loop()
                threading.Thread(target=loop.run_forever, name="kgv-realtime-publisher", daemon=True).start()
                self._loop, self._pid = loop, os.getpid()
            return self._loop

    def submit(self, group: str, message: dict) -> Future:
        layer = get_channel_layer()
        return asyncio.run_coroutine_threadsafe(layer.group_send(group, message), self.loop())


_publisher = _PublisherLoop()


SEND_RETRIES = 2  # after a Redis restart the first sends meet the pool's dead connections, each then replaced


def send_to_group(group: str, message: dict) -> None:
    """Publish and wait for Redis to take the message (keeps a run's steps in order). A send that fails is
    tried again (a connection lost with a Redis restart is replaced on the next one); a broadcast that still
    fails is logged, not raised: the step is committed and followers catch up from the database."""
    if get_channel_layer() is None:
        return

    def attempt() -> None:
        try:
            _publisher.submit(group, message).result(timeout=SEND_TIMEOUT_SECONDS)
        except Exception as error:  # noqa: BLE001 - any failed send may succeed on a fresh connection
            raise Transient(f"{type(error).__name__}: {error}") from error

    try:
        call_with_retries(attempt, retries=SEND_RETRIES, backoff=0.05, cap=0.5, what=f"broadcast of {message.get('type')} to {group}")
    except Transient:  # a lost broadcast must never fail the run that produced it
        logger.exception("could not broadcast %s to %s", message.get("type"), group)


def publish_step(step: Step) -> None:
    """Send a step to followers of its run once the row is committed (a reader can then re-fetch it)."""
    message: StepMessage = {"type": "run.step", "step": step_payload(step)}
    transaction.on_commit(lambda: send_to_group(run_group(step.run_id), message))


def publish_run_status(run: Run) -> None:
    """Tell the run's followers its new state once committed; a run that has just finished (succeeded, failed or
    cancelled; not one of an evaluation) is also announced to the webhooks subscribed to ``run.finished``."""
    message: RunStatusMessage = {"type": "run.status", "run": run_payload(run)}
    transaction.on_commit(lambda: send_to_group(run_group(run.pk), message))
    if run.is_finished and not run.evaluation_items.exists():
        webhooks.emit(Webhook.Event.RUN_FINISHED, f"run.finished:{run.pk}", webhooks.run_data(run))
