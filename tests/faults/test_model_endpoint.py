"""Fault injection at the model endpoint: a real run against a real HTTP server that fails in each way a model
server can. Every run ends — succeeded from what it had, or failed with the reason — with every step it stored
kept, and its task back where a curator can act on it."""

import pytest

from tests.faults.tally import tally
from tests.openai_server import ErrorReply, MalformedReply, ScriptedOpenAIServer, TextReply
from tests.verifier.agent.test_runs import PLAN, task  # noqa: F401 — the fixture
from verifier.agent.llm import OpenAICompatibleLLM
from verifier.models import Run, Step, VerificationTask
from verifier.runner import execute_run
from verifier.services import start_run
from verifier.wiring import settle_config

pytestmark = pytest.mark.django_db

INJECTED = tally("Model-endpoint faults", "faults_injected", "runs_left_unfinished")


def _count(run: Run) -> None:
    INJECTED["faults_injected"] += 1
    INJECTED["runs_left_unfinished"] += run.status in Run.IN_FLIGHT

STEP = "Thought: look.\nAction: KG_Neighbor(Douglas Adams, country of citizenship)"

# (fault, the script after a good plan, the outcome, words the failure reason must hold)
FAULTS = [
    ("500s", [500] * 4, Run.Status.FAILED, "500"),
    ("503 then recovery", [ErrorReply(503, retry_after=0.01), "Final Answer: [Correct] Because of the plan."],
     Run.Status.SUCCEEDED, ""),
    ("an HTML page with 200", [MalformedReply()] * 4, Run.Status.FAILED, ""),
    ("hanging past the timeout", [TextReply(STEP, delay=3.0)] * 4, Run.Status.FAILED, "timed out"),
    ("empty replies", [""] * 6, Run.Status.SUCCEEDED, ""),  # the plan's impression stands, and says so
    ("garbage text", ["<<<%%% 0xDEADBEEF >>>"] * 6, Run.Status.SUCCEEDED, ""),
    ("a reply cut off by the token limit", [TextReply("Thought: the answer is", finish_reason="length")] * 6,
     Run.Status.SUCCEEDED, ""),
]


@pytest.mark.parametrize("name, script, outcome, reason", FAULTS, ids=[f[0] for f in FAULTS])
def test_a_faulty_model_endpoint_never_leaves_a_run_running(task, name, script, outcome, reason):  # noqa: F811
    with ScriptedOpenAIServer([PLAN, *script], default=TextReply("Final Answer: [Correct] Because.")) as server:
        llm = OpenAICompatibleLLM(server.url, "test", "scripted", max_retries=1, backoff=0.01, timeout=1.0)
        run = start_run(task=task, config=settle_config({"profile": "paper", "t_max": 2}, llm), queue=False)
        execute_run(run.pk, llm=llm, await_structure=False)
    run.refresh_from_db()
    _count(run)
    assert run.status == outcome, (name, run.error)
    assert run.finished_at is not None
    assert Step.objects.filter(run=run, kind="plan").exists()  # what was stored before the fault is kept
    if outcome == Run.Status.FAILED:
        assert run.error and reason.lower() in run.error.lower(), run.error
        assert VerificationTask.objects.get(pk=task.pk).status == VerificationTask.Status.PENDING
    else:
        assert run.verdict in ("correct", "incorrect")
        assert VerificationTask.objects.get(pk=task.pk).status == VerificationTask.Status.VERIFIED


def test_an_endpoint_that_never_answers_anything_readable_fails_the_run(task):  # noqa: F811
    with ScriptedOpenAIServer([], default=TextReply("")) as server:
        llm = OpenAICompatibleLLM(server.url, "test", "scripted", max_retries=0, timeout=1.0)
        run = start_run(task=task, config=settle_config({"profile": "paper", "t_max": 1}, llm), queue=False)
        execute_run(run.pk, llm=llm, await_structure=False)
    run.refresh_from_db()
    _count(run)
    assert run.status == Run.Status.FAILED and "no readable answer" in run.error
    assert VerificationTask.objects.get(pk=task.pk).status == VerificationTask.Status.PENDING
