"""A claim in plain language through the real store: names found in the claim, the scripted model's pseudo-subgraph
(over the real HTTP client), unknowns resolved over the KG, one task and run per part, the claim's verdict."""

import pytest

from tests.openai_server import ScriptedOpenAIServer
from verifier.agent.llm import OpenAICompatibleLLM
from verifier.claims.decompose import mentioned_entities, offered_relations
from verifier.claims.pipeline import ClaimError, decompose_claim, outcome, review_claim, start_part_runs, submit_claim
from verifier.models import AuditEvent, Claim, Run
from verifier.runner import execute_run
from verifier.services import review_run
from verifier.wiring import settle_config

pytestmark = pytest.mark.django_db

PLAN = "=== Initial Impression ===\n[Correct] Because it is stated.\n=== Strategic Plan ===\n[Step 1] KG_Neighbor(Douglas Adams)"


def _llm(server, *, grammar=True):
    return OpenAICompatibleLLM(server.url, "test", "scripted", max_retries=1, backoff=0.01, supports_grammar=grammar)


def test_the_claim_names_are_found_as_the_kg_writes_them(world_kg):
    found = mentioned_entities(world_kg, "Douglas Noel Adams, a Briton, was born in Cambridge.")
    assert [n.label for n in found] == ["Douglas Adams", "Cambridge"]
    assert [n.external_id for n in mentioned_entities(world_kg, "He moved from the UK to France")] == ["Q145", "Q142"]
    offered = offered_relations(world_kg, "Douglas Adams was educated at St John's College")
    assert offered[0] == "educated at" and len(offered) == 3  # the label used, and the two closest by meaning
    assert "place of birth" in offered_relations(world_kg, "Douglas Adams was born in Cambridge", limit=3)


def test_a_multi_hop_claim_resolves_its_unknown_and_becomes_one_task_per_part(world_kg):
    claim = submit_claim(kg=world_kg, text="Douglas Adams was born in a city of the United Kingdom.", source="test")
    reply = "Douglas Adams || place of birth || unknown_1\nunknown_1 || country || United Kingdom"
    with ScriptedOpenAIServer([reply]) as server:
        claim = decompose_claim(claim, _llm(server))
        grammar = server.requests[0].body["grammar"]
    assert claim.status == Claim.Status.DECOMPOSED
    # Only the claim's entities (or unknowns), two lines at most, and no NOT: the claim does not say "not".
    assert '"Douglas Adams"' in grammar and '"United Kingdom"' in grammar and '"Paris"' not in grammar
    assert grammar.startswith('root ::= fact ("\\n" triple)?\n') and "NOT" not in grammar
    assert claim.resolution["unknown_1"]["entity"] == "Q350" and claim.resolution["unknown_1"]["ties"] == 2
    parts = [(p.head.external_id, p.relation.external_id, p.tail.external_id, p.tail_unknown or p.head_unknown)
             for p in claim.parts.select_related("head", "relation", "tail")]
    assert parts == [("Q42", "P19", "Q350", "unknown_1"), ("Q350", "P17", "Q145", "unknown_1")]
    assert all(p.task.source == f"claim {claim.pk}" for p in claim.parts.all())
    assert AuditEvent.objects.filter(action="claim.submit", object_id=str(claim.pk)).exists()


def test_a_triple_written_against_its_relations_schema_is_turned_around(world_kg):
    claim = submit_claim(kg=world_kg, text="Douglas Adams is a citizen of the United Kingdom.")
    with ScriptedOpenAIServer(["United Kingdom || country of citizenship || Douglas Adams"]) as server:
        claim = decompose_claim(claim, _llm(server))
    part = claim.parts.get()
    assert (part.head.external_id, part.tail.external_id) == ("Q42", "Q145")


def test_names_the_kg_lacks_get_one_repair_round_with_suggestions_then_fail_the_claim(world_kg):
    claim = submit_claim(kg=world_kg, text="Douglas Adams was born in Cambridge.")
    with ScriptedOpenAIServer(["Douglas Adam || place of birth || Cambridge",
                               "Douglas Adams || place of birth || Cambridge"]) as server:
        claim = decompose_claim(claim, _llm(server, grammar=False))
        repair = server.requests[1].prompt
    assert "'Douglas Adam' is not an entity of the KG (did you mean Douglas Adams" in repair
    assert "grammar" not in server.requests[0].body
    assert claim.status == Claim.Status.DECOMPOSED and claim.parts.get().head.external_id == "Q42"

    again = submit_claim(kg=world_kg, text="Douglas Adams was born in Cambridge.")
    with ScriptedOpenAIServer(["Douglas Adams || born || Cambridge", "no idea"]) as server:
        again = decompose_claim(again, _llm(server, grammar=False))
    assert again.status == Claim.Status.FAILED and "line 1 is not" in again.error
    assert not again.parts.exists()


