"""The compact profile against a scripted OpenAI-compatible server: the evidence brief, focused reading, the
fenced memories, the weighed verdict with its confidence, and the dispute flag."""

import math

import pytest

from tests.openai_server import ScriptedOpenAIServer, TextReply
from verifier.agent import prompts
from verifier.agent.llm import OpenAICompatibleLLM
from verifier.agent.weighing import FEATURES, Evidence, Weights, dispute_reason
from verifier.evaluation.configs import run_config
from verifier.memory import bank
from verifier.models import ConfidenceModel, Run, SupportItem, VerificationTask
from verifier.runner import execute_run
from verifier.services import start_run
from verifier.structure.rules import mine_rules
from verifier.wiring import settle_config

pytestmark = pytest.mark.django_db

PLAN = "=== Initial Impression ===\n[Correct] Because [E1].\n=== Strategic Plan ===\n[Step 1] Check the text with Wiki_Evidence"
SETTLED = ("=== Initial Impression ===\n[Incorrect] Because [E4] names another country.\n"
           "=== Strategic Plan ===\n[Step 1] Give the Final Answer from the brief.")
ANSWER = "Thought: The brief suffices.\nFinal Answer: [Correct] Because he was born in Cambridge [E9]."


@pytest.fixture
def task(world_kg):
    mine_rules(world_kg)
    kg = world_kg
    return VerificationTask.objects.create(kg=kg, head=kg.entities.get(external_id="Q42"),
                                           relation=kg.relations.get(external_id="P27"), tail=kg.entities.get(external_id="Q145"))


# The article reading's one word: Incorrect, at log-odds −0.8 for Correct.
ARTICLE_READING = TextReply("Incorrect", top_logprobs={"Incorrect": -0.4, "Correct": -1.2})


def reader(judgment: str, plan: str = PLAN, answer: str = ANSWER):
    """A scripted model: every sentence question gets ``judgment``, the article reading ARTICLE_READING; then
    the plan; then the answer."""

    def reply(body: dict) -> str:
        system = body["messages"][0]["content"]
        if system.startswith("You judge whether one sentence"):
            return judgment
        if system == prompts.PASSAGE_SYSTEM:
            return ARTICLE_READING
        if body["messages"][-1]["content"].startswith("Considering all the evidence above"):
            return TextReply("Correct", top_logprobs={"Correct": -0.2, "Incorrect": -1.8, "True": -4.0})
        if "=== Strategic Plan ===" in body["messages"][-1]["content"]:
            return plan
        return answer

    return reply


def run_compact(task, script, **config):
    """The run, executed at once: the world KG has no structural model, and these tests are about the agent, not the
    wait for a KG's first model (tests/verifier/structure/test_awaiting_training.py)."""
    with ScriptedOpenAIServer(script) as server:
        llm = OpenAICompatibleLLM(server.url, "test", "scripted", max_retries=0)
        run = start_run(task=task, config=settle_config({"profile": "compact", **config}, llm), queue=False)
        execute_run(run.pk, llm=llm, await_structure=False)
        run.refresh_from_db()
        return run, server.requests


