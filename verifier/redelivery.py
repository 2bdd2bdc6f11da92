"""Queued runs whose message was lost: looked for in the broker, and sent again when it is nowhere.

A run is queued in the database and its message goes to the broker after the commit. A broker restarted
without its data, a publish that failed after the commit or a queue purged by hand leaves the run
`queued` with no message anywhere, and no worker will ever take it. Every minute (Celery beat, beside the
stalled-run sweep) each run queued for longer than QUEUED_GRACE_SECONDS is looked for in every queue of
the broker and among the messages workers hold unacknowledged; a run found nowhere, twice a second apart
(so a message moving from a queue to a worker is not taken for lost), is sent again. Evaluation runs are
left to their harness, which re-queues them on `evaluate --resume`, and a run waiting for a structural
model's training has no message by design: the training's end sends it (verifier/runner.py).

Only a Redis broker (the one KGV ships with) can be searched; with another the sweep logs that and stops.
"""

from __future__ import annotations

import ast
import base64
import json
import logging
import time
from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from kgv_web.celery import app
from verifier.models import Run, StructuralModel
from verifier.queueing import RUN_VERIFICATION, send_now

logger = logging.getLogger(__name__)

QUEUED_GRACE_SECONDS = 120
TASK_NAME = "verifier.run_verification"
_BINDING_SEPARATOR = "\x06\x16"  # kombu's Redis transport: routing key, pattern and queue in a binding member


def _run_id(message: dict) -> int | None:
    """The run id a broker message carries, if it is a run_verification message."""
    headers = message.get("headers") or {}
    if headers.get("task") != TASK_NAME:
        return None
    try:
        args = ast.literal_eval(headers["argsrepr"]) if headers.get("argsrepr") else \
            json.loads(base64.b64decode(message["body"]))[0]
        return int(args[0])
    except (ValueError, SyntaxError, KeyError, IndexError, TypeError):
        return None


def runs_in_broker() -> set[int] | None:
    """Ids of the runs with a message waiting in any queue or held unacknowledged by a worker; None when the
    broker is not Redis (it cannot be searched)."""
    with app.connection_for_read() as connection:
        if connection.transport.driver_type != "redis":
            return None
        channel = connection.default_channel
        client = channel.client
        queues = {app.conf.task_default_queue, *settings.KGV_QUEUES}
        for key in client.scan_iter(match="_kombu.binding.*"):
            queues.update(member.decode().split(_BINDING_SEPARATOR)[-1] for member in client.smembers(key))
        messages = [json.loads(raw) for queue in queues for raw in client.lrange(queue, 0, -1)]
        messages += [json.loads(raw)[0] for raw in client.hvals(channel.unacked_key)]
    return {run_id for run_id in map(_run_id, messages) if run_id is not None}


def waiting_line(queue: str) -> list[int] | None:
    """The runs with a message for the workers of ``queue``, in the order they take them: first those a worker holds
    unacknowledged (taken: starting or running), oldest first, then the queue's own messages from the end the workers
    pop (kombu's Redis transport pushes on the left and pops on the right, priority list by priority list). None when
    the broker is not Redis."""
    with app.connection_for_read() as connection:
        if connection.transport.driver_type != "redis":
            return None
        channel = connection.default_channel
        client = channel.client
        taken = client.hgetall(channel.unacked_key)
        since = dict(client.zrange(channel.unacked_index_key, 0, -1, withscores=True))
        messages = [json.loads(taken[tag])[0] for tag in sorted(taken, key=lambda tag: since.get(tag, 0.0))]
        for key in [channel._q_for_pri(queue, priority) for priority in channel.priority_steps]:
            messages += [json.loads(raw) for raw in reversed(client.lrange(key, 0, -1))]
    return list(dict.fromkeys(run_id for run_id in map(_run_id, messages) if run_id is not None))


def _waiting(cutoff) -> set[int]:
    """Queued runs that should have a message: not an evaluation's, and not waiting for a training in flight
    (one whose job stopped without ending is no longer waited for: the run is sent to look again)."""
    training = [m.pk for m in StructuralModel.objects.in_flight() if not m.is_stale]
    return set(Run.objects.expecting_message(cutoff, training).values_list("pk", flat=True))


def redeliver_lost_runs() -> list[int]:
    """Send again the message of every queued run found nowhere in the broker (see the module docstring)."""
    cutoff = timezone.now() - timedelta(seconds=QUEUED_GRACE_SECONDS)
    waiting = _waiting(cutoff)
    if not waiting:
        return []
    found = runs_in_broker()
    if found is None:
        logger.info("the broker is not Redis: queued runs cannot be checked for lost messages")
        return []
    lost = waiting - found
    if lost:
        time.sleep(1)
        lost = (lost & _waiting(cutoff)) - (runs_in_broker() or set())
    for run_id in sorted(lost):
        send_now(RUN_VERIFICATION, run_id)
    if lost:
        logger.warning("sent again the lost message of %d queued run(s): %s", len(lost), sorted(lost))
    return sorted(lost)
