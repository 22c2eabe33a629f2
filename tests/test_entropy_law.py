"""The entropy-performance law's fit and its baselines on synthetic points whose answers are known."""
import math

import pytest

from agentrl.ch10 import entropy_law
from agentrl.ch10.entropy_law import MIXED, NOT_SUPPORTED, SUPPORTED


def on_law(a, b, entropies):
    return [(h, -a * math.exp(h) + b) for h in entropies]


def test_fit_recovers_the_law_from_exact_points():
    a, b = entropy_law.fit_law(on_law(0.9, 1.9, [0.7, 0.5, 0.4, 0.3, 0.2, 0.15]))
    assert a == pytest.approx(0.9, abs=1e-12) and b == pytest.approx(1.9, abs=1e-12)


def test_fit_is_least_squares():
    """Two points at the same exp(H) average: the fitted law passes through their mean."""
    points = [(0.0, 0.5), (0.0, 0.7), (1.0, 0.1)]
    a, b = entropy_law.fit_law(points)
    assert entropy_law.law(a, b, 0.0) == pytest.approx(0.6) and entropy_law.law(a, b, 1.0) == pytest.approx(0.1)


def test_line_recovers_a_straight_line():
    slope, intercept = entropy_law.fit_line([(h, 0.95 - 0.4 * h) for h in [0.8, 0.6, 0.5, 0.3]])
    assert slope == pytest.approx(-0.4) and intercept == pytest.approx(0.95)


def test_fits_reject_points_that_cannot_determine_them():
    with pytest.raises(ValueError, match='two different'):
        entropy_law.fit_law([(0.3, 0.5), (0.3, 0.6)])
    with pytest.raises(ValueError, match='at least two'):
        entropy_law.fit_line([(0.3, 0.5)])
    with pytest.raises(ValueError, match='at least 4'):
        entropy_law.judge([(0.3, 0.5), (0.2, 0.6), (0.1, 0.7)])


def test_rmse_and_r_squared():
    points = [(0.0, 1.0), (1.0, 3.0)]
    assert entropy_law.rmse(points, lambda h: 2.0) == pytest.approx(1.0)
    assert entropy_law.r_squared(points, lambda h: 1.0 + 2.0 * h) == pytest.approx(1.0)
    assert entropy_law.r_squared(points, lambda h: 2.0) == pytest.approx(0.0)


def test_split_keeps_the_order_and_takes_the_last_quarter_as_late():
    points = [(float(i), float(i)) for i in range(16)]
    first, second, late = entropy_law.split(points)
    assert first == points[:8] and second == points[8:] and late == points[12:]


def test_the_law_wins_when_the_data_follow_it():
    """Entropy keeps falling and R keeps rising along the law: carrying the last value forward lags, and a straight
    line in H misses the curvature outside the range it was fitted on."""
    points = on_law(0.9, 1.9, [1.6 - 0.1 * i for i in range(16)])
    judged = entropy_law.judge(points)
    assert judged['rmse']['second half']['law'] == pytest.approx(0.0, abs=1e-12)
    assert judged['law_beats_baselines'] == {'second half': True, 'late': True}
    assert judged['law'] == pytest.approx(dict(a=0.9, b=1.9))
    assert entropy_law.verdict([judged] * 3) == SUPPORTED


def test_carrying_forward_wins_on_a_plateau():
    """Performance rises along the law in the first half, then stops while the entropy keeps falling: the last
    first-half value predicts the second half exactly, the law and the line overshoot."""
    entropies = [1.6 - 0.1 * i for i in range(16)]
    rising = on_law(0.9, 1.9, entropies[:8])
    points = rising + [(h, rising[-1][1]) for h in entropies[8:]]
    judged = entropy_law.judge(points)
    assert judged['rmse']['second half']['last value'] == 0.0
    assert judged['law_beats_baselines'] == {'second half': False, 'late': False}
    assert entropy_law.verdict([judged] * 3) == NOT_SUPPORTED


def test_a_straight_line_ties_the_law_when_the_data_are_straight_and_the_law_does_not_win():
    points = [(h, 0.95 - 0.4 * h) for h in [1.6 - 0.1 * i for i in range(16)]]
    judged = entropy_law.judge(points)
    assert judged['rmse']['second half']['line in H'] == pytest.approx(0.0, abs=1e-12)
    assert judged['law_beats_baselines']['second half'] is False


def test_verdict_counts_a_strict_majority_of_runs_in_each_window():
    def judged(second, late):
        return dict(law_beats_baselines={'second half': second, 'late': late})
    assert entropy_law.verdict([judged(True, True), judged(True, True), judged(False, False)]) == SUPPORTED
    assert entropy_law.verdict([judged(True, False), judged(True, False), judged(False, True)]) == MIXED
    assert entropy_law.verdict([judged(True, True), judged(False, False)]) == NOT_SUPPORTED  # 1 of 2 is no majority
    with pytest.raises(ValueError):
        entropy_law.verdict([])


def test_probe_noise_is_the_binomial_bound():
    assert entropy_law.probe_noise([0.5, 0.5], 100) == pytest.approx(0.05)
    assert entropy_law.probe_noise([1.0, 0.0], 160) == 0.0


def test_the_fit_gives_the_same_digits_as_the_notebook_formula_did():
    """The closed form in plain floats, as notebook 09 computed it before the module existed."""
    points = on_law(0.93, 1.92, [0.61, 0.55, 0.48, 0.40, 0.33, 0.27, 0.22, 0.19])
    points = [(h, r + 0.01 * (-1) ** i) for i, (h, r) in enumerate(points)]
    x = [math.exp(h) for h, _ in points]
    y = [r for _, r in points]
    mean_x, mean_y = sum(x) / len(x), sum(y) / len(y)
    slope = sum((u - mean_x) * (v - mean_y) for u, v in zip(x, y)) / sum((u - mean_x) ** 2 for u in x)
    assert entropy_law.fit_law(points) == (-slope, mean_y - slope * mean_x)
