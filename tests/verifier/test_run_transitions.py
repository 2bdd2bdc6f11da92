"""The rules of a run's and a task's state (verifier/models/verification.py): which transition applies from which
state, and that racing writers leave the state the first of them wrote."""

import threading
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.db import connection, transaction
from django.utils import timezone

from verifier.models import Review, Run, StructuralModel, VerificationTask

pytestmark = pytest.mark.django_db


@pytest.fixture
def task(world_kg):
    kg = world_kg
    return VerificationTask.objects.create(kg=kg, head=kg.entities.get(external_id="Q42"),
                                           relation=kg.relations.get(external_id="P27"), tail=kg.entities.get(external_id="Q145"))


def started(task) -> Run:
    run = Run.objects.create(task=task)
    run.start()
    return run


def status_of(row):
    return type(row).objects.values_list("status", flat=True).get(pk=row.pk)


def test_a_queued_run_starts_running_with_its_task(task):
    run = Run.objects.create(task=task, awaiting_model=StructuralModel.objects.create(kg=task.kg, kg_version=task.kg.version))
    run.start()
    run.refresh_from_db()
    assert run.status == Run.Status.RUNNING and run.awaiting_model is None
    assert run.started_at is not None and run.heartbeat_at == run.started_at
    assert status_of(task) == VerificationTask.Status.RUNNING


@pytest.mark.parametrize("ended", [Run.Status.SUCCEEDED, Run.Status.FAILED, Run.Status.CANCELLED])
def test_a_finished_run_is_never_started_parked_or_finished_again(task, ended):
    run = Run.objects.create(task=task, status=ended, verdict="correct" if ended == Run.Status.SUCCEEDED else "")
    with pytest.raises(ValueError, match=f"run {run.pk} is {ended}: only a queued run starts"):
        run.start()
    with pytest.raises(ValueError, match="only a queued run waits for a training"):
        run.park(StructuralModel.objects.create(kg=task.kg, kg_version=task.kg.version))
    assert not run.finish(Run.Status.FAILED, error="late")
    assert not run.cancel() and not run.abandon("late")
    run.refresh_from_db()
    assert run.status == ended and run.error == "" and run.started_at is None and run.awaiting_model is None


def test_a_running_run_does_not_start_twice(task):
    run = started(task)
    with pytest.raises(ValueError, match="only a queued run starts"):
        run.start()


def test_a_run_ends_only_succeeded_or_failed(task):
    run = started(task)
    for status in (Run.Status.CANCELLED, Run.Status.QUEUED, Run.Status.RUNNING):
        with pytest.raises(ValueError, match="a run ends succeeded or failed"):
            run.finish(status)
    assert status_of(run) == Run.Status.RUNNING


def test_a_queued_run_cannot_finish_before_it_starts(task):
    run = Run.objects.create(task=task)
    assert not run.finish(Run.Status.SUCCEEDED, verdict="correct")
    assert status_of(run) == Run.Status.QUEUED and run.verdict == ""


def test_a_cancel_is_never_overwritten_by_the_finish_of_a_worker_that_missed_it(task):
    worker_copy = started(task)  # the worker's row, read before the curator cancels
    curator_copy = Run.objects.get(pk=worker_copy.pk)
    assert curator_copy.cancel()
    assert worker_copy.status == Run.Status.RUNNING  # the worker has not seen the cancel
    assert not worker_copy.finish(Run.Status.SUCCEEDED, verdict="correct", explanation="late")
    assert worker_copy.status == Run.Status.CANCELLED and worker_copy.verdict == "" and worker_copy.explanation == ""
    assert status_of(task) == VerificationTask.Status.PENDING


def test_a_finished_run_is_not_cancelled_afterwards(task):
    run = started(task)
    stale = Run.objects.get(pk=run.pk)
    assert run.finish(Run.Status.SUCCEEDED, verdict="correct")
    assert not stale.cancel()
    assert status_of(run) == Run.Status.SUCCEEDED and status_of(task) == VerificationTask.Status.VERIFIED


