"""Each kind of work on its own queue, sent by name after the commit, so a training never holds a verification."""

import time

import pytest
from django.db import transaction

from kgv_web.celery import app
from tests.verifier.structure.test_training import TINY, generated_kg
from tests.workers import celery_worker, routed, wait_for
from verifier import queueing
from verifier.models import Run, StructuralModel, VerificationTask
from verifier.services import start_run
from verifier.structure.training import request_training, train

EXPECTED = {
    "verifier.run_verification": "verification", "verifier.verify_claim": "verification",
    "verifier.train_structural_model": "training", "verifier.onboard_kg": "training",
    "verifier.prepare_audit": "audit", "verifier.audit_chunk": "audit",
    "verifier.reassess_confidence": "housekeeping", "verifier.drive_evaluation": "housekeeping",
    "verifier.deliver_webhook": "housekeeping", "verifier.sweep_stalled_runs": "housekeeping",
    "verifier.deliver_due_webhooks": "housekeeping",
}


def test_celery_routes_each_task_to_the_queue_of_its_kind_of_work():
    registered = {name for name in app.tasks if name.startswith("verifier.")}
    assert registered == set(EXPECTED)  # every task the worker knows has a route
    for name, queue in EXPECTED.items():
        assert app.amqp.router.route({}, name)["queue"].name == queue
        assert queueing.queue_of(name) == queue


def test_a_task_is_sent_after_the_commit_and_an_unknown_name_is_refused(db, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False) as sent, transaction.atomic():
        queueing.enqueue(queueing.RUN_VERIFICATION, 12345)
    assert len(sent) == 1  # nothing reaches the broker before the commit
    with pytest.raises(ValueError, match="no queue is routed the task 'verifier.no_such_task'"):
        queueing.enqueue("verifier.no_such_task", 1)


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_run_completes_while_a_training_runs_on_its_own_worker(app_env, shipped_weighing):
    """Two workers as ``make demo`` starts them, one for training and one for verification (each on a queue of its own
    here, so no other test's worker takes their tasks): a one-second evidence run finishes while the KG's next
    model trains."""
    kg, triples = generated_kg()
    ready = train(kg, config=TINY, folds=2)
    suffix = f"{int(time.time() * 1000)}"
    routes = {"verifier.train_structural_model": {"queue": f"test-training-{suffix}"},
              "verifier.run_verification": {"queue": f"test-verification-{suffix}"}}
    slow = {**TINY.to_dict(), "max_epochs": 400, "eval_every": 100, "patience": 10}
    with routed(routes), celery_worker(queue=routes["verifier.train_structural_model"]["queue"], env=app_env), \
            celery_worker(queue=routes["verifier.run_verification"]["queue"], env=app_env):
        job = request_training(kg, reason="the KG changed", config=slow, folds=5)
        wait_for(lambda: StructuralModel.objects.filter(pk=job.pk, status=StructuralModel.Status.TRAINING).exists(),
                 timeout=60, what="the training worker to start the job")
        fact = kg.triples.select_related("head", "relation", "tail").first()
        task = VerificationTask.objects.create(kg=kg, head=fact.head, relation=fact.relation, tail=fact.tail)
        run = start_run(task=task, config={"mode": "evidence"})
        done = wait_for(lambda: Run.objects.filter(pk=run.pk, status__in=Run.FINISHED).first(), timeout=60,
                        what="the verification worker to finish the run")
        assert done.status == Run.Status.SUCCEEDED, done.error
        assert done.structural_model_id == ready.pk  # scored by the ready model while the next one trains
        assert StructuralModel.objects.get(pk=job.pk).status == StructuralModel.Status.TRAINING
