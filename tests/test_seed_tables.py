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
    found = [dict(explanation='x', verdict=claims.DOES_NOT_HOLD), dict(explanation=None, verdict=claims.TIED),
             dict(explanation=None, verdict=claims.TIED)]
    assert st.explained_count(found, 5).startswith(
        '3 statements are not found to hold on 5 seeds (1 does not hold and 2 tied); we offer a reading for 1 of them')
    assert st.explained_count([], 5) == '' and 'nothing to explain' in st.explanations_markdown([])


def _judged(law, last, line, beats=(True, True)):
    rmse = {w: {'law': law, 'last value': last, 'line in H': line} for w in ('second half', 'late')}
    return dict(rmse=rmse, law_beats_baselines=dict(zip(('second half', 'late'), beats)))


def test_the_law_and_the_better_forecast_are_compared_by_the_tie_rule():
    from agentrl.ch10 import ties

    judged = {0: _judged(0.05, 0.06, 0.07), 1: _judged(0.07, 0.06, 0.08, (False, False)), 2: _judged(0.04, 0.05, 0.05)}
    found = st.law_ties(judged)
    tol = ties.tolerance({'law': [0.05, 0.07, 0.04], 'last value': [0.06, 0.06, 0.05], 'line in H': [0.07, 0.08, 0.05]})
    assert found['late']['tol'] == tol and set(found['late']['words'].values()) == {ties.TIED}
    far = {0: _judged(0.01, 0.5, 0.5), 1: _judged(0.02, 0.5, 0.51), 2: _judged(0.01, 0.52, 0.5)}
    assert set(st.law_ties(far)['second half']['words'].values()) == {ties.LOWER}
    between = {s: _judged(0.30 + d, 0.10 + d, 0.50 + d) for s, d in enumerate((0.0, 0.01, 0.0))}
    assert set(st.law_ties(between)['late']['words'].values()) == {ties.HIGHER}  # against the better baseline
    sentence = st.law_sentence('mixed', judged)
    assert sentence.startswith('mixed by the rule fixed in advance: the law forecasts better than both simple '
                               'forecasts on 2 of 3 seeds over the second half and 2 of 3 over the late steps.')
    assert f'over the late steps (tolerance {tol:.3f}): these runs cannot tell the law from a constant' in sentence
    assert 'tied on 0 of 3 seeds over the second half' in st.law_sentence('supported', far)
    assert st.law_sentence('supported', far).endswith(').')
    assert st.law_reading(dict(text='The reading.', judged=judged)).startswith('The reading.\n\nBy the tie rule')


def test_ours_against_the_book_is_tied_below_the_tolerance():
    book = {'pass@1': '0.725', 'pass@8': '0.800'}
    tied = st.book_gap(0.639, 0.84, book, 0.2, 5)
    assert 'the book\'s 0.725 and 0.800' in tied and 'differ by less than 0.200' in tied
    assert 'are tied by it' in tied
    assert 'above the book\'s by more than that' in st.book_gap(0.95, 0.9, book, 0.2, 5)
    assert 'below the book\'s by more than that' in st.book_gap(0.5, 0.9, book, 0.2, 5)


def _explained(key, held_on, premise_held=None, explanation='r'):
    return dict(key=key, text=f'claim {key}', held_on=held_on, seeds=[0, 1, 2, 3, 4], verdict=claims.DOES_NOT_HOLD,
                premise=None if premise_held is None else f'premise {key}', premise_held=premise_held,
                explanation=explanation if premise_held and sum(premise_held) >= 3 else None)


def test_a_failing_bullet_gives_the_fact_its_reading_rests_on_and_the_ablation():
    row = dict(held_on_with=1, with_cost='does not hold', held_on_without=3, n=5, without_cost='holds',
               meaning='the cost is a candidate cause')
    shown = st.failing_bullet(_explained('a', 2, [True] * 4 + [False]), row)
    assert shown == ('*claim a* (true on 2 of 5). Our reading (in full under *Where a statement does not hold*) '
                     'rests on this fact, true on 4 of 5: '
                     'premise a. On 5 seeds it is true on 1 with the per-turn cost (does not hold) and on 3 without it (holds): the cost is a candidate cause.')
    withheld = st.failing_bullet(_explained('b', 0, [True, False, False, False, False]), None)
    assert withheld == ('*claim b* (true on 0 of 5). The reading we would offer rests on this fact, true on only 1 of '
                        '5, so we withhold it: premise b.')
    assert st.failing_bullet(_explained('c', 1), None) == '*claim c* (true on 1 of 5). We offer no reading.'


class _Found:
    seeds = (0, 1, 2, 3, 4)

    def __init__(self, verdicts, ablation):
        self.verdicts, self.ablation = verdicts, ablation

    def verdict(self, key):
        return next(v for v in self.verdicts if v['key'] == key)

    def ablation_row(self, key):
        return next((row for row in self.ablation if row['key'] == key), None)


