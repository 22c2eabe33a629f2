"""What notebook 15 reads off the real-model sweep record, on made-up records."""
import math

import pytest

from agentrl.realrl import findings
from test_realrl_claims import world


def test_the_law_fit_recovers_a_and_b_and_forecasts_a_run_that_follows_it():
    entropies = [0.9 - 0.03 * t for t in range(20)]
    history = [dict(entropy_sampled=h, reward=1.4 - 0.5 * math.exp(h)) for h in entropies]
    a, b = findings.fit_entropy_law([s['entropy_sampled'] for s in history], [s['reward'] for s in history])
    assert (a, b) == (pytest.approx(0.5), pytest.approx(1.4))
    found = findings.law_forecast(history, 8)
    assert found['law_error'] < 1e-9 < found['flat_error']


def test_the_law_fit_refuses_what_it_cannot_fit():
    with pytest.raises(ValueError, match='no spread'):
        findings.fit_entropy_law([0.5, 0.5, 0.5], [0.1, 0.2, 0.3])
    with pytest.raises(ValueError, match='at least two'):
        findings.fit_entropy_law([0.5], [0.1])
    with pytest.raises(ValueError, match='fit_steps must leave steps'):
        findings.law_forecast([dict(entropy_sampled=0.1, reward=0.0)] * 5, 5)


def record_of(seeds, **changes):
    return dict(runs={str(s): world(j, **changes) for s, j in zip(seeds, (-0.002, 0.0, 0.002))}, base=None)


def test_claims_wait_until_their_runs_exist_on_three_seeds():
    record = record_of([0, 1, 2])
    del record['runs']['2']['KL-Cov']
    judged, waiting = findings.verdicts(record)
    assert ('kl-cov-keeps-entropy', 2) in waiting
    assert {v['key'] for v in judged} == {c.key for c in findings.claims.CLAIMS} - {'kl-cov-keeps-entropy'}
    assert all(v['seeds'] == [0, 1, 2] for v in judged)


def test_a_seed_band_spans_the_seeds_step_by_step():
    record = record_of([0, 1, 2])
    steps, means, lows, highs = findings.seed_band(record, 'none', 'entropy')
    assert len(steps) == 12 and all(lo < m < hi for lo, m, hi in zip(lows, means, highs))
    assert findings.seed_band(record, 'no such setting') is None


def test_the_crossing_sentence_calls_a_gap_inside_the_noise_a_tie():
    record = record_of([0, 1, 2])
    record['base'] = dict(evaluation=dict(pass_at_k=[0.5] * 31 + [0.97]))
    sentence = findings.crossing_sentence(record, 'none')  # none: pass@1 0.80 (above), pass@32 1.0 (0.03 above)
    assert 'at k=1 above the base by +0.300' in sentence and 'no crossing' in sentence
    record['base']['evaluation']['pass_at_k'][-1] = 1.2  # the base ahead at k=32 beyond the seeds' spread
    assert findings.crossing_sentence(record, 'none').endswith('the curves cross')


def test_the_figure_draws_a_band_and_a_line_for_every_setting_present():
    record = record_of([0, 1, 2])
    for runs in record['runs'].values():
        for run in runs.values():
            for step in run['history']:
                step.update(entropy_sampled=step['entropy'], reward=step['format'])
    fig = findings.entropy_curves_figure(record)
    top_left = fig.axes[0]
    assert len(top_left.lines) == 4 and len(top_left.collections) == 4  # none and the three KL runs
    assert top_left.get_legend().get_texts()[0].get_text() == 'none (3 seeds)'


def test_the_pass_at_k_figure_has_a_line_for_every_setting_and_the_base_model():
    record = record_of([0, 1, 2])
    record['base'] = dict(evaluation=dict(pass_at_k=[0.3] * 32))
    for runs in record['runs'].values():
        for run in runs.values():
            run['evaluation']['pass_at_k'] = [0.5] * 32
    names = list(findings.claims.SETTINGS)  # entropy 0.1 included: every setting the sweep can run
    fig = findings.pass_at_k_figure(record, names)
    labels = [text.get_text() for text in fig.axes[0].get_legend().get_texts()]
    assert labels == ['base model'] + [f'{name} (3 seeds)' for name in names]
    colours = [line.get_color() for line in fig.axes[0].lines]
    assert len(set(colours)) == len(colours)  # no two settings share a colour