def test_the_brief_gathers_profiles_facts_paths_and_judged_sentences_before_the_first_model_call(task):
    run, requests = run_compact(task, reader("supports"))
    steps = list(run.steps.order_by("seq"))
    assert [s.kind for s in steps][:3] == ["action", "observation", "plan"]
    assert steps[0].tool == "Evidence_Brief"
    brief = steps[1].content
    assert brief.startswith("Evidence brief for the claim (Douglas Adams, country of citizenship, United Kingdom):")
    assert "Douglas Adams: English writer and humorist (types: human)" in brief
    assert "Relation country of citizenship:" in brief
    # No structural model is trained for this KG: the brief says why instead of a probability.
    assert "No structural model has been trained for world yet" in brief
    assert "No other country of citizenship of Douglas Adams is in the KG." in brief  # the claim itself is withheld
    assert "(Douglas Adams) -[place of birth]-> (Cambridge) -[country]-> (United Kingdom)" in brief
    assert "Text (each sentence judged against the claim):" in brief and 'supports: "Douglas' in brief
    assert "(Douglas Adams) -[country of citizenship]-> (United Kingdom)" not in brief
    # Every line with a key is a stored evidence item; judged sentences carry their judgment.
    judged = SupportItem.objects.filter(run=run, kind="passage", payload__has_key="relevance")
    assert judged and all(item.payload["judgment"] == "supports" for item in judged)
    # The model read the opening of the head's article with the claim: one word, its log-odds kept as evidence.
    article = SupportItem.objects.get(run=run, kind="passage", payload__has_key="reading_logit")
    assert article.text.startswith("Douglas Noel Adams was an English author")
    assert article.payload["reading_logit"] == pytest.approx(-0.8, abs=1e-3) and article.payload["reading"] == "incorrect"
    assert "The article about Douglas Adams, read with the claim:" in brief
    assert f'[{article.key}] Reading the opening of "Douglas Adams" with the claim, the model puts P(Correct) at 0.31.' in brief
    assert run.assessment["reading_logit"] == pytest.approx(-0.8, abs=1e-3)
    # The first model calls are the reading questions (one sentence each, then the article), then the plan.
    readings = [r for r in requests if r.messages[0]["content"].startswith("You judge whether one sentence")]
    assert len(readings) == judged.count() and all(r.body["max_tokens"] <= 4 for r in readings)
    article_call = requests[len(readings)]
    assert article_call.messages[0]["content"] == prompts.PASSAGE_SYSTEM and article_call.body["max_tokens"] == 1
    asked = article_call.messages[1]["content"]
    assert "Douglas Noel Adams was an English author" in asked and "United Kingdom: " in asked
    assert asked.endswith("Claim: <<<claim: (Douglas Adams, country of citizenship, United Kingdom)>>>\n"
                          "Is this claim true? Answer Correct or Incorrect.")
    assert "=== Strategic Plan ===" in requests[len(readings) + 1].messages[-1]["content"]


def test_memories_are_fenced_lessons_and_never_the_claim_under_decision(task):
    bank.add_entry(triple_text="Jean-Paul Sartre country of citizenship France",
                   trajectory="Thought: long trajectory …\nFinal Answer: [Correct] Because he was French [E2].",
                   verdict="correct", relation_label="country of citizenship", kg=task.kg,
                   lesson="Sartre's own article calls him a French philosopher [E2].")
    run, requests = run_compact(task, reader("silent"))
    assert run.memories_used.count() == 1
    decision = [r for r in requests if not r.messages[-1]["content"].startswith("Considering all")][-1].messages
    last_user = [m["content"] for m in decision if m["role"] == "user"][-1]
    assert last_user.endswith("The claim under verification is: <<<claim: Douglas Adams — country of citizenship — "
                              "United Kingdom>>>. Decide about this claim only.")
    opening = decision[1]["content"]
    assert "<<<past case about a different claim: \"Jean-Paul Sartre country of citizenship France\"" in opening
    assert "Sartre's own article calls him a French philosopher" in opening and "long trajectory" not in opening
    assert "never use them as evidence for this claim" in opening
    # The claim under test is the claim of the prompt; the memory's claim only appears inside its fence.
    assert opening.startswith("Claim to verify: <<<claim: (Douglas Adams [Q42], country of citizenship [P27], United Kingdom "
                              "[Q145])>>>")
    assert opening.count("Jean-Paul Sartre") == 1


def test_a_weak_or_other_relation_memory_is_refused(task):
    bank.add_entry(triple_text="Douglas Hurd place of birth Marlborough", trajectory="x", verdict="correct",
                   relation_label="place of birth", kg=task.kg, lesson="y")
    assert bank.for_claim("Douglas Adams country of citizenship United Kingdom", 3, "country of citizenship") == []


def _fit_weights(**coefficients) -> ConfidenceModel:
    values = [coefficients.get(name, 0.0) for name in FEATURES]
    return ConfidenceModel.objects.create(features=FEATURES, coefficients=values, intercept=0.0, source="hand-made")


