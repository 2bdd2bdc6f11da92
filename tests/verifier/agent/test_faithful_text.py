"""What a curator reads as the agent's is true: the model's plan, thoughts and explanation as checked against the
evidence they cite, the plan's steps as they run, and a weighed verdict explained by its evidence."""

import re

import pytest

from tests.openai_server import ScriptedOpenAIServer
from tests.verifier.agent.test_compact import _fit_weights, reader
from tests.verifier.agent.test_compact import task as compact_task  # noqa: F401 — the fixture
from verifier.agent.llm import OpenAICompatibleLLM
from verifier.agent.steps import PlanStep
from verifier.models import ConfidenceModel, SupportItem
from verifier.runner import execute_run
from verifier.services import start_run
from verifier.wiring import settle_config

pytestmark = pytest.mark.django_db

# The shipped transcript's misreading, on this KG: the brief holds no Italy, and no key is cited.
MISREAD = ("=== Initial Impression ===\n[Correct] Because the KG says Douglas Adams is a citizen of Italy, which directly "
           "supports the claim.\n=== Strategic Plan ===\n[Step 1] Give the Final Answer from the brief.")


def run(task, script, grammar=False, **config):
    with ScriptedOpenAIServer(script) as server:
        llm = OpenAICompatibleLLM(server.url, "test", "scripted", max_retries=0, supports_grammar=grammar)
        started = start_run(task=task, config=settle_config(config, llm), queue=False)
        execute_run(started.pk, llm=llm, await_structure=False)  # the world KG has no structural model to wait for
        started.refresh_from_db()
        return started, server.requests


def test_a_plan_that_attributes_to_the_kg_what_the_evidence_does_not_hold_shows_it_withheld(compact_task):  # noqa: F811
    _fit_weights(contradicts=-3.0, relevance=1.0)
    done, requests = run(compact_task, reader("silent", plan=MISREAD), profile="compact")
    plan = done.steps.get(kind="plan").content
    assert plan.startswith(PlanStep.HEADING)
    assert "[Correct] Because [withheld: it speaks of the KG or a source but cites no evidence key]" in plan
    assert "Italy" not in plan
    # The explanation is the weighed evidence's, not the model's prose.
    assert "Italy" not in done.explanation and done.assessment["decided_by"] == "evidence"
    assert done.explanation.startswith("The weighed evidence ")
    assert "gives a probability of" in done.explanation


def test_a_settled_plan_lists_only_the_step_that_runs(compact_task):  # noqa: F811
    checks_the_brief = ("=== Initial Impression ===\n[Incorrect] Because [E4].\n=== Strategic Plan ===\n"
                        "[Step 1] Check for contradictions with Read_Sentences.")
    done, requests = run(compact_task, reader("silent", plan=checks_the_brief), profile="compact")
    kinds = list(done.steps.order_by("seq").values_list("kind", flat=True))
    assert kinds == ["action", "observation", "plan", "verdict"]  # Read_Sentences ran in the brief: no loop
    plan = done.steps.get(kind="plan").content
    assert plan.endswith("=== Strategic Plan ===\n[Step 1] Give the Final Answer from the brief.\n"
                         "(The plan's other steps name only what the brief already gathered: they do not run.)")
    assert "contradictions" not in plan
    assert "[Incorrect] Because [E4]." in plan


def test_the_compact_planner_is_asked_for_its_answer_and_keys_not_a_sentence(compact_task):  # noqa: F811
    done, requests = run(compact_task, reader("silent"), grammar=True, profile="compact")
    plan_request = next(r for r in requests if "=== Strategic Plan ===" in r.messages[-1]["content"])
    assert "only the keys, in square brackets, of the brief lines it rests on" in plan_request.messages[-1]["content"]
    grammar = plan_request.body["grammar"]
    assert 'Because " key (" " key)? (" " key)? "."' in grammar
    # Only the keys of the lines the planner read can be cited.
    digest_keys = sorted(set(re.findall(r"\[(E\d+)\]", plan_request.messages[-1]["content"])), key=lambda k: int(k[1:]))
    assert re.search(r"^key ::= (.*)$", grammar, re.MULTILINE).group(1) == " | ".join(f'"[{k}]"' for k in digest_keys)


PAPER_PLAN = ("=== Initial Impression ===\n[Correct] Because Douglas Adams was English.\n=== Strategic Plan ===\n"
              "[Step 1] KG_Path(Douglas Adams, United Kingdom)")


def test_the_papers_explanation_keeps_only_what_the_cited_evidence_holds(compact_task):  # noqa: F811
    done, _ = run(compact_task, [
        PAPER_PLAN,
        "Thought: The KG puts him in Paris [E9].\nAction: KG_Path(Douglas Adams, United Kingdom)",
        "Thought: Born in Cambridge [E1].\nFinal Answer: [Correct] Because he was born in Cambridge, in the United Kingdom "
        "[E1]. The KG also says he was a citizen of France [E1].",
    ], profile="paper")
    assert done.verdict == "correct"
    assert done.explanation == "he was born in Cambridge, in the United Kingdom [E1]."
    assert "France" not in done.explanation
    plan = done.steps.get(kind="plan").content
    assert "[Correct] Because Douglas Adams was English. [unverified: the model's own reading]" in plan
    assert plan.endswith("[Step 1] KG_Path(Douglas Adams, United Kingdom)\n"
                         "(What the model means to do; the steps it takes follow.)")
    first_thought = done.steps.filter(kind="thought").order_by("seq").first().content
    assert first_thought == "[withheld: it cites E9, which the run never retrieved]"
    cited = set(SupportItem.objects.filter(run=done, cited=True).values_list("key", flat=True))
    assert cited == {"E1"}


def test_a_model_answer_with_no_checkable_reason_is_explained_by_its_answer_and_citations(compact_task):  # noqa: F811
    done, _ = run(compact_task, [
        PAPER_PLAN,
        "Thought: Look.\nAction: KG_Path(Douglas Adams, United Kingdom)",
        "Thought: Done.\nFinal Answer: [Correct] Because the graph shows Italy [E1].",
    ], profile="paper")
    assert done.explanation == ("The language model answered Correct, citing [E1]. Its reasons are not shown: no evidence "
                                "it cites holds them (its words are in the steps above).")


def test_a_weighed_verdict_says_whether_it_agrees_with_the_models_answer_without_repeating_its_words(compact_task):  # noqa: F811
    _fit_weights(contradicts=-3.0, agent_correct=0.5)
    against, _ = run(compact_task, reader("contradicts"), profile="compact")
    assert against.assessment["agent_verdict"] == "correct" and against.verdict == "incorrect"
    assert against.explanation.startswith("The weighed evidence outweighs the language model's own answer (Correct): ")
    ConfidenceModel.objects.update(active=False)
    _fit_weights(agent_correct=2.0)
    agreeing, _ = run(compact_task, reader("silent"), profile="compact")
    assert agreeing.verdict == "correct"
    assert agreeing.explanation.startswith("The weighed evidence agrees with the language model's own answer (Correct): "
                                           "weighing the language model's own answer (Correct) gives a probability of 0.88")
    for done in (against, agreeing):
        assert "Because" not in done.explanation and "born in Cambridge" not in done.explanation