def test_an_unresolvable_unknown_refutes_an_asserted_part(world_kg):
    claim = submit_claim(kg=world_kg, text="Wales has a place of birth.")
    with ScriptedOpenAIServer(["Wales || place of birth || unknown_1"]) as server:
        claim = decompose_claim(claim, _llm(server))
    assert claim.resolution["unknown_1"]["entity"] is None and not claim.parts.exists()
    result = outcome(claim)
    assert result.verdict == "refuted" and "no entity of the KG fits" in result.justification


@pytest.mark.slow
def test_the_claim_verdict_follows_its_parts_runs_and_their_review(world_kg, make_user):
    claim = submit_claim(kg=world_kg, text="Douglas Adams was born in Cambridge and is a citizen of France.")
    with ScriptedOpenAIServer(["Douglas Adams || place of birth || Cambridge\n"
                               "Douglas Adams || country of citizenship || France"]) as server:
        claim = decompose_claim(claim, _llm(server))
        settled = settle_config({}, _llm(server, grammar=False))  # for a scripted model such as the one answering
    assert outcome(claim).verdict == "open"
    runs = start_part_runs(claim, config=settled, queue=False)
    assert len(runs) == 2 and start_part_runs(claim, queue=False) == []  # queued runs are not doubled
    answers = {"Cambridge": "Correct", "France": "Incorrect"}
    for run in runs:
        answer = answers[run.task.tail.label]
        with ScriptedOpenAIServer([PLAN, f"Thought: enough.\nFinal Answer: [{answer}] Because the KG says so."]) as server:
            execute_run(run.pk, llm=_llm(server, grammar=False), await_structure=False)  # no structural model here
    result = outcome(claim)
    assert result.verdict == "refuted" and "France: Incorrect" in result.justification
    assert start_part_runs(claim, queue=False) == []  # a part with a standing verdict is not run again

    france = Run.objects.get(task__tail__label="France", task__claim_parts__claim=claim)
    review_run(run=france, reviewer=make_user("reviewer"), decision="override", reason="the KG lacks it", verdict="correct")
    assert outcome(claim).verdict == "supported"


@pytest.mark.slow
def test_a_decision_on_the_whole_claim_stands_over_its_parts(world_kg, make_user):
    reviewer = make_user("reviewer")
    claim = submit_claim(kg=world_kg, text="Douglas Adams was born in Cambridge.")
    with ScriptedOpenAIServer(["Douglas Adams || place of birth || Cambridge"]) as server:
        claim = decompose_claim(claim, _llm(server))
        settled = settle_config({}, _llm(server, grammar=False))  # for a scripted model such as the one answering
    with pytest.raises(ClaimError, match="no verdict yet"):  # nothing to accept while the part is open
        review_claim(claim=claim, reviewer=reviewer, decision="accept")
    with pytest.raises(ClaimError, match="needs a reason"):
        review_claim(claim=claim, reviewer=reviewer, decision="override", verdict="refuted")
    (run,) = start_part_runs(claim, config=settled, queue=False)
    with ScriptedOpenAIServer([PLAN, "Thought: enough.\nFinal Answer: [Correct] The KG states it."]) as server:
        execute_run(run.pk, llm=_llm(server, grammar=False), await_structure=False)
    assert outcome(claim).verdict == "supported" and not outcome(claim).decided_by

    review_claim(claim=claim, reviewer=reviewer, decision="comment", reason="Cambridge, England?")
    assert not outcome(claim).decided_by  # a comment decides nothing
    review_claim(claim=claim, reviewer=reviewer, decision="override", reason="He was born in Cambridge, but the claim "
                 "meant Cambridge, Massachusetts.")
    result = outcome(claim)
    assert (result.verdict, result.from_parts, result.confidence, result.overridden) == ("refuted", "supported", 1.0, True)
    assert "Massachusetts" in result.justification and reviewer.get_username() in result.justification
    assert AuditEvent.objects.filter(action="claim.review.override", object_id=str(claim.pk)).exists()
    with pytest.raises(ClaimError, match="must change the verdict"):
        review_claim(claim=claim, reviewer=reviewer, decision="override", verdict="supported", reason="no")
    review_claim(claim=claim, reviewer=reviewer, decision="accept")  # the latest decision stands
    assert (outcome(claim).verdict, outcome(claim).overridden) == ("supported", False)


def test_an_empty_or_overlong_claim_is_refused(world_kg):
    with pytest.raises(ClaimError, match="empty"):
        submit_claim(kg=world_kg, text="   ")
    with pytest.raises(ClaimError, match="at most 1000"):
        submit_claim(kg=world_kg, text="word " * 400)
