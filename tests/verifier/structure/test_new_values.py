"""The new-value log-probability: the KG's other known values are not competitors of a claimed value."""

import math

import numpy as np
import pytest

from verifier.structure.scoring import _new_value_log_p, _rank


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
