"""Broadcast of persisted run events to the run's channel group, after the transaction commits."""

from __future__ import annotations

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import transaction

from verifier.models import Run, Step
from verifier.realtime.events import RunStatusMessage, StepMessage, run_group


def step_payload(step: Step) -> dict:
    return {
        "run": step.run_id,
        "seq": step.seq,
        "kind": step.kind,
        "content": step.content,
        "tool": step.tool,
        "arguments": step.arguments,
        "prompt_tokens": step.prompt_tokens,
        "completion_tokens": step.completion_tokens,
        "duration_ms": step.duration_ms,
        "created_at": step.created_at.isoformat() if step.created_at else None,
    }


def run_payload(run: Run) -> dict:
    return {
        "id": run.pk,
        "status": run.status,
        "verdict": run.verdict,
        "prompt_tokens": run.prompt_tokens,
        "completion_tokens": run.completion_tokens,
        "cost_usd": str(run.cost_usd),
        "error": run.error,
    }


def _send(group: str, message: dict) -> None:
    layer = get_channel_layer()
    if layer is not None:
        async_to_sync(layer.group_send)(group, message)


def publish_step(step: Step) -> None:
    """Send a step to followers of its run once the row is committed (a reader can then re-fetch it)."""
    message: StepMessage = {"type": "run.step", "step": step_payload(step)}
    transaction.on_commit(lambda: _send(run_group(step.run_id), message))


def publish_run_status(run: Run) -> None:
    message: RunStatusMessage = {"type": "run.status", "run": run_payload(run)}
    transaction.on_commit(lambda: _send(run_group(run.pk), message))
