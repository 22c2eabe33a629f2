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
