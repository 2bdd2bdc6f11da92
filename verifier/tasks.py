"""Celery tasks: thin wrappers loading by id and calling a service."""

from __future__ import annotations

from celery import shared_task

from verifier.runner import execute_run


@shared_task(acks_late=True, reject_on_worker_lost=True, name="verifier.run_verification")
def run_verification(run_id: int) -> str:
    """One investigation. Re-delivery after a lost worker closes the half-done run as failed."""
    return execute_run(run_id).status
