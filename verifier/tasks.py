"""Celery tasks: thin wrappers loading by id and calling a service. The worker's entry point: it imports
downward and nothing imports it (callers enqueue a task by its name, verifier/queueing.py)."""

from __future__ import annotations

import logging

from celery import shared_task
from django.conf import settings

from verifier import confidence
from verifier.claims.pipeline import verify_claim_now
from verifier.evaluation import driver as evaluation_driver
from verifier.kg_audit import pipeline as kg_audit
from verifier.models import Evaluation, Onboarding, Run, StructuralModel
from verifier.onboarding import run as run_onboarding
from verifier.redelivery import redeliver_lost_runs
from verifier.runner import execute_run, sweep_stalled_runs
from verifier.services import release_awaiting
from verifier.structure.training import TrainingError, cut_short_warning, train
from verifier.webhooks import deliver, deliver_due

logger = logging.getLogger(__name__)


@shared_task(acks_late=True, reject_on_worker_lost=True, name="verifier.run_verification")
def run_verification(run_id: int) -> str:
    """One investigation. Re-delivery after a lost worker closes the half-done run as failed."""
    return execute_run(run_id).status


@shared_task(acks_late=True, reject_on_worker_lost=True, name="verifier.train_structural_model",
             soft_time_limit=settings.KGV_TRAINING_TIME_LIMIT, time_limit=settings.KGV_TRAINING_TIME_LIMIT + 120)
def train_structural_model(model_id: int) -> str:
    """Train, validate and calibrate a queued structural model. Re-delivery after a lost worker starts it over."""
    row = StructuralModel.objects.select_related("kg").filter(pk=model_id).first()
    if row is None or row.status in (StructuralModel.Status.READY, StructuralModel.Status.SUPERSEDED):
        return row.status if row else "missing"
    try:
        trained = train(row.kg, row=row)
    except TrainingError:
        return StructuralModel.Status.FAILED
    finally:
        release_awaiting(model_id)  # the runs that waited for it start, however it ended
    if warning := cut_short_warning(trained):
        logger.warning(warning)
    return trained.status


@shared_task(acks_late=True, reject_on_worker_lost=True, name="verifier.reassess_confidence")
def reassess_confidence(kg_id: int | None) -> int:
    """Re-weigh the finished runs of a KG (None: of every KG) under the confidence model now in force."""
    return confidence.reassess(Run.objects.filter(task__kg_id=kg_id) if kg_id else Run.objects.all())


@shared_task(bind=True, acks_late=True, reject_on_worker_lost=True, name="verifier.drive_evaluation")
def drive_evaluation(self, evaluation_id: int) -> str:
    """Drive an evaluation started or resumed from the workbench to its end: this task starts its runs, which the
    other worker processes take, and waits for them; one at a time (another waits its turn). Re-delivery after a
    lost worker resumes it."""
    with evaluation_driver.worker_driver_turn() as turn:
        if not turn:
            raise self.retry(countdown=evaluation_driver.WORKER_DRIVER_WAIT_SECONDS, max_retries=None)
        evaluation = Evaluation.objects.filter(pk=evaluation_id).first()
        if evaluation is None or evaluation.worker_driver != self.request.id:  # stopped before its turn, or resumed again
            return "withdrawn"
        try:
            if evaluation.status == Evaluation.Status.FINISHED:
                return evaluation.status
            return evaluation_driver.drive(evaluation, progress=False, log=logger.info).status
        except evaluation_driver.EvaluationError as exc:  # stopped from the workbench, or driven by another process
            logger.warning("evaluation %s: %s", evaluation.name, exc)
            return "stopped"
        finally:
            Evaluation.objects.filter(pk=evaluation_id, worker_driver=self.request.id).update(worker_driver="")


@shared_task(name="verifier.sweep_stalled_runs", ignore_result=True)
def sweep_stalled() -> int:
    """Fail runs whose worker stopped heartbeating, send again the lost message of runs queued with none in the
    broker, mark interrupted the evaluations whose driver is gone and send again the chunks of KG audits whose
    workers stopped (scheduled by Celery beat; see CELERY_BEAT_SCHEDULE)."""
    return (len(sweep_stalled_runs()) + len(redeliver_lost_runs()) + len(evaluation_driver.sweep_abandoned())
            + len(kg_audit.resume_stale()))


@shared_task(acks_late=True, reject_on_worker_lost=True, name="verifier.onboard_kg",
             soft_time_limit=settings.KGV_TRAINING_TIME_LIMIT, time_limit=settings.KGV_TRAINING_TIME_LIMIT + 120)
def onboard_kg(onboarding_id: int) -> str:
    """Take an uploaded KG from its file to calibrated verdicts (verifier/onboarding.py)."""
    onboarding = Onboarding.objects.filter(pk=onboarding_id).first()
    return run_onboarding(onboarding).status if onboarding else "missing"


@shared_task(acks_late=True, reject_on_worker_lost=True, name="verifier.prepare_audit")
def prepare_audit(audit_id: int) -> str:
    """Fit a KG audit's scorer and send its chunks to the audit workers."""
    return kg_audit.prepare(audit_id).status


@shared_task(acks_late=True, reject_on_worker_lost=True, name="verifier.audit_chunk")
def audit_chunk(audit_id: int, index: int) -> bool:
    """Score one chunk of a KG audit (the last one finishes it). Re-delivery scores it again only if it is not done."""
    return kg_audit.score_chunk(audit_id, index)


@shared_task(name="verifier.deliver_webhook", ignore_result=True)
def deliver_webhook(delivery_id: int) -> None:
    """The first attempt at a webhook delivery; later ones come from the sweep below."""
    deliver(delivery_id)


@shared_task(name="verifier.deliver_due_webhooks", ignore_result=True)
def deliver_due_webhooks() -> int:
    """Webhook deliveries whose retry is due (scheduled by Celery beat; see CELERY_BEAT_SCHEDULE)."""
    return deliver_due()


@shared_task(acks_late=True, reject_on_worker_lost=True, name="verifier.verify_claim")
def verify_claim(claim_id: int) -> str:
    """Decompose a claim and queue its parts' runs."""
    return verify_claim_now(claim_id).status
