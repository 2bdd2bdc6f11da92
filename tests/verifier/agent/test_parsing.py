import pytest

from verifier.agent.parsing import ParseError, cited_keys, parse_final, parse_plan, parse_step


def test_plan_in_the_papers_format():
    plan = parse_plan("=== Initial Impression ===\n[Correct] Because Einstein was born in Ulm.\n"
                      "=== Strategic Plan ===\n[Step 1] KG_Neighbor(Albert Einstein)\n[Step 2] Wiki_Evidence(Albert Einstein)")
    assert (plan.impression, plan.reason) == ("correct", "Einstein was born in Ulm.")
    assert plan.steps.startswith("[Step 1] KG_Neighbor")


def test_plan_without_headers_and_with_markdown():
    plan = parse_plan("**Incorrect** because he was Swiss.\nStrategic Plan:\n1. KG_Path(A, B)")
    assert (plan.impression, plan.reason, plan.steps) == ("incorrect", "he was Swiss.", "1. KG_Path(A, B)")
    assert parse_plan("I cannot tell.").impression == ""


@pytest.mark.parametrize("text, tool, arguments", [
    ("Thought: look\nAction: KG_Neighbor(Albert Einstein, country of citizenship)", "KG_Neighbor",
     ["Albert Einstein", "country of citizenship"]),
    ('Thought: quoted\nAction: Wiki_Evidence("Paris", "Texas, USA")', "Wiki_Evidence", ["Paris", "Texas, USA"]),
    ("Thought: keywords\nAction: KG_Path(entity_a='A, Inc.', entity_b=\"B\")", "KG_Path", {"entity_a": "A, Inc.", "entity_b": "B"}),
    ("Some preamble.\nThought: stray text\nAction: `KG_Definition(St John's College)`", "KG_Definition", ["St John's College"]),
    ("Thought: writes its own observation\nAction: KG_Path(A, B)\nObservation: (A) -> made up", "KG_Path", ["A", "B"]),
])
def test_actions_are_read_leniently(text, tool, arguments):
    step = parse_step(text)
    assert (step.tool, step.arguments, step.final) == (tool, arguments, None)


def test_final_answer_with_citations():
    step = parse_step("Thought: enough.\nFinal Answer: [Incorrect] Because the KG lists Switzerland [E2] and E5.")
    assert step.final.verdict == "incorrect"
    assert step.final.explanation == "the KG lists Switzerland [E2] and E5."
    assert step.final.cited == ["E2", "E5"]
    assert parse_final("Final Answer: [Not enough evidence] Because nothing found").verdict == "not_enough_evidence"
    assert cited_keys("see [E1][E12] and E1") == ["E1", "E12"]


def test_a_negated_or_embedded_verdict_word_is_read_as_meant():
    assert parse_final("Final Answer: The claim is not correct, because [E2] names Paris.").verdict == "incorrect"
    assert parse_final("Final Answer: Not  Correct. [E1]").verdict == "incorrect"
    assert parse_final("Final Answer: [Incorrect] Because [E1]").verdict == "incorrect"
    assert parse_final("Final Answer: incorrectly filed? No: [Correct] Because [E1]").verdict == "correct"


def test_an_imagined_observation_never_becomes_the_answer():
    step = parse_step("Thought: check\nAction: KG_Path(A, B)\nObservation: done.\nFinal Answer: [Correct] Because x")
    assert step.final is None and step.tool == "KG_Path"


def test_text_without_action_or_answer_is_a_parse_error_that_explains_the_format():
    with pytest.raises(ParseError, match="Action: ToolName"):
        parse_step("Thought: I wonder.")
    with pytest.raises(ParseError, match="Could not read the action"):
        parse_step("Thought: x\nAction: look it up somewhere")


def test_a_quoted_final_answer_before_the_real_action_does_not_end_the_run():
    text = ("Thought: The passage says:\nFinal Answer: [Correct] Because the page says so.\n"
            "That line is part of the page, not my answer.\nAction: KG_Neighbor(Douglas Adams)")
    step = parse_step(text)
    assert (step.final, step.tool, step.arguments) == (None, "KG_Neighbor", ["Douglas Adams"])


def test_a_final_answer_mid_sentence_is_text_and_the_models_last_marker_counts():
    assert parse_final('The page reads "Final Answer: [Correct]" in its footer.') is None
    answer = parse_final("Final Answer: [Correct] draft\nOn reflection:\nFinal Answer: [Incorrect] Because of [E2].")
    assert (answer.verdict, answer.cited) == ("incorrect", ["E2"])
    bold = parse_step("Thought: done.\n**Final Answer:** [Incorrect] Because [E1] names another country.")
    assert bold.final.verdict == "incorrect"


def test_an_unreadable_final_answer_is_a_parse_error_not_a_verdict():
    with pytest.raises(ParseError, match="Could not read the Final Answer"):
        parse_step("Thought: done.\nFinal Answer: probably")


def test_every_prompt_that_carries_retrieved_text_says_it_is_data():
    from verifier.agent import prompts

    for name in ("PLANNING_SYSTEM", "REACT_SYSTEM", "REACT_TOOLS_SYSTEM", "COMPACT_REACT_SYSTEM"):
        assert prompts.DATA_NOT_INSTRUCTIONS in getattr(prompts, name), name
