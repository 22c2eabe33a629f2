import math

import pytest

from agentrl.ch10 import ties


def test_pooled_sd_is_the_root_mean_sample_variance():
    # sample variances 2 (values 1, 3) and 8 (values 0, 4); a lone value adds nothing: sqrt((2 + 8) / 2)
    assert ties.pooled_sd({'a': [1, 3], 'b': [0, 4], 'c': [7]}) == pytest.approx(math.sqrt(5))


def test_tolerance_scales_with_z_and_the_replicates_averaged():
    reps = {'a': [1.0, 3.0]}  # sd sqrt(2)
    assert ties.tolerance(reps) == pytest.approx(ties.Z * math.sqrt(2) * math.sqrt(2))
    assert ties.tolerance(reps, n_each=4) == pytest.approx(ties.Z * math.sqrt(2) * math.sqrt(0.5))


def test_a_gap_below_the_tolerance_is_a_tie_and_above_it_an_order():
    assert ties.compare(0.378, 0.377, 0.01) == ties.TIED
    assert ties.compare(0.40, 0.377, 0.01) == ties.HIGHER
    assert ties.compare(0.30, 0.377, 0.01) == ties.LOWER
    assert ties.compare(0.5, 0.25, 0.25) == ties.HIGHER  # exactly at the tolerance is a gap
    assert ties.compare(1.0, 1.0, 0.0) == ties.TIED  # equal values tie even with no spread to measure


def test_leaders_keeps_every_setting_within_the_tolerance_of_the_best():
    assert ties.leaders({'a': 0.378, 'b': 0.377, 'c': 0.30}, 0.01) == ['a', 'b']
    assert ties.leaders({'a': 0.5, 'b': 0.377}, 0.01) == ['a']


@pytest.mark.parametrize('call, says', [
    (lambda: ties.pooled_sd({'a': [1.0]}), 'two or more replicates'),
    (lambda: ties.pooled_sd({'a': [1.0, float('nan')]}), 'not a finite number'),
    (lambda: ties.tolerance({'a': [1.0, 2.0]}, n_each=0), 'n_each must be'),
    (lambda: ties.compare(1.0, 2.0, -1.0), 'tolerance >= 0'),
    (lambda: ties.leaders({}, 0.1), 'at least one value'),
])
def test_bad_input_is_named(call, says):
    with pytest.raises(ValueError, match=says):
        call()


def test_the_rule_sentence_states_the_tolerance():
    text = ties.rule_sentence(0.0123, 'entropy', 'batch seeds', 10)
    assert '0.012' in text and '10 batch seeds' in text and 'one draw' in text
