"""Notebook 09's reading of the covariance mechanism, on series built here."""
import numpy as np
import pytest

from agentrl.ch10 import covariance_report as cr


def test_a_negative_zero_prints_as_zero():
    assert cr.number(-0.00001, '+.3f') == '+0.000' and cr.number(-0.5, '+.1f') == '-0.5'


def test_the_summary_counts_steps_against_the_sign():
    found = cr.summaries({0: [1.0, 2.0, -1.0]}, {0: [-0.1, -0.3, -0.2]})[0]
    assert (found['positive_steps'], found['opposite_steps']) == (2, 2)
    assert found['correlation'] == pytest.approx(np.corrcoef([1.0, 2.0, -1.0], [-0.1, -0.3, -0.2])[0, 1])


def test_the_reading_follows_sign_and_size():
    agree = cr.summaries({0: [1.0, 2.0, 3.0]}, {0: [-0.1, -0.2, -0.3]})
    assert '**Sign: as predicted.**' in cr.reading(agree) and '**Size: as predicted.**' in cr.reading(agree)
    disagree = cr.summaries({0: [1.0, 2.0, 3.0]}, {0: [0.1, 0.2, 0.3]})
    assert '**Sign: not as predicted.**' in cr.reading(disagree) and '**Size: not seen.**' in cr.reading(disagree)
    assert len(cr.table_lines(agree)) == 2


def test_the_legend_names_the_scales_and_each_seeds_correlation():
    found = cr.summaries({0: [1.0, 2.0, 3.0], 4: [1.0, 2.0, 3.0]}, {0: [-0.1, -0.2, -0.3], 4: [0.1, 0.2, 0.3]})
    names = cr.legend(found, 0.1234, 0.5)
    assert names['covariance'] == 'covariance term before the update (/ 0.123)'
    assert names['change'] == 'entropy change of the update (/ 0.500 nats)'
    assert (names[0], names[4]) == ('seed 0 (correlation -1.00)', 'seed 4 (correlation +1.00)')
