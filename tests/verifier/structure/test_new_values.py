"""The new-value log-probability: the KG's other known values are not competitors of a claimed value."""

import math

import numpy as np
import pytest

from verifier.structure.scoring import _new_value_log_p, _rank, _ranked


def test_known_other_values_leave_the_softmax_and_the_claimed_value_keeps_its_own_mass():
    probabilities = np.array([0.5, 0.3, 0.1, 0.1])  # entity 0 is a value the KG already holds
    log_probs = np.log(probabilities)
    # Claim entity 2: without entity 0 it has 0.1 of the remaining 0.5.
    assert _new_value_log_p(log_probs, 2, np.array([0])) == pytest.approx(math.log(0.1 / 0.5))
    # The claim's own value is never taken out, and with nothing known the plain log-probability stands.
    assert _new_value_log_p(log_probs, 0, np.array([0])) == pytest.approx(math.log(0.5))
    assert _new_value_log_p(log_probs, 1, np.array([], dtype=np.int64)) == pytest.approx(math.log(0.3))


def test_rank_counts_the_candidates_the_model_prefers():
    log_probs = np.log(np.array([0.4, 0.3, 0.2, 0.1]))
    assert _rank(log_probs, 2, np.array([0, 1, 3])) == 3
    assert _rank(log_probs, 0, np.array([1, 2])) == 1


def test_alternatives_the_kg_lacks_get_their_share_of_what_its_stated_values_leave():
    from verifier.structure.evidence import Candidate, SideRanking
    from verifier.tools.kg_plausibility import _alternatives

    # entity 0 is the KG's stated value (0.996); the claim is entity 3; 1 and 2 are values the KG lacks
    log_probs = np.log(np.array([0.996, 0.003, 0.0008, 0.0002]))
    rows = np.array([10, 11, 12, 13])
    ranked = _ranked(log_probs, 3, np.arange(4), np.array([0]), rows)
    assert ranked.rank == 4 and ranked.rest == pytest.approx(0.004)
    (stated, p_stated), (first, p_first), (second, p_second) = ranked.alternatives
    assert (stated, first, second) == (10, 11, 12)
    assert p_stated == pytest.approx(0.996) and p_first == pytest.approx(0.75) and p_second == pytest.approx(0.2)
    # nothing stated: the plain probabilities
    assert _ranked(log_probs, 3, np.arange(4), np.array([], dtype=np.int64), rows).alternatives[1][1] == pytest.approx(0.003)
    # the claim's own stated value is not taken out
    assert _ranked(log_probs, 0, np.arange(4), np.array([0]), rows).rest == 1.0

    side = SideRanking(4, 4, [Candidate("Q30", "United States of America", p_stated, True),
                              Candidate("Q16", "Canada", p_first, False), Candidate("Q145", "United Kingdom", p_second, False)],
                       ranked.rest)
    assert _alternatives(side) == "United States of America (1.00, in the KG); Canada (0.75 of the rest); United Kingdom (0.20 of the rest)"
    plain = SideRanking(4, 4, [Candidate("Q16", "Canada", 0.4, False)], 1.0)
    assert _alternatives(plain) == "Canada (0.40)"
