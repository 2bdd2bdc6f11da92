"""A run's configuration is validated and settled once, when the run is created (verifier/wiring.py settle_config),
and the worker runs it as stored; the model endpoint comes from the settings alone."""

import pytest
from django.test import override_settings

from tests.openai_server import ScriptedOpenAIServer
from tests.verifier.agent.test_runs import PLAN, kinds, task  # noqa: F401 — the fixture
from verifier.agent.config import AgentConfig
from verifier.agent.llm import OpenAICompatibleLLM
from verifier.models import Run
from verifier.runner import execute_run
from verifier.services import start_run
from verifier.wiring import llm_endpoint, settle_config

EMBEDDED = {"LLM_BASE_URL": "", "LLM_MODEL": "local", "LLM_LOCAL_GRAMMAR": True}  # no endpoint: the embedded model
CAPABLE = {"LLM_BASE_URL": "https://llm.example.org/v1", "LLM_MODEL": "big-model", "LLM_LOCAL_GRAMMAR": False}


@override_settings(**EMBEDDED)
def test_an_agent_run_for_the_embedded_model_settles_the_compact_profile_and_its_defaults():
    settled = settle_config({"use_memory": False})
    assert settled.request == {"use_memory": False}
    agent = settled.agent
    assert (agent.profile, agent.t_max, agent.memory_k, agent.max_step_tokens) == ("compact", 4, 2, 160)
    assert agent.use_grammar and not agent.use_memory


@override_settings(**CAPABLE, KGV_T_MAX=7, KGV_MEMORY_K=5, LLM_TOOL_CALLING=True)
def test_an_agent_run_for_a_capable_endpoint_settles_the_paper_profile_from_the_settings():
    agent = settle_config({}).agent
    assert (agent.profile, agent.t_max, agent.memory_k) == ("paper", 7, 5)
    assert not agent.use_grammar and agent.tool_calling


@override_settings(**EMBEDDED)
def test_what_the_request_says_wins_over_every_default():
    agent = settle_config({"profile": "paper", "t_max": 3, "use_grammar": False, "tool_calling": True}).agent
    assert (agent.profile, agent.t_max, agent.use_grammar, agent.tool_calling) == ("paper", 3, False, True)


@override_settings(**EMBEDDED)
def test_a_model_free_mode_asks_no_grammar_and_gets_the_paper_defaults():
    agent = settle_config({"mode": "evidence"}).agent
    assert agent.mode == "evidence" and not agent.use_grammar and agent.profile == "paper"


@override_settings(**EMBEDDED)
def test_the_client_that_will_answer_settles_what_the_endpoint_decides():
    capable = OpenAICompatibleLLM("https://llm.example.org/v1", "key", "big-model", supports_grammar=True)
    agent = settle_config({}, capable).agent
    assert agent.profile == "paper" and agent.use_grammar


@pytest.mark.parametrize("request_, message", [
    ({"t_max": 99}, "t_max must be between 1 and 30"),
    ({"budget": 5}, "unknown setting(s) budget"),
    ({"profile": "tiny"}, "unknown profile 'tiny'"),
    (["t_max"], "a configuration is a JSON object"),
])
def test_a_bad_request_is_refused_with_what_is_wrong(request_, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        settle_config(request_)


def test_the_settled_configuration_is_every_setting_and_reads_back_the_same():
    agent = settle_config({"t_max": 5}).agent
    assert set(agent.to_dict()) == set(AgentConfig.__dataclass_fields__)
    assert AgentConfig.from_dict(agent.to_dict()) == agent


@pytest.mark.django_db
def test_the_worker_runs_the_configuration_settled_at_creation_and_never_rewrites_it(task):  # noqa: F811
    """Settled while the paper step limit was 2; the worker runs after it changed to 10 and still stops after two
    steps with the mandatory judgment, leaving the stored request and configuration as they were."""
    looping = "Thought: more.\nAction: KG_Neighbor(Douglas Adams)"
    with ScriptedOpenAIServer([PLAN, looping, looping, "Final Answer: [Correct] Because of [E1]."]) as server:
        llm = OpenAICompatibleLLM(server.url, "test", "scripted", max_retries=0)
        with override_settings(KGV_T_MAX=2):
            run = start_run(task=task, config=settle_config({"profile": "paper"}, llm), queue=False)
        stored = dict(run.config)
        with override_settings(KGV_T_MAX=10):
            execute_run(run.pk, llm=llm, await_structure=False)
    run.refresh_from_db()
    assert run.status == Run.Status.SUCCEEDED and run.model == "scripted"
    assert kinds(run).count("action") == 2 and "mandatory judgment" in run.steps.get(seq=8).content
    assert run.request == {"profile": "paper"} and run.config == stored and run.config["t_max"] == 2


@override_settings(LLM_BASE_URL="https://llm.example.org/v1", LLM_MODEL="big-model")
def test_the_model_endpoint_is_the_settings_not_the_environment(monkeypatch):
    monkeypatch.setenv("LLM_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("LLM_MODEL", "other")
    assert llm_endpoint() == ("https://llm.example.org/v1", "big-model")
