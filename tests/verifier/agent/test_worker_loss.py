"""A Celery pool process killed in the middle of an investigation: nothing stored is lost or duplicated."""

import os
import signal
import time

import pytest

from tests.openai_server import ScriptedOpenAIServer, TextReply
from tests.workers import celery_worker, configured_as, wait_for
from verifier.models import Run, VerificationTask
from verifier.services import start_run
from verifier.tasks import run_verification

pytestmark = pytest.mark.django_db(transaction=True)

PLAN = "=== Initial Impression ===\n[Correct] Because he was English.\n=== Strategic Plan ===\n[Step 1] KG_Neighbor(Douglas Adams)"
LOOK = "Thought: Look at his neighbours.\nAction: KG_Neighbor(Douglas Adams)"
ANSWER = "Thought: He was born in Cambridge [E1].\nFinal Answer: [Correct] Because he was born in Cambridge [E1]."



@pytest.mark.slow
def test_a_killed_pool_process_leaves_a_failed_run_with_its_steps_then_a_new_run_succeeds(world_kg):
    kg = world_kg
    task = VerificationTask.objects.create(kg=kg, head=kg.entities.get(external_id="Q42"),
                                           relation=kg.relations.get(external_id="P27"), tail=kg.entities.get(external_id="Q145"))
    # Slow enough to kill the process between two steps; once the script is used up every reply is the answer.
    script = [PLAN] + [TextReply(LOOK, delay=1.0)] * 6
    with ScriptedOpenAIServer(script, default=ANSWER) as server:
        env = {"LLM_BASE_URL": server.url, "LLM_MODEL": "scripted", "LLM_API_KEY": "test", "LLM_GRAMMAR": "0"}
        with celery_worker(env=env) as worker, configured_as(env):
            # No structural tools: a run on a KG without a structural model would wait for its first one's training.
            run = start_run(task=task, queue=False, config={"use_memory": False, "structural_tools": False})
            run_verification.apply_async(args=[run.pk], queue=worker.queue)
            wait_for(lambda: run.steps.count() >= 4, 120, "the first steps to be stored")
            (child,) = worker.pool_children()
            os.kill(child, signal.SIGKILL)
            stored_then = run.steps.count()

            # The task goes back to the queue (acks late + reject on worker lost) and the next pool process
            # finds the run half done: it closes it as failed and stores nothing more.
            wait_for(lambda: Run.objects.get(pk=run.pk).status == Run.Status.FAILED, 60, "the run to be closed as failed")
            run.refresh_from_db()
            assert "stopped mid-run" in run.error
            seqs = list(run.steps.order_by("seq").values_list("seq", flat=True))
            assert seqs == list(range(1, stored_then + 1))
            assert VerificationTask.objects.get(pk=task.pk).status == VerificationTask.Status.PENDING

            again = start_run(task=task, queue=False, config={"use_memory": False, "use_planning": False,
                                                                "structural_tools": False})
            run_verification.apply_async(args=[again.pk], queue=worker.queue)
            wait_for(lambda: Run.objects.get(pk=again.pk).status in {"succeeded", "failed"}, 90, "the second run")
            again.refresh_from_db()
            assert again.status == Run.Status.SUCCEEDED and again.verdict == "correct", again.error
    time.sleep(0.5)
    assert Run.objects.get(pk=run.pk).steps.count() == len(seqs)  # nothing was appended to the failed run later
