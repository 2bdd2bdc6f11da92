"""A claim keeps only the triples it states: what a small model adds is left out with the reason before any run,
negation is read from the sentence, and text that is no claim the KG can check is refused, never Refuted. The
model is the scripted OpenAI-compatible server, over the real HTTP client, writing what a 1.5B model wrote."""

import pytest

from tests.openai_server import ScriptedOpenAIServer
from verifier.agent.llm import OpenAICompatibleLLM
from verifier.claims.grounding import Reading, not_a_claim
from verifier.claims.pipeline import decompose_claim, outcome, submit_claim
from verifier.models import Claim, VerificationTask

pytestmark = pytest.mark.django_db


def _decomposed(kg, text: str, *replies: str, grammar: bool = False) -> tuple[Claim, int]:
    """The claim decomposed with the scripted replies, and how many calls the model got."""
    claim = submit_claim(kg=kg, text=text)
    with ScriptedOpenAIServer(list(replies)) as server:
        llm = OpenAICompatibleLLM(server.url, "test", "scripted", max_retries=0, backoff=0.01, supports_grammar=grammar)
        claim = decompose_claim(claim, llm)
        return claim, len(server.requests)


def _parts(claim: Claim) -> list[tuple[str, str, str, bool]]:
    return [(p.head.external_id, p.relation.external_id, p.tail.external_id, p.negated)
            for p in claim.parts.select_related("head", "relation", "tail")]


def test_an_invented_triple_is_left_out_and_only_the_stated_one_is_verified(claims_kg):
    claim, _ = _decomposed(claims_kg, "Douglas Adams was born in Cambridge.",
                           "Douglas Adams || place of birth || Cambridge\nDouglas Adams || country of origin || unknown_1\n"
                           "Douglas Adams || country of citizenship || Canada")
    assert claim.status == Claim.Status.DECOMPOSED
    assert _parts(claim) == [("Q42", "P19", "Q350", False)]
    assert claim.resolution == {}  # the invented unknown is never resolved, so never verified
    assert claim.left_out == [
        {"written": "Douglas Adams || country of origin || unknown_1", "reason": "the claim does not say 'country of origin'"},
        {"written": "Douglas Adams || country of citizenship || Canada", "reason": "'Canada' is not named in the claim"}]
    assert not VerificationTask.objects.filter(kg=claims_kg).exclude(pk=claim.parts.get().task_id).exists()
    assert outcome(claim).verdict == "open"


def test_a_denial_is_read_from_the_sentence_and_a_wrong_relation_as_the_one_the_claim_states(claims_kg):
    claim, _ = _decomposed(claims_kg, "Paul McCartney is not a singer.",
                           "NOT Paul McCartney || member of sports team || singer\n"
                           "Paul McCartney || member of political party || American Academy of Arts and Sciences")
    assert _parts(claim) == [("Q2599", "P106", "Q177220", True)]
    assert [item["reason"] for item in claim.left_out] == [
        "the claim does not say 'member of sports team'; read as Paul McCartney || occupation || singer",
        "'American Academy of Arts and Sciences' is not named in the claim"]


def test_the_model_cannot_deny_what_the_claim_asserts_and_a_denial_bears_on_its_own_clause(claims_kg):
    asserted, _ = _decomposed(claims_kg, "Douglas Adams was born in Cambridge.", "NOT Douglas Adams || place of birth || Cambridge")
    assert _parts(asserted) == [("Q42", "P19", "Q350", False)]
    both, _ = _decomposed(claims_kg, "Douglas Adams was born in Cambridge but he never studied at St John's College.",
                          "Douglas Adams || place of birth || Cambridge\nDouglas Adams || educated at || St John's College")
    assert _parts(both) == [("Q42", "P19", "Q350", False), ("Q42", "P69", "Q691283", True)]


def test_a_relation_stated_of_another_clauses_subject_is_left_out(claims_kg):
    """A conjunction of two subjects: the model put the first one on the second half, whose clause names its own."""
    claim, _ = _decomposed(claims_kg, "Douglas Adams was born in Cambridge, and Paul McCartney studied at St John's College.",
                           "Douglas Adams || place of birth || Cambridge\nDouglas Adams || educated at || St John's College")
    assert _parts(claim) == [("Q42", "P19", "Q350", False)]
    assert claim.left_out == [{"written": "Douglas Adams || educated at || St John's College",
                               "reason": "the claim says 'educated at' in a clause about another subject"}]
    elliptic, _ = _decomposed(claims_kg, "Douglas Adams was born in Cambridge, and studied at St John's College.",
                              "Douglas Adams || place of birth || Cambridge\nDouglas Adams || educated at || St John's College")
    assert _parts(elliptic) == [("Q42", "P19", "Q350", False), ("Q42", "P69", "Q691283", False)]