def test_the_article_is_read_only_while_the_weighing_in_force_weighs_the_reading(task):
    _fit_weights(contradicts=-3.0)  # the reading weighs nothing: its call would only cost time
    run, requests = run_compact(task, reader("silent"))
    assert not any(r.messages[0]["content"] == prompts.PASSAGE_SYSTEM for r in requests)
    assert not SupportItem.objects.filter(run=run, payload__has_key="reading_logit").exists()
    assert run.assessment["reading_logit"] is None and run.verdict in ("correct", "incorrect")
    ConfidenceModel.objects.update(active=False)
    _fit_weights(reading_logit=0.5)
    run, requests = run_compact(task, reader("silent"))
    assert sum(r.messages[0]["content"] == prompts.PASSAGE_SYSTEM for r in requests) == 1
    assert run.assessment["reading_logit"] == pytest.approx(-0.8, abs=1e-3)


def test_the_compact_verdict_is_the_weighed_evidence_when_it_outweighs_the_model_answer(task):
    _fit_weights(agent_correct=0.5, contradicts=-3.0)
    run, _ = run_compact(task, reader("contradicts"), verdict_probe=True)
    answer = "correct"  # the scripted model said Correct, and its one-token probe leans Correct
    assert run.assessment["agent_verdict"] == answer
    assert run.assessment["agent_logit"] == pytest.approx(math.log(math.exp(-0.2) + math.exp(-4.0)) + 1.8, abs=1e-3)
    assert "verdict probe: the model puts P(Correct) at" in run.steps.filter(kind="thought").last().content
    assert run.verdict == "incorrect"  # 0.5 − 3 × (sentences judged contradicting) < 0
    assert run.explanation.startswith("The weighed evidence outweighs the language model's own answer (Correct): weighing")
    assert "Because he was" not in run.explanation  # the model's prose is not the explanation
    p_true = run.assessment["p_true"]
    assert run.confidence == pytest.approx(1 - p_true, abs=1e-4) and run.confidence > 0.9
    verdict_step = run.steps.get(kind="verdict")
    assert verdict_step.content.startswith("[Incorrect]")
    cited = set(SupportItem.objects.filter(run=run, cited=True).values_list("key", flat=True))
    assert set(run.assessment["keys"]["contradicts"]) <= cited
    assert run.assessment["decided_by"] == "evidence"


def test_a_run_the_evidence_decided_teaches_that_evidence_not_the_model_overruled_reasoning(task):
    _fit_weights(agent_correct=0.5, contradicts=-3.0)
    run, _ = run_compact(task, reader("contradicts"))
    lesson = bank.lesson_of(run)
    assert lesson.startswith(f"Decided by the weighed evidence, which gave the claim a probability of "
                             f"{run.assessment['p_true']:.2f} of being true: ")
    assert "Because he was" not in lesson and "model's answer" not in lesson  # the overruled Correct's reason
    first_cited = SupportItem.objects.filter(run=run, cited=True).order_by("key").first()
    assert first_cited.text.strip().rstrip(".") in lesson
    assert len(lesson) <= prompts.LESSON_CHARS and lesson.endswith(".")


def test_sentences_are_judged_only_while_the_weighing_in_force_weighs_the_judgments(task):
    _fit_weights(relevance=-1.0)
    run, requests = run_compact(task, reader("contradicts"))
    judging = [r for r in requests if r.messages[0]["content"] == prompts.READING_SYSTEM]
    assert not judging and run.assessment["reading"] == {"supports": 0, "contradicts": 0, "silent": 0}
    brief = run.steps.get(kind="observation", tool="Evidence_Brief").content
    assert "Text (the sentences most relevant to the claim):" in brief and 'contradicts: "' not in brief
    judged, requests = run_compact(task, reader("contradicts"), judge_unweighed=True)
    assert sum(r.messages[0]["content"] == prompts.READING_SYSTEM for r in requests) == judged.assessment["reading"]["contradicts"] > 0
    assert judged.assessment["p_true"] == run.assessment["p_true"]  # unweighed: the same verdict, calls saved