@pytest.mark.django_db(transaction=True)
def test_racing_cancel_and_finish_from_two_connections_leave_exactly_one_end(task):
    """Both writers run at once on their own connections; whichever UPDATE lands first wins, the other matches no row."""
    run = started(task)
    barrier, outcome = threading.Barrier(2), {}

    def write(name, transition):
        try:
            barrier.wait()
            with transaction.atomic():
                outcome[name] = transition(Run.objects.get(pk=run.pk))
        finally:
            connection.close()

    threads = [threading.Thread(target=write, args=("cancel", lambda r: r.cancel())),
               threading.Thread(target=write, args=("finish", lambda r: r.finish(Run.Status.SUCCEEDED, verdict="correct")))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert sorted(outcome.values()) == [False, True]
    run.refresh_from_db()
    if outcome["cancel"]:
        assert run.status == Run.Status.CANCELLED and run.verdict == ""
        assert status_of(task) == VerificationTask.Status.PENDING
    else:
        assert run.status == Run.Status.SUCCEEDED and run.verdict == "correct"
        assert status_of(task) == VerificationTask.Status.VERIFIED


def test_a_success_keeps_a_task_reviewed_when_a_reviewer_decided_on_an_earlier_run(task):
    earlier = Run.objects.create(task=task, status=Run.Status.SUCCEEDED, verdict="correct")
    reviewer = get_user_model().objects.create_user("rene")
    Review.objects.create(run=earlier, reviewer=reviewer, decision=Review.Decision.ACCEPT, verdict="correct")
    VerificationTask.objects.filter(pk=task.pk).update(status=VerificationTask.Status.REVIEWED)
    run = started(task)
    assert run.finish(Run.Status.SUCCEEDED, verdict="incorrect")
    assert status_of(task) == VerificationTask.Status.REVIEWED


def test_a_failure_frees_the_task_unless_another_run_of_it_is_in_flight(task):
    run = started(task)
    other = Run.objects.create(task=task)  # queued beside it (an evaluation's repeat, say)
    assert run.finish(Run.Status.FAILED, error="the endpoint refused")
    assert status_of(task) == VerificationTask.Status.RUNNING
    assert other.cancel()
    assert status_of(task) == VerificationTask.Status.PENDING


def test_a_run_found_half_done_is_abandoned_failed_and_its_task_freed(task):
    run = started(task)
    assert run.abandon("the worker stopped mid-run")
    assert run.status == Run.Status.FAILED and run.error == "the worker stopped mid-run" and run.finished_at is not None
    assert status_of(task) == VerificationTask.Status.PENDING


def test_a_cancelled_run_is_charged_nothing_more(task):
    run = started(task)
    assert run.charge(10, 5, 0) and run.prompt_tokens == 10
    Run.objects.get(pk=run.pk).cancel()
    assert not run.charge(10, 5, 0)
    assert Run.objects.values_list("prompt_tokens", flat=True).get(pk=run.pk) == 10


def test_only_running_runs_beat_and_only_silent_ones_are_stalled(task):
    run = started(task)
    long_ago = timezone.now() - timedelta(minutes=10)
    Run.objects.filter(pk=run.pk).update(heartbeat_at=long_ago)
    assert list(Run.objects.stalled(timezone.now() - timedelta(minutes=5))) == [run]
    assert Run.objects.filter(pk=run.pk).beat() == 1
    assert not Run.objects.stalled(timezone.now() - timedelta(minutes=5)).exists()
    Run.objects.get(pk=run.pk).cancel()
    assert Run.objects.filter(pk=run.pk).beat() == 0


def test_releasing_a_training_frees_only_the_queued_runs_parked_for_it(task):
    training = StructuralModel.objects.create(kg=task.kg, kg_version=task.kg.version)
    parked = Run.objects.create(task=task)
    parked.park(training)
    cancelled = Run.objects.create(task=task, status=Run.Status.CANCELLED, awaiting_model=training)
    with transaction.atomic():
        assert Run.objects.release_from(training.pk) == [parked.pk]
    assert Run.objects.get(pk=parked.pk).awaiting_model is None
    assert Run.objects.get(pk=cancelled.pk).awaiting_model == training


def test_a_task_is_reviewed_by_a_decision_and_verified_again_when_the_last_one_is_undone(task):
    run = Run.objects.create(task=task, status=Run.Status.SUCCEEDED, verdict="correct")
    VerificationTask.objects.filter(pk=task.pk).update(status=VerificationTask.Status.VERIFIED)
    task.refresh_from_db()
    assert task.mark_reviewed() and not task.mark_reviewed()
    review = Review.objects.create(run=run, reviewer=get_user_model().objects.create_user("rene"),
                                   decision=Review.Decision.ACCEPT, verdict="correct")
    assert not task.unmark_reviewed()  # a decision still stands
    review.delete()
    assert task.unmark_reviewed()
    assert status_of(task) == VerificationTask.Status.VERIFIED