def _found():
    verdicts = [dict(key='m', kind=claims.MECHANISM, verdict=claims.HOLDS, held_on=5),
                dict(key='a', kind=claims.MECHANISM, verdict=claims.DOES_NOT_HOLD, held_on=2),
                dict(key='o', kind=claims.OBSERVATION, verdict=claims.HOLDS, held_on=4)]
    ablation = [dict(key='a', held_on_with=1, with_cost='does not hold', held_on_without=4, n=5, without_cost='holds',
                     outcome='a',
                     meaning='the cost is a candidate cause')]
    return _Found(verdicts, ablation)


def test_what_we_found_is_rendered_from_the_record():
    stable = [dict(key='m', text='claim m', label='stable', others=[('other', 'holds', 5, 5)], verdict='holds',
                   held_on=5, n=5)]
    law = dict(verdict='mixed', judged={0: _judged(0.05, 0.06, 0.07), 1: _judged(0.06, 0.05, 0.07, (False, True))})
    text = st.what_we_found(_found(), [_explained('a', 2, [True] * 5)], [dict(verdict=claims.HOLDS)], law, stable,
                            {'clip_cov': 0.01, 'kl_cov': 0.2}, 0.3, [])
    bullets = [line for line in text.splitlines() if line.startswith('- ')]
    assert 3 <= len(bullets) <= 6
    assert bullets[0].startswith('- **The chapter\'s statements on 5 seeds** (holds: true on at least 3 of 5 seeds')
    assert '1 of 2 hold of the mechanisms and 1 of 1 hold of the observations' in bullets[0]
    assert '1 of 1 re-checks of the failing mechanisms holds' in bullets[0]
    assert '  - *claim a* (true on 2 of 5). Our reading (in full under *Where a statement does not hold*) rests ' \
           'on this fact, true on 5 of 5: ' \
           'premise a. On 5 seeds it is true on 1 with the per-turn cost (does not hold) and on 4 without it (holds): the cost is a candidate cause.' in text
    assert '1 holds once the cost is gone' in text and '**The entropy–performance law** is mixed by the rule' in text
    assert 'Clip-Cov 0.01, KL-Cov 0.2 and the adaptive KL target 0.3 (exercise 5 not answered' in text


def test_what_we_found_refuses_runs_that_disagree_with_the_findings():
    import pytest

    with pytest.raises(ValueError, match="disagree on \\['a'\\]"):
        st.what_we_found(_found(), [_explained('a', 1, [True] * 5)], [], dict(verdict='mixed', judged={}), [],
                         {'clip_cov': 0.01, 'kl_cov': 0.2}, 0.3, [])


def test_train_on_seeds_names_each_run_by_its_seed_and_returns_plain_names(monkeypatch):
    from agentrl.ch10 import experiments

    asked = []

    def fake_run_all(specs, processes=2):
        asked.extend(spec.name for spec in specs)
        return {spec.name: dict(seed=spec.seed) for spec in specs}

    monkeypatch.setattr(st, 'run_all', fake_run_all)
    found = st.train_on_seeds(lambda s: [experiments.arm('none', seed=s), experiments.arm('temperature 1.3', seed=s)],
                              [0, 11], processes=1)
    assert asked == ['none | seed 0', 'temperature 1.3 | seed 0', 'none | seed 11', 'temperature 1.3 | seed 11']
    assert found == {0: {'none': dict(seed=0), 'temperature 1.3': dict(seed=0)},
                     11: {'none': dict(seed=11), 'temperature 1.3': dict(seed=11)}}


def test_train_keyed_returns_each_run_under_its_key(monkeypatch):
    from agentrl.ch10 import experiments

    monkeypatch.setattr(st, 'run_all', lambda specs, processes=2: {spec.name: spec.seed for spec in specs})
    assert st.train_keyed({0.1: experiments.arm('a', seed=3), 0.2: experiments.arm('b', seed=4)}) == {0.1: 3, 0.2: 4}


def test_the_findings_must_judge_as_the_notebook_does():
    import pytest

    verdicts = [dict(key='a', verdict=claims.HOLDS, held_on=3, seeds=[0, 1, 2, 3, 4]),
                dict(key='b', verdict=claims.DOES_NOT_HOLD, held_on=1, seeds=[0, 1, 2, 3, 4])]
    st.check_same_verdicts(_Found([dict(v) for v in verdicts], []), verdicts)
    with pytest.raises(ValueError, match="disagree on \\['b'\\]"):
        st.check_same_verdicts(_Found([verdicts[0], dict(verdicts[1], held_on=2)], []), verdicts)
    with pytest.raises(ValueError, match="disagree on \\['b'\\]"):
        st.check_same_verdicts(_Found(verdicts[:1], []), verdicts)
