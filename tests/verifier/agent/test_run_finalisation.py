"""A run always ends: bad configurations are refused up front, any error fails the run with its reason and
frees the task, a late writer never overwrites a cancellation, and runs whose worker vanished are swept."""

from datetime import timedelta

import pytest
from django.utils import timezone

from tests.openai_server import ScriptedOpenAIServer
from tests.verifier.agent.test_runs import PLAN, task  # noqa: F401 — the fixture
from verifier.agent.llm import OpenAICompatibleLLM
from verifier.models import Run, Step, VerificationTask
from verifier.runner import STALL_SECONDS, execute_run, sweep_stalled_runs
from verifier.services import cancel_run, start_run
from verifier.wiring import settle_config

pytestmark = pytest.mark.django_db


def test_an_unexpected_error_fails_the_run_with_its_reason_and_frees_the_task(task, monkeypatch):  # noqa: F811
    import verifier.runner as runner

    def broken(*args, **kwargs):
        raise TypeError("unsupported operand type(s) for +: 'int' and 'str'")

    monkeypatch.setattr(runner, "assess", broken)  # fails after the verdict step, in the finalisation
    with ScriptedOpenAIServer([PLAN, "Final Answer: [Correct] Because it is so [P1]."]) as server:
        llm = OpenAICompatibleLLM(server.url, "test", "scripted", max_retries=0)
        run = start_run(task=task, config=settle_config({}, llm), queue=False)
        execute_run(run.pk, llm=llm, await_structure=False)
    run.refresh_from_db()
    assert run.status == Run.Status.FAILED and run.finished_at is not None
    assert "internal error (TypeError" in run.error
    assert Step.objects.filter(run=run).exists()  # what it stored is kept
    assert VerificationTask.objects.get(pk=task.pk).status == VerificationTask.Status.PENDING


def test_a_cancel_wins_over_a_worker_that_finishes_afterwards(task, monkeypatch):  # noqa: F811
    import verifier.runner as runner

    real_assess = runner.assess

    def cancel_then_assess(run, **kwargs):
        assert cancel_run(run=Run.objects.get(pk=run.pk))  # the curator cancels while the worker concludes
        return real_assess(run, **kwargs)

    monkeypatch.setattr(runner, "assess", cancel_then_assess)
    with ScriptedOpenAIServer([PLAN, "Final Answer: [Correct] Because it is so."]) as server:
        llm = OpenAICompatibleLLM(server.url, "test", "scripted", max_retries=0)
        run = start_run(task=task, config=settle_config({}, llm), queue=False)
        execute_run(run.pk, llm=llm, await_structure=False)
    run.refresh_from_db()
    assert run.status == Run.Status.CANCELLED and run.verdict == ""
    assert VerificationTask.objects.get(pk=task.pk).status == VerificationTask.Status.PENDING


def test_cancelling_a_run_whose_worker_is_gone_frees_its_task(task):  # noqa: F811
    run = start_run(task=task, queue=False)
    Run.objects.filter(pk=run.pk).update(status=Run.Status.RUNNING, started_at=timezone.now())
    VerificationTask.objects.filter(pk=task.pk).update(status=VerificationTask.Status.RUNNING)
    assert cancel_run(run=Run.objects.get(pk=run.pk))
    assert VerificationTask.objects.get(pk=task.pk).status == VerificationTask.Status.PENDING


def test_the_sweeper_fails_runs_whose_worker_stopped_heartbeating_and_only_those(task, world_kg):  # noqa: F811
    long_ago = timezone.now() - timedelta(seconds=STALL_SECONDS + 60)
    stalled = start_run(task=task, queue=False)
    Run.objects.filter(pk=stalled.pk).update(status=Run.Status.RUNNING, started_at=long_ago, heartbeat_at=long_ago)
    VerificationTask.objects.filter(pk=task.pk).update(status=VerificationTask.Status.RUNNING)
    other = VerificationTask.objects.create(kg=world_kg, head=task.tail, relation=task.relation, tail=task.head)
    alive = start_run(task=other, queue=False)
    Run.objects.filter(pk=alive.pk).update(status=Run.Status.RUNNING, started_at=long_ago, heartbeat_at=timezone.now())
    third = VerificationTask.objects.create(kg=world_kg, head=task.head, relation=task.relation, tail=task.head)
    queued = start_run(task=third, queue=False)

    assert sweep_stalled_runs() == [stalled.pk]
    stalled.refresh_from_db()
    assert stalled.status == Run.Status.FAILED and "stopped" in stalled.error and stalled.finished_at is not None
    assert VerificationTask.objects.get(pk=task.pk).status == VerificationTask.Status.PENDING
    assert Run.objects.get(pk=alive.pk).status == Run.Status.RUNNING
    assert Run.objects.get(pk=queued.pk).status == Run.Status.QUEUED
    assert sweep_stalled_runs() == []
