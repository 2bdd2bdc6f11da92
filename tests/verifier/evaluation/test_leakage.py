"""Anti-leakage proven from run logs: the check finds the query triple in support items or observation
text when it is there, and a real agent run over a KG holding the triple shows it nowhere."""

import pytest

from tests.openai_server import ScriptedOpenAIServer
from verifier.agent.llm import OpenAICompatibleLLM
from verifier.agent.steps import Claim
from verifier.evaluation.outcomes import edge_texts, item_leaks
from verifier.models import Step, SupportItem, Triple, VerificationTask
from verifier.runner import execute_run
from verifier.services import start_run
from verifier.wiring import settle_config

QUERY = Claim("Q42", "P27", "Q145", "Douglas Adams", "country of citizenship", "United Kingdom")


def test_support_items_holding_the_query_triple_or_its_reverse_reading_are_leaks():
    assert item_leaks(QUERY, [{"head": "Q42", "relation": "P27", "tail": "Q145"}], [])
    assert item_leaks(QUERY, [{"head": "Q145", "relation": "P27", "tail": "Q42"}], [])
    assert item_leaks(QUERY, [{"edges": [["Q42", "P19", "Q350"], ["Q42", "P27", "Q145"]]}], [])
    assert not item_leaks(QUERY, [{"head": "Q42", "relation": "P19", "tail": "Q350"}, {"edges": [["Q350", "P17", "Q145"]]}], [])


def test_observations_writing_the_query_triple_as_an_edge_are_leaks():
    assert "(Douglas Adams) -> [country of citizenship] -> (United Kingdom)" in edge_texts(QUERY)
    assert item_leaks(QUERY, [], ["Neighbours of Douglas Adams:\n[E1] (United Kingdom) <- [country of citizenship] <- (Douglas Adams)"])
    assert item_leaks(QUERY, [], ["[E2] (Cambridge) -[country]-> (United Kingdom) <-[country of citizenship]- (Douglas Adams)"])
    assert not item_leaks(QUERY, [], ["[E1] (Douglas Adams) -> [place of birth] -> (Cambridge)",
                                      "Passage: Douglas Adams was an English author from the United Kingdom."])


def test_where_another_entity_shares_a_label_the_text_is_matched_with_the_id():
    # tools write a label another entity carries with its id, so the edge to the other "United Kingdom" is not the claim
    other = ["[E1] (Douglas Adams) -> [country of citizenship] -> (United Kingdom [Q999])"]
    assert "(Douglas Adams) -> [country of citizenship] -> (United Kingdom [Q145])" in edge_texts(QUERY, {"United Kingdom"})
    assert not item_leaks(QUERY, [{"head": "Q42", "relation": "P27", "tail": "Q999"}], other, shared={"United Kingdom"})
    assert item_leaks(QUERY, [], ["[E1] (United Kingdom [Q145]) <- [country of citizenship] <- (Douglas Adams)"],
                      shared={"United Kingdom"})
    assert item_leaks(QUERY, [{"head": "Q42", "relation": "P27", "tail": "Q145"}], other, shared={"United Kingdom"})


@pytest.mark.django_db
def test_a_real_agent_run_never_sees_the_triple_under_test_although_the_kg_holds_it(world_kg):
    kg = world_kg
    assert Triple.objects.filter(kg=kg, head__external_id="Q42", relation__external_id="P27", tail__external_id="Q145").exists()
    task = VerificationTask.objects.create(kg=kg, head=kg.entities.get(external_id="Q42"),
                                           relation=kg.relations.get(external_id="P27"), tail=kg.entities.get(external_id="Q145"))
    script = [
        "Thought: Look at his neighbours.\nAction: KG_Neighbor(Douglas Adams, country of citizenship)",
        "Thought: And the paths.\nAction: KG_Path(Douglas Adams, United Kingdom)",
        "Thought: Enough.\nFinal Answer: [Correct] Because he was born in Cambridge, in the United Kingdom [E1].",
    ]
    with ScriptedOpenAIServer(script) as server:
        llm = OpenAICompatibleLLM(server.url, "test", "scripted", max_retries=0)
        run = start_run(task=task, queue=False, config=settle_config({"use_memory": False, "use_planning": False}, llm))
        execute_run(run.pk, llm=llm)
    payloads = list(SupportItem.objects.filter(run=run, kind__in=["triple", "path"]).values_list("payload", flat=True))
    observations = list(Step.objects.filter(run=run, kind="observation").values_list("content", flat=True))
    assert payloads and len(observations) == 2
    assert not item_leaks(QUERY, payloads, observations)
    # The same log does show other KG edges, so the check is looking at real evidence.
    born = Claim("Q42", "P19", "Q350", "Douglas Adams", "place of birth", "Cambridge")
    assert item_leaks(born, payloads, observations)