def test_signals_the_weighing_gives_no_weight_are_named_as_such_and_not_cited(task):
    """A fitted weighing may give the model's answer and the sentence judgments no weight (the shipped CoDEx-S
    one does): the explanation must not present them as weighed, nor the verdict cite their sentences."""
    _fit_weights(relevance=-1.0)  # the sentences count only by how close the best one is to the claim
    answer = "Thought: The profiles suffice.\nFinal Answer: [Correct] Because of [E1]."
    run, _ = run_compact(task, reader("contradicts", answer=answer), judge_unweighed=True)
    judged = run.assessment["reading"]["contradicts"]
    assert run.verdict == "incorrect" and judged >= 1
    assert run.assessment["unweighed"] == ["contradicts", "agent_verdict"]
    assert run.explanation == (
        f"The weighed evidence outweighs the language model's own answer (Correct): "
        f"weighing the best sentence read matching the claim at {run.assessment['relevance']:.2f} (its similarity in meaning, "
        f"plus a bonus when it names the other end) gives a probability of "
        f"{run.assessment['p_true']:.2f} that the triple is true; left out, as the confidence model gives no weight to them: "
        f"{judged} sentence(s) judged to contradict the claim, the language model's own answer (Correct).")
    cited = set(SupportItem.objects.filter(run=run, cited=True).values_list("key", flat=True))
    assert run.assessment["keys"]["contradicts"] and not set(run.assessment["keys"]["contradicts"]) & cited


def test_the_paper_profile_keeps_the_model_answer_and_gets_a_confidence(task):
    _fit_weights(agent_correct=0.5, structural_missing=-1.0)
    script = [PLAN, "Thought: check.\nAction: KG_Neighbor(Douglas Adams)", "Thought: ok.\nFinal Answer: [Correct] Because of [E1]."]
    with ScriptedOpenAIServer(script) as server:
        llm = OpenAICompatibleLLM(server.url, "test", "scripted", max_retries=0)
        run = start_run(task=task, config=settle_config({"profile": "paper"}, llm), queue=False)
        execute_run(run.pk, llm=llm, await_structure=False)
    run.refresh_from_db()
    assert run.config["profile"] == "paper" and run.verdict == "correct"  # σ(0.5 − 1) < 0.5, yet the answer stands
    assert run.assessment["p_true"] == pytest.approx(0.3775, abs=1e-3)
    assert run.confidence == pytest.approx(0.3775, abs=1e-3)
    assert run.assessment["decided_by"] == "model"
    assert bank.lesson_of(run).startswith(f"{run.explanation} Decisive evidence: ")  # a capable model's reason is kept


def test_a_repeated_action_ends_the_loop_in_the_mandatory_judgment(task):
    def script(body: dict) -> str:
        last = body["messages"][-1]["content"]
        if last.startswith("Observation") or last.startswith("Now verify"):
            return "Thought: Look at his neighbours.\nAction: KG_Neighbor(Douglas Adams)"
        return reader("silent")(body)

    run, _ = run_compact(task, script, t_max=4)
    actions = list(run.steps.filter(kind="action").values_list("content", flat=True))
    assert actions[1:] == ["KG_Neighbor(Douglas Adams)"] * 2  # after the brief: asked again once, then judged
    thoughts = run.steps.filter(kind="thought").values_list("content", flat=True)
    assert any(t.startswith("(an action was repeated: mandatory judgment)") for t in thoughts)
    assert run.status == Run.Status.SUCCEEDED and run.verdict == "correct"
    assert {"forced", "looped"} <= set(run.signals)


def test_without_a_fitted_weighing_the_answer_stands_without_confidence(task):
    run, _ = run_compact(task, reader("contradicts"))
    assert run.status == Run.Status.SUCCEEDED and run.verdict == "correct" and run.confidence is None
    assert run.assessment["p_true"] is None and run.assessment["reading"]["contradicts"] >= 1


