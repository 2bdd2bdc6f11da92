"""``manage.py evaluate`` through a real Celery worker, killed mid-run with its worker, then resumed:
finished runs are kept, the interrupted one is superseded by a fresh run, nothing else is redone."""

import os
import re
import signal
import subprocess
import sys
import time
from urllib.parse import urlsplit, urlunsplit

import pytest
import redis
from django.conf import settings
from django.db import connection
from django.utils import timezone

from tests import workers
from tests.openai_server import ScriptedOpenAIServer, TextReply
from verifier.evaluation import driver, reports
from verifier.evaluation.driver import HEARTBEAT_STALE, EvaluationError, EvaluationSpec, drive, prepare
from verifier.evaluation.workers import NO_MODEL_PREFIX, WorkerUnfit, worker_pool
from verifier.models import Evaluation, EvaluationItem, Run
from verifier.queueing import RUN_VERIFICATION, queue_of

pytestmark = pytest.mark.django_db(transaction=True)

DATASET = "Q42\tP27\tQ145\ttrue\nQ42\tP19\tQ350\ttrue\nQ42\tP27\tQ142\tfalse\nQ90\tP17\tQ145\tfalse\n"
ANSWER = "Final Answer: [Correct] Because I recall it."


@pytest.fixture
def private_broker():
    """A Redis database of its own, so only the worker started by the command takes these runs."""
    url = urlunsplit(urlsplit(settings.REDIS_URL)._replace(path="/9"))
    redis.Redis.from_url(url).flushdb()  # messages left by an earlier run of this test
    return url


def _env(broker: str, model_url: str) -> dict:
    """The environment of an evaluate command: the test database, a private broker, the scripted model."""
    return {**os.environ, "DATABASE_URL": workers.test_database_url(), "REDIS_URL": broker, "LLM_BASE_URL": model_url,
            "LLM_MODEL": "scripted", "LLM_API_KEY": "test", "LLM_GRAMMAR": "0", "KGV_LOCAL_LLM": "off"}


