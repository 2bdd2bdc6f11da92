"""The pseudo-subgraph's format and grammar, and the rule that turns parts' verdicts into a claim's verdict."""

import pytest

from verifier.claims.subgraph import PseudoTriple, SubgraphError, grammar, parse
from verifier.claims.verdict import NOT_ENOUGH, OPEN, REFUTED, SUPPORTED, PartOutcome, claim_verdict


def test_a_reply_reads_as_triples_with_negation_and_unknowns():
    reply = "Claim: echoed\n- Marie Curie || place of birth || unknown_1\n\nNOT unknown_1 || country || France\n"
    assert parse(reply) == [PseudoTriple("Marie Curie", "place of birth", "unknown_1"),
                            PseudoTriple("unknown_1", "country", "France", negated=True)]


@pytest.mark.parametrize("reply, message", [
    ("", "no triple"),
    ("Marie Curie was born in Warsaw", "line 1 is not"),
    ("A || r || B\nA || r ||", "line 2 is not"),
    ("\n".join(["A || r || B", "A || s || C", "A || t || D", "A || u || E", "A || v || F"]), "at most 4"),
])
def test_a_reply_that_is_not_a_pseudo_subgraph_says_which_line(reply, message):
    with pytest.raises(SubgraphError, match=message):
        parse(reply)


def test_the_grammar_quotes_every_name_and_bounds_the_lines():
    text = grammar(['The "Best" \\ Band', "Ulm"], ["place of birth"], negation=False, parts=2)
    assert 'entity ::= unknown | "The \\"Best\\" \\\\ Band" | "Ulm"' in text
    assert text.splitlines()[0] == 'root ::= fact ("\\n" triple)?'
    assert "NOT" not in text
    # A claim that says "not" denies at least one triple: the first line is one, the others may be.
    denied = grammar(["Ulm"], ["country"], parts=2).splitlines()
    assert denied[:2] == ['root ::= "NOT " fact ("\\n" triple)?', 'triple ::= ("NOT ")? fact']
    single = grammar(["Ulm"], ["country"], parts=1).splitlines()
    assert single[:2] == ['root ::= "NOT " fact', 'fact ::= entity " || " relation " || " entity']


def _part(verdict, confidence=0.8, negated=False, resolved=True, ended=False):
    return PartOutcome("A || r || B", negated, verdict, confidence, resolved=resolved, ended_without_verdict=ended)


@pytest.mark.parametrize("parts, verdict, confidence", [
    ([_part("correct", 0.9), _part("correct", 0.8)], SUPPORTED, 0.72),  # both hold: 0.9 × 0.8
    ([_part("correct", 0.9), _part("incorrect", 0.7)], REFUTED, 0.73),  # 1 − 0.9 × 0.3
    ([_part("incorrect", 0.6, negated=True)], SUPPORTED, 0.6),  # "A is not B" and A–B is Incorrect
    ([_part("correct", 0.9, negated=True)], REFUTED, 0.9),
    ([_part("correct", 0.9), _part("")], OPEN, None),  # a part without a verdict yet
    ([_part("incorrect", 0.9), _part("")], OPEN, None),  # settled only when every part is: nothing before
    ([_part("correct", 0.9), _part("not_enough_evidence", 0.7)], NOT_ENOUGH, None),
    ([_part("correct", 0.9), _part("", None, ended=True)], NOT_ENOUGH, None),  # its run failed: not settled by evidence
    ([_part("incorrect", 0.9), _part("not_enough_evidence", 0.7)], REFUTED, None),  # a part that fails refutes
    ([_part("correct", None)], SUPPORTED, None),  # a verdict without a confidence: unknown, not invented
    ([_part("", None, resolved=False)], REFUTED, None),  # "A has a spouse" and no entity fits
    ([_part("", None, negated=True, resolved=False), _part("correct", 0.5)], SUPPORTED, 0.5),
])
def test_a_claim_holds_when_every_part_holds_as_the_claim_says(parts, verdict, confidence):
    result = claim_verdict(parts)
    assert result.verdict == verdict
    assert result.confidence == (pytest.approx(confidence) if confidence is not None else None)


def test_a_refuted_claim_is_justified_by_the_parts_that_refute_it():
    holding = PartOutcome("A || r || B", False, "correct", 0.9, cited=("E1",), run_id=7)
    failing = PartOutcome("B || s || C", False, "incorrect", 0.8, cited=("E2", "E3"), run_id=8)
    result = claim_verdict([holding, failing])
    assert result.justification == "A part does not hold as the claim says: B || s || C: Incorrect (run 8) [E2, E3]."
    assert claim_verdict([]).verdict == OPEN
    unsettled = claim_verdict([holding, PartOutcome("B || s || C", False, "", None, run_id=9, ended_without_verdict=True)])
    assert unsettled.label == "Not enough evidence"
    assert unsettled.justification == ("No part refutes the claim, but the evidence does not settle every part: "
                                       "B || s || C: its run ended without a verdict (run 9).")
