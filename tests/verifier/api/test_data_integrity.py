"""Data integrity: one memory entry per promotion, a reviewed verdict that stays the task's verdict, one run
in flight per task."""

import pytest
from django.urls import reverse

from tests.openai_server import ScriptedOpenAIServer
from tests.verifier.exports.verified_runs import make_finished_run
from verifier.agent.llm import OpenAICompatibleLLM
from verifier.exports.records import select
from verifier.models import MemoryEntry, Run, VerificationTask
from verifier.runner import execute_run
from verifier.services import start_run

pytestmark = pytest.mark.django_db


def test_promoting_the_same_run_twice_creates_one_entry(verified, client_as):
    client = client_as("reviewer")
    url = reverse("api:run-promote", args=[verified["run"].pk])
    first, second = client.post(url, {}, format="json"), client.post(url, {}, format="json")
    assert first.status_code == second.status_code == 201
    assert first.json()["id"] == second.json()["id"]
    assert MemoryEntry.objects.filter(source_run=verified["run"]).count() == 1


def test_a_new_run_does_not_unsettle_a_reviewed_verdict(verified):
    task = verified["task"]
    VerificationTask.objects.filter(pk=task.pk).update(status=VerificationTask.Status.REVIEWED)
    with ScriptedOpenAIServer(["Final Answer: [Incorrect] Because it is not so."]) as server:
        run = start_run(task=task, config={"mode": "zero-shot"}, queue=False)
        execute_run(run.pk, llm=OpenAICompatibleLLM(server.url, "test", "scripted", max_retries=0))
    run.refresh_from_db()
    assert run.status == Run.Status.SUCCEEDED and run.verdict == "incorrect"
    assert VerificationTask.objects.get(pk=task.pk).status == VerificationTask.Status.REVIEWED
    record = select(task_ids=[task.pk]).records[0]
    assert record.run_id == verified["run"].pk  # the export still stands on the reviewed run


def test_a_task_with_a_run_in_flight_gets_no_second_run(verified, client_as):
    client = client_as("curator")
    task = verified["task"]
    first = client.post(reverse("api:run-list"), {"task": task.pk}, format="json")
    assert first.status_code == 201
    second = client.post(reverse("api:run-list"), {"task": task.pk}, format="json")
    assert second.status_code == 409 and second.json()["error"]["code"] == "conflict"
    assert f"already has run {first.json()['id']} queued" in second.json()["error"]["message"]
    bulk = client.post(reverse("api:task-bulk"), {"action": "run", "ids": [task.pk]}, format="json")
    assert bulk.status_code == 200 and bulk.json()["runs"] == [] and bulk.json()["busy"] == [task.pk]
    assert Run.objects.filter(task=task, status=Run.Status.QUEUED).count() == 1
    make_finished_run(task)  # unrelated finished runs never block
