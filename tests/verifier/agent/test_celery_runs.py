"""A run queued through Celery on the embedded Redis and executed by a real worker process."""

import os
import subprocess
import sys
import time
from urllib.parse import urlsplit, urlunsplit

import pytest
from django.db import connection

from tests.conftest import PROJECT_DIR
from tests.openai_server import ScriptedOpenAIServer
from verifier.models import Run, VerificationTask
from verifier.services import start_run

pytestmark = pytest.mark.django_db(transaction=True)

PLAN = "=== Initial Impression ===\n[Correct] Because he was English.\n=== Strategic Plan ===\n[Step 1] KG_Path(Q42, Q145)"


def scripted_agent(body: dict) -> str:
    messages = body["messages"]
    if messages[0]["content"].startswith("You are a verification strategist"):
        return PLAN
    if not any(m["role"] == "assistant" for m in messages):
        return "Thought: find a path\nAction: KG_Path(Douglas Adams, United Kingdom)"
    return "Thought: enough\nFinal Answer: [Correct] Because he was born in Cambridge, in the United Kingdom [E1]."


@pytest.fixture(scope="module")
def model_server():
    with ScriptedOpenAIServer(scripted_agent, latency=0.3) as server:
        yield server


@pytest.fixture
def worker(model_server, transactional_db):
    """A Celery worker process on the test database and the scripted model."""
    url = urlsplit(os.environ["DATABASE_URL"])
    test_db_url = urlunsplit(url._replace(path="/" + connection.settings_dict["NAME"]))
    env = {**os.environ, "DATABASE_URL": test_db_url, "LLM_BASE_URL": model_server.url, "LLM_MODEL": "scripted",
           "LLM_GRAMMAR": "0"}
    hostname = f"kgv-run-test-{os.getpid()}@localhost"
    process = subprocess.Popen([sys.executable, "-m", "celery", "-A", "kgv_web", "worker", "--pool", "threads",
                                "--concurrency", "2", "--hostname", hostname, "--loglevel", "WARNING"],
                               cwd=PROJECT_DIR, env=env)
    from kgv_web.celery import app

    deadline = time.monotonic() + 60
    while not app.control.ping(destination=[hostname], timeout=0.5):
        assert process.poll() is None and time.monotonic() < deadline, "the Celery worker did not start"
    yield hostname
    process.terminate()
    process.wait(timeout=30)


@pytest.fixture
def task(world_kg):
    kg = world_kg
    return VerificationTask.objects.create(kg=kg, head=kg.entities.get(external_id="Q42"),
                                           relation=kg.relations.get(external_id="P27"), tail=kg.entities.get(external_id="Q145"))


def test_start_run_queues_on_commit_and_the_worker_finishes_it(worker, task):
    run = start_run(task=task, config={"memory_k": 0})
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        run.refresh_from_db()
        if run.status in (Run.Status.SUCCEEDED, Run.Status.FAILED):
            break
        time.sleep(0.2)
    assert run.status == Run.Status.SUCCEEDED, run.error
    assert list(run.steps.values_list("seq", flat=True)) == [1, 2, 3, 4, 5, 6]
    assert VerificationTask.objects.get(pk=task.pk).status == VerificationTask.Status.VERIFIED