def test_disputed_when_the_verdict_and_the_structural_probability_disagree_clearly():
    assert dispute_reason("correct", 0.2) == \
        "The verdict is Correct, but the structural model gives the triple a probability of 0.20."
    assert dispute_reason("incorrect", 0.8).startswith("The verdict is Incorrect")
    assert dispute_reason("correct", 0.45) == ""  # not clearly
    assert dispute_reason("correct", None) == ""  # no structural evidence, no dispute
    # A small model's Correct that the weighing overruled is not a disputed verdict: the verdict sides with the structure.
    assert dispute_reason("incorrect", 0.2) == ""
    assert dispute_reason("correct", 0.2).startswith("The verdict is Correct")  # evidence mode
    weights = Weights(tuple([1.0] + [0.0] * (len(FEATURES) - 1)), 0.0)
    assert weights.probability(Evidence("correct")) == pytest.approx(0.7311, abs=1e-4)


def test_stored_disputes_are_recomputed_against_the_verdict(task):
    from importlib import import_module

    from django.apps import apps

    overruled = {"agent_verdict": "correct", "structural_probability": 0.1,
                 "disputed_reason": "The agent answered Correct, but the structural model gives the triple a probability of 0.10."}
    old = Run.objects.create(task=task, status=Run.Status.SUCCEEDED, verdict="incorrect", disputed=True, assessment=overruled)
    against = Run.objects.create(task=task, status=Run.Status.SUCCEEDED, verdict="correct", disputed=False,
                                 assessment={"agent_verdict": "correct", "structural_probability": 0.1})
    import_module("verifier.migrations.0020_disputes_follow_the_verdict").recompute(apps, None)
    old.refresh_from_db()
    against.refresh_from_db()
    assert not old.disputed and old.assessment["disputed_reason"] == "" and old.assessment["agent_verdict"] == "correct"
    assert against.disputed and against.assessment["disputed_reason"].startswith("The verdict is Correct, but")


def test_a_plan_that_answers_from_the_brief_settles_the_claim_without_a_loop(task):
    run, requests = run_compact(task, reader("silent", plan=SETTLED))
    kinds = list(run.steps.order_by("seq").values_list("kind", flat=True))
    assert kinds == ["action", "observation", "plan", "verdict"]  # the brief, the plan, the verdict (no probe by default)
    assert run.assessment["agent_verdict"] == "incorrect" and run.verdict == "incorrect"
    assert "names another country" in run.explanation
    assert "E4" in set(SupportItem.objects.filter(run=run, cited=True).values_list("key", flat=True))
    plan_request = next(r for r in requests if "=== Strategic Plan ===" in r.messages[-1]["content"])
    assert plan_request.messages[-1]["content"].endswith("Decide about this claim only.")
    # The planner reads the brief's digest: the lines that bear on the verdict, under the brief's keys.
    planned = plan_request.messages[-1]["content"]
    assert "No structural model has been trained for world yet" in planned
    assert "No other country of citizenship of Douglas Adams is in the KG." in planned
    assert "Text (each sentence judged against the claim):" in planned and 'silent: "' in planned
    assert "(types: human)" not in planned and "(Cambridge) -[country]->" not in planned
    brief = run.steps.get(kind="observation", tool="Evidence_Brief").content
    assert "(types: human)" in brief and "(Cambridge) -[country]->" in brief
    assert not any(r.messages[-1]["content"].startswith("Now verify") for r in requests)


def test_a_plan_without_an_impression_goes_on_to_the_loop(task):
    no_impression = "=== Strategic Plan ===\n[Step 1] Give the Final Answer from the brief."
    run, requests = run_compact(task, reader("silent", plan=no_impression))
    assert any(r.messages[-1]["content"].startswith("Now verify") for r in requests)
    assert run.status == Run.Status.SUCCEEDED and run.verdict == "correct"  # the loop's Final Answer


