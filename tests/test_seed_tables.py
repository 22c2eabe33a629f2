"""Notebook 09's tables and sentences, on runs and verdicts built here."""
from agentrl.ch10 import claims, seed_tables as st


def _run(reward, entropy=0.3):
    return dict(history=[dict(reward=reward, entropy=entropy)] * 10)


def test_the_sweep_rule_keeps_the_floor_then_the_entropy():
    none = _run(1.0)
    pick, why = st.choose({0.01: _run(0.95, 0.2), 0.05: _run(0.91, 0.4), 0.2: _run(0.5, 0.9)}, none)
    assert (pick, why) == (0.05, 'the highest final entropy of the 2 above the floor')
    pick, why = st.choose({0.01: _run(0.5), 0.2: _run(0.6)}, none)
    assert (pick, why) == (0.2, 'none is above the floor: the highest final reward')


def test_the_seed_phrase_names_every_and_no_seed():
    assert [st.seeds_phrase(k, 5) for k in (5, 0, 3)] == ['every seed (5 of 5)', 'no seed (0 of 5)',
                                                           '3 of 5 seeds only']


def test_the_controller_check_rebuilds_beta_and_counts_the_rate_limit():
    history = [dict(kl_coef=0.3, kl_ref=0.2), dict(kl_coef=0.3 * 1.02, kl_ref=0.1)]  # 0.2 is twice the target 0.1
    worst, clipped, steps = st.controller_check({'adaptive KL 0.1': dict(history=history)}, [0.1])
    assert worst < 1e-15 and clipped == {0.1: 1} and steps == 2
    assert 'matches the controller exactly' in st.controller_reading(0.0, clipped, steps)
    assert 'to within 1.0e-03' in st.controller_reading(1e-3, clipped, steps)


def test_the_re_check_reading_follows_the_count():
    held = dict(verdict=claims.HOLDS)
    failed = dict(verdict=claims.DOES_NOT_HOLD)
    assert st.scale_reading([held, held]).startswith('Every re-checked mechanism holds')
    assert st.scale_reading([held, failed]).startswith('1 of the 2 re-checks holds')
    assert st.scale_reading([failed]).startswith('None of the re-checks holds')


def test_the_explanation_count_says_how_many_readings_are_offered():
    assert st.explained_count([dict(explanation='x'), dict(explanation=None)], 5).startswith(
        '2 statements do not hold on 5 seeds; we offer a reading for 1 of them')
    assert st.explained_count([], 5) == '' and 'nothing to explain' in st.explanations_markdown([])