def _evaluate(path, kg, name: str, env: dict) -> subprocess.Popen:
    """``manage.py evaluate`` of the 4-triple file, zero-shot, 4 at a time, in its own process group."""
    command = [sys.executable, "manage.py", "evaluate", "--benchmark", str(path), "--kg", kg.name, "--n", "4",
               "--mode", "zero-shot", "--concurrency", "4", "--name", name, "--no-progress"]
    return subprocess.Popen(command, cwd=workers.PROJECT_DIR, env=env, start_new_session=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


@pytest.mark.slow
def test_a_killed_evaluation_and_its_worker_resume_where_they_stopped(world_kg, tmp_path, private_broker):
    path = tmp_path / "resume.tsv"
    path.write_text(DATASET)
    calls = {"born": 0}

    def script(body):
        if "place of birth" in body["messages"][-1]["content"]:
            calls["born"] += 1
            if calls["born"] == 1:  # the first verification of this triple hangs until its worker is killed
                return TextReply(ANSWER, delay=300)
        return ANSWER

    with ScriptedOpenAIServer(script) as server:
        env = _env(private_broker, server.url)
        first = _evaluate(path, world_kg, "killed", env)

        def three_done_one_hanging():
            runs = [(item.task.relation.external_id, item.run and item.run.status) for item in
                    EvaluationItem.objects.filter(evaluation__name="killed").select_related("run", "task__relation")]
            return (len(runs) == 4 and sum(status == "succeeded" for _, status in runs) == 3
                    and ("P19", "running") in runs)

        try:
            workers.wait_for(three_done_one_hanging, 150, "three verifications done and one in progress")
        finally:
            os.killpg(first.pid, signal.SIGKILL)  # the command and the worker it started
            output = first.communicate()[0].decode()
        assert "Started Celery worker" in output, output

        evaluation = Evaluation.objects.get(name="killed")
        assert evaluation.status == Evaluation.Status.RUNNING
        items = {item.task.relation.external_id + str(item.task.tail_id): item
                 for item in EvaluationItem.objects.filter(evaluation=evaluation).select_related("run", "task__relation")}
        hanging = next(item for item in items.values() if item.run.status == Run.Status.RUNNING)
        kept = {key: item.run_id for key, item in items.items() if item is not hanging}

        # Meanwhile the reports show the figures so far, marked as unfinished ("Correct" for all: 1 of 3 right).
        so_far = reports.current_metrics(evaluation)
        assert so_far["n"] == 3 and so_far["pending"] == 1 and so_far["models"] == ["scripted"]
        table = reports.results_table([evaluation])
        assert "| Zero-shot | 33.3* |" in table and "unfinished, verifications so far: Zero-shot on resume.tsv: 3 of 4." in table

        # Its heartbeat is fresh: a second driver refuses to start until it is stale.
        with pytest.raises(EvaluationError, match="being driven by another process"):
            drive(evaluation, progress=False)
        time.sleep(max(0.0, (evaluation.heartbeat_at + HEARTBEAT_STALE - timezone.now()).total_seconds() + 0.5))

        resumed = subprocess.run([sys.executable, "manage.py", "evaluate", "--resume", str(evaluation.pk), "--no-progress"],
                                 cwd=workers.PROJECT_DIR, env=env, capture_output=True, text=True, timeout=240)
        assert resumed.returncode == 0, resumed.stdout + resumed.stderr
        assert "1 run(s) left unfinished" in resumed.stdout
        chat_requests = len(server.bodies)

    evaluation.refresh_from_db()
    assert evaluation.status == Evaluation.Status.FINISHED and evaluation.metrics["n"] == 4
    assert evaluation.metrics["accuracy"] == pytest.approx(2 / 4)  # "Correct" for all: the two true triples are right
    after = {item.task.relation.external_id + str(item.task.tail_id): item
             for item in EvaluationItem.objects.filter(evaluation=evaluation).select_related("run", "task__relation")}
    assert {key: after[key].run_id for key in kept} == kept  # finished runs were kept, not redone
    again = after[next(k for k in after if k not in kept)]
    assert again.run_id != hanging.run_id and again.attempts == 2 and again.run.status == Run.Status.SUCCEEDED
    superseded = Run.objects.get(pk=hanging.run_id)
    assert superseded.status == Run.Status.CANCELLED and "superseded" in superseded.error
    assert chat_requests == 5  # four first verifications and one fresh run: nothing else was asked again


@pytest.mark.slow
def test_a_stopped_evaluation_leaves_no_run_running(world_kg, tmp_path, private_broker):
    """SIGTERM (what `kill` and a job control's stop send; a background job ignores Ctrl-C) stops the
    evaluation like Ctrl-C: its worker is stopped, and the run that worker held is cancelled with a note
    instead of staying "running" with nobody running it."""
    path = tmp_path / "stop.tsv"
    path.write_text(DATASET)

    def script(body):
        if "place of birth" in body["messages"][-1]["content"]:
            return TextReply(ANSWER, delay=300)  # outlasts the worker's grace period
        return ANSWER

    with ScriptedOpenAIServer(script) as server:
        process = _evaluate(path, world_kg, "stopped", _env(private_broker, server.url))
        try:
            workers.wait_for(lambda: Run.objects.filter(evaluation_items__evaluation__name="stopped",
                                                        status=Run.Status.RUNNING, task__relation__external_id="P19").exists(),
                             150, "the hanging verification to start")
            process.send_signal(signal.SIGTERM)  # the command only: it must stop its worker itself
            output = process.communicate(timeout=60)[0].decode()
        finally:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)

    assert process.returncode != 0 and "interrupted; 1 unfinished run(s) cancelled" in output, output
    evaluation = Evaluation.objects.get(name="stopped")
    assert evaluation.status == Evaluation.Status.INTERRUPTED
    runs = Run.objects.filter(evaluation_items__evaluation=evaluation)
    assert not runs.filter(status__in=Run.IN_FLIGHT).exists()
    stopped = runs.get(task__relation__external_id="P19")
    assert stopped.status == Run.Status.CANCELLED and stopped.error.startswith("stopped with evaluation stopped")
    worker = f"kgv-eval-{process.pid}@localhost"
    assert subprocess.run(["pgrep", "-f", worker], capture_output=True).returncode == 1  # the worker is gone too


@pytest.mark.slow
def test_runs_that_ask_a_model_refuse_a_worker_started_without_one():
    """A model-free evaluation's worker has no LLM endpoint: an evaluation whose runs ask a model must not
    queue them behind it (each would fail), and says which worker is in the way."""
    with workers.celery_worker(queue=queue_of(RUN_VERIFICATION), name=f"{NO_MODEL_PREFIX}test") as worker:
        with pytest.raises(WorkerUnfit, match=re.escape(worker.hostname)):
            with worker_pool(1, log=lambda line: None, needs_model=True):
                pass
        lines = []
        with worker_pool(1, log=lines.append, needs_model=False) as used:
            assert worker.hostname in used
        assert lines[0].startswith("Using the running Celery worker(s)")


def test_a_stop_that_lands_mid_query_is_still_recorded(world_kg, tmp_path, monkeypatch):
    """SIGTERM becomes KeyboardInterrupt wherever the driver is, also inside a query: the connection then still
    waits for that query's answer, and the stop must be recorded on a fresh one, not fail with it."""
    path = tmp_path / "mid.tsv"
    path.write_text(DATASET)
    evaluation, _ = prepare(EvaluationSpec(benchmark=str(path), kg_name=world_kg.name, n=4, mode="zero-shot", name="mid"))

    def interrupted_mid_query(*args, **kwargs):
        connection.ensure_connection()
        connection.connection.pgconn.send_query(b"SELECT pg_sleep(0.2)")  # sent, its answer never read
        raise KeyboardInterrupt("signal 15")

    monkeypatch.setattr(driver, "step", interrupted_mid_query)
    with pytest.raises(KeyboardInterrupt):
        drive(evaluation, progress=False)
    evaluation.refresh_from_db()
    assert evaluation.status == Evaluation.Status.INTERRUPTED and evaluation.heartbeat_at is None