def test_the_evidence_mode_weighs_the_brief_without_asking_a_model(task):
    _fit_weights(relevance=2.0, mentioned=1.0)
    run = start_run(task=task, config={"mode": "evidence"}, queue=False)
    execute_run(run.pk, await_structure=False)  # no model: a call would need an endpoint, and none is configured here
    run.refresh_from_db()
    kinds = list(run.steps.order_by("seq").values_list("kind", flat=True))
    assert kinds == ["action", "observation", "verdict"] and run.status == Run.Status.SUCCEEDED
    brief = run.steps.get(kind="observation").content
    assert "Text (the sentences most relevant to the claim):" in brief and 'supports: "' not in brief
    assert run.assessment["agent_verdict"] == "" and run.assessment["reading"] == {"supports": 0, "contradicts": 0, "silent": 0}
    assert run.verdict == "correct" and run.assessment["p_true"] > 0.5  # σ(2 · relevance + mentioned) with relevance > 0
    assert run.confidence == pytest.approx(run.assessment["p_true"], abs=1e-4)
    assert run.explanation.startswith("Without a language model, weighing")
    assert "the model's own answer" not in run.explanation
    assert not SupportItem.objects.filter(run=run, payload__has_key="reading_logit").exists()  # no model read the article
    assert run.assessment["reading_logit"] is None


def test_the_reading_mode_weighs_the_brief_and_one_reading_of_the_article(task):
    _fit_weights(reading_logit=2.0, relevance=0.1)
    run, requests = run_compact(task, reader("supports"), mode="reading")
    kinds = list(run.steps.order_by("seq").values_list("kind", flat=True))
    assert kinds == ["action", "observation", "verdict"] and run.status == Run.Status.SUCCEEDED
    assert [r.messages[0]["content"] for r in requests] == [prompts.PASSAGE_SYSTEM]  # one call: no sentence judged, no plan
    assert run.assessment["reading_logit"] == pytest.approx(-0.8, abs=1e-3) and run.assessment["agent_verdict"] == ""
    assert run.verdict == "incorrect"  # σ(2 × −0.8 + 0.1 · relevance) < 0.5
    assert run.explanation.startswith("From the brief and the model's reading of the head's article, weighing")
    assert "the model's reading of the head's article (0.31 for Correct) [E" in run.explanation
    assert set(run.assessment["keys"]["reading"]) <= set(SupportItem.objects.filter(run=run, cited=True).values_list("key", flat=True))
    assert run.prompt_tokens > 0


def test_without_external_tools_no_article_is_read(task):
    _fit_weights(reading_logit=2.0)
    run, requests = run_compact(task, reader("supports"), mode="reading", external_tools=False)
    assert requests == [] and run.assessment["reading_logit"] is None
    assert run.verdict == "correct" and run.assessment["p_true"] == pytest.approx(0.5)  # nothing weighed: σ(0)


def test_the_evidence_mode_runs_as_an_evaluation_ablation_configures_it(task):
    """``evaluate --mode evidence --ablate structural-tools`` measures what the weighing is worth without them."""
    _fit_weights(relevance=2.0, mentioned=1.0)
    runs = {}
    for ablations in ((), ("structural-tools",), ("external-tools",)):
        run = start_run(task=task, config=run_config("evidence", ablations), queue=False)
        execute_run(run.pk, await_structure=False)
        run.refresh_from_db()
        runs[ablations] = run
    full, no_structure, no_text = (runs[a].steps.get(kind="observation").content for a in runs)
    assert "Structural model:" in full and "Rules:" in full and "Text (" in full
    assert "Structural model:" not in no_structure and "Rules:" not in no_structure and "Text (" in no_structure
    assert "Text (" not in no_text and "Rules:" in no_text
    assert runs[("external-tools",)].assessment["p_true"] == pytest.approx(0.5)  # nothing left that weighs: σ(0)
    with pytest.raises(ValueError, match="asks no planner and recalls no memory"):
        run_config("evidence", ("memory",))


def test_the_evidence_mode_without_a_fitted_weighing_gives_no_verdict_and_says_why(task, shipped_weighing):
    """A run is refused while nothing weighs (test_runs.py); one queued before its weighing stood down says why it
    ends without a verdict."""
    run = start_run(task=task, config={"mode": "evidence"}, queue=False)
    ConfidenceModel.objects.update(active=False)
    execute_run(run.pk, await_structure=False)
    run.refresh_from_db()
    assert run.status == Run.Status.SUCCEEDED and run.verdict == "not_enough_evidence" and run.confidence is None
    assert "No fitted weighing is in force (manage.py calibrate)" in run.explanation
