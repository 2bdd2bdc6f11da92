"""Messages on a run's channel group, and the group naming; one TypedDict per message type."""

from __future__ import annotations

from typing import TypedDict


def run_group(run_id: int) -> str:
    return f"run.{run_id}"


class StepMessage(TypedDict):
    type: str  # "run.step": Channels dispatches it to RunStepsConsumer.run_step
    step: dict


class RunStatusMessage(TypedDict):
    type: str  # "run.status"
    run: dict