def test_a_triple_linking_an_entity_to_itself_or_repeating_a_named_one_with_an_unknown_is_left_out(claims_kg):
    claim, _ = _decomposed(claims_kg, "Douglas Adams wrote The Hitchhiker's Guide to the Galaxy.",
                           "Douglas Adams || notable work || Douglas Adams\n"
                           "Douglas Adams || notable work || The Hitchhiker's Guide to the Galaxy\n"
                           "Douglas Adams || notable work || unknown_1")
    assert _parts(claim) == [("Q42", "P800", "Q3107329", False)]
    assert [item["reason"] for item in claim.left_out] == [
        "it links 'Douglas Adams' to itself", "it repeats a triple of the claim with unknown_1 for the entity it names"]


def test_an_existence_claim_keeps_its_unknown_and_a_claim_of_invented_triples_only_is_refused(claims_kg):
    existence, _ = _decomposed(claims_kg, "Paul McCartney has a known occupation.", "Paul McCartney || occupation || unknown_1")
    assert existence.status == Claim.Status.DECOMPOSED and existence.resolution["unknown_1"]["entity"] == "Q177220"
    invented, calls = _decomposed(claims_kg, "Douglas Adams admired Paul McCartney.",
                                  "Douglas Adams || place of birth || Paul McCartney\nPaul McCartney || occupation || singer")
    assert calls == 1 and invented.status == Claim.Status.REFUSED and not invented.parts.exists()
    assert invented.error.startswith("the KG cannot represent this claim as stated: nothing the model wrote is stated by it")
    assert len(invented.left_out) == 2 and invented.written.startswith("Douglas Adams || place of birth")
    result = outcome(invented)
    assert (result.verdict, result.confidence) == ("refused", None)


@pytest.mark.parametrize("text, reason", [
    ("x", "not a claim: a claim is a sentence stating something about entities of the KG, and this has 0 words"),
    ("Douglas Adams", "not a claim: a claim is a sentence stating something about entities of the KG, and this has 2 words"),
    ("Where was Douglas Adams born?", "not a claim: this is a question"),
    ("The weather was lovely all week.", "the claim names no entity of the KG"),
])
def test_text_that_is_no_claim_is_refused_before_the_model_is_asked(claims_kg, text, reason):
    claim, calls = _decomposed(claims_kg, text)
    assert calls == 0 and claim.status == Claim.Status.REFUSED and claim.error.startswith(reason)
    assert outcome(claim).verdict == "refused" and not claim.parts.exists()


def test_the_grammar_offers_the_relation_the_claim_states_by_its_words(claims_kg):
    claim = submit_claim(kg=claims_kg, text="Paul McCartney is not a singer.")
    with ScriptedOpenAIServer(["NOT Paul McCartney || occupation || singer"]) as server:
        llm = OpenAICompatibleLLM(server.url, "test", "scripted", max_retries=0, backoff=0.01, supports_grammar=True)
        decompose_claim(claim, llm)
        grammar = server.requests[0].body["grammar"]
    relations = next(line for line in grammar.splitlines() if line.startswith("relation ::="))
    assert '"occupation"' in relations and grammar.startswith('root ::= "NOT " fact')


def test_a_negation_is_a_word_of_the_claim_not_of_a_name_and_an_unknown_needs_an_indefinite_phrase():
    names = {1: ["Douglas Adams"], 2: ["Cambridge"], 3: ["No Doubt"]}
    denied = Reading("Douglas Adams was not born in Cambridge.", names)
    assert len(denied.negations) == 1 and denied.words.startswith("§§§§§§§§§§§§§ was     born in cambridge")
    assert denied.indefinites == 0
    assert Reading("No Doubt played in Cambridge.", names).negations == []
    assert Reading("Douglas Adams has children.", names).indefinites == 1
    assert not_a_claim("Douglas Adams was born in Cambridge.") is None
