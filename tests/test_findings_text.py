"""The sentences notebook 07 opens and closes with, written from a record built here by hand."""
import pytest

from agentrl.ch10 import claims, comparison, findings, stability, ties


def _verdict(key, held_on, n=5):
    claim = claims.by_key(key)
    return dict(key=key, kind=claim.kind, text=claim.text, seeds=list(range(n)), held=[i < held_on for i in range(n)],
                held_on=held_on, verdict=claims.seed_rule(held_on, n))


def _found(ablation=()):
    verdicts = [_verdict('collapse', 5), _verdict('estimators-agree', 0), _verdict('more-invalid-calls', 3)]
    rows = stability.stability(verdicts, [dict(short='other stream', seeds=list(range(5)),
                                                held={'more-invalid-calls': [True, False, False, False, False]})])
    return findings.Evidence((0, 1, 2, 3, 4), [{}] * 5, verdicts, rows, list(ablation))


def test_the_opening_counts_what_held_and_names_what_did_not():
    ablation = [dict(key='estimators-agree', held_on_with=0, with_cost=claims.DOES_NOT_HOLD, held_on_without=4, n=5,
                     without_cost=claims.HOLDS, outcome='a',
                     meaning='the per-turn cost is a candidate cause')]
    seed0 = [dict(key='collapse', held=True), dict(key='estimators-agree', held=True),
             dict(key='more-invalid-calls', held=True)]
    text = findings.comparison_bullets(_found(ablation), seed0, 0, {'estimators-agree': 'our reading here.'})
    assert '1 of 1 hold of the mechanisms' in text and '1 of 2 hold of the softer readings' in text
    assert '*at 0.3 the k3 and k3+ losses end within 0.05 nats of each other*: true on 0 of 5 seeds.' in text
    assert 'Our reading: our reading here.' in text
    assert ('On 5 seeds it is true on 0 with the per-turn cost (does not hold) and on 4 without it (holds): the '
            'per-turn cost is a candidate cause.') in text
    assert 'fragile: the bare check holds, 3/5 here; does not hold, 1/5 on other stream' in text  # the hair-thin one
    assert 'on 1 it says the opposite of the five-seed verdict' in text


def test_a_seed_that_agrees_everywhere_is_still_one_draw():
    seed0 = [dict(key='collapse', held=True), dict(key='estimators-agree', held=False)]
    assert findings.single_draw_sentence(seed0, _found(), 0).endswith(', as the five-seed verdict has it.')


def test_the_ablation_summary_counts_each_outcome():
    rows = [dict(outcome='a'), dict(outcome='b'), dict(outcome='b')]
    text = findings.ablation_summary(findings.Evidence((0,), [], [], [], rows))
    assert 'of the 3 statements' in text and '1 holds once the cost is gone' in text and '2 fail without it too' in text


def _run(entropy, pass8=1.0):
    history = [dict(entropy=entropy, reward=0.5)] * 40
    return dict(history=history, metrics=dict(kl_start=0.1, pass1=0.5, pass8=pass8, invalid=0.1))


def test_tolerances_come_from_the_seeds_spread():
    by_seed = [{'none': _run(0.10)}, {'none': _run(0.20)}, {'none': _run(0.30)}]
    tol = comparison.tolerances(by_seed, settings=('none',))
    assert tol['entropy_end'] == pytest.approx(ties.tolerance({'none': [0.1, 0.2, 0.3]}))
    with pytest.raises(ValueError, match='two or more replicates'):
        comparison.tolerances(by_seed[:1], settings=('none',))


def test_a_gap_inside_the_tolerance_is_called_a_tie():
    reader = comparison._Reader({}, [], {}, dict(entropy_end=0.05))
    assert 'tied' in reader.gap(0.378, 0.377, 'entropy_end', '.3f')
    assert 'more than the 0.050' in reader.gap(0.5, 0.3, 'entropy_end', '.3f')


def test_the_book_outside_our_range_is_counted():
    rows = [{'none': dict(entropy_end=e, kl_start=0.1, pass1=0.5, pass8=0.9, invalid=0.1)} for e in (0.1, 0.2)]
    book = [{'setting': 'none', 'entropy 0-4 -> 35-39': '0.400 -> 0.150', 'KL from start': '0.1',
             'pass@1': '0.9', 'pass@8': '0.9', 'invalid': '0.1'}]
    assert comparison.outside_range(rows, book, settings=('none',)) == (1, 5)  # only pass@1 0.9 lies outside


def test_a_draw_is_never_the_opposite_of_a_tied_verdict():
    found = _found()
    found.verdicts[1] = dict(found.verdicts[1], verdict=claims.TIED)  # estimators-agree: the five seeds leave it tied
    seed0 = [dict(key='collapse', held=True), dict(key='estimators-agree', held=True)]
    said = findings.single_draw_sentence(seed0, found, 0)
    assert 'the opposite' not in said
    assert '1 the five seeds leave tied or seed-dependent' in said and said.endswith('as the five-seed verdict has it.')
