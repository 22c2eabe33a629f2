"""The second look at a tied claim: its gaps on the means over the seeds, against the tolerance of means."""
import math

import pytest

from agentrl.ch10 import claims, explanations, seed_means, ties
from test_tie_rule import NOISE, run, seed_runs

LEAD = 0.03  # the bonus's lead over none on every seed: inside one draw's tolerance (0.045), outside the means' (0.020)


def with_lead(lead):
    by_seed = [seed_runs(offset) for offset in NOISE]
    for runs, offset in zip(by_seed, NOISE):
        runs['entropy 0.03'] = run(0.2 + offset + lead, kl_start=0.3 + offset, pass1=0.5 + offset,
                                   pass8=0.8 + offset, invalid=0.1 + offset)
    return by_seed


def test_the_means_tolerance_is_the_one_draw_tolerance_shrunk_by_root_n():
    by_seed, claim = with_lead(LEAD), claims.by_key('bonus-slows-collapse')
    one = claims.gap_tolerance(claim.gaps[0], by_seed, claim.pool)
    found = seed_means.gap_means(claim, by_seed)
    assert found[0]['tolerance'] == pytest.approx(one / math.sqrt(len(by_seed)))
    # the final entropy averages the last steps of a falling curve, so the lead arrives a little smaller
    assert found[0]['tolerance'] < found[0]['mean_a'] - found[0]['mean_b'] < one


@pytest.mark.parametrize('lead, per_seed, on_means', [(LEAD, claims.TIED, 'holds'), (0.01, claims.TIED, 'tied'),
                                                      (-LEAD, claims.TIED, 'does not hold'),
                                                      (0.2, claims.HOLDS, 'holds')])
def test_seeds_that_lean_one_way_settle_on_the_means_what_each_seed_alone_leaves_tied(lead, per_seed, on_means):
    by_seed, claim = with_lead(lead), claims.by_key('bonus-slows-collapse')
    assert {claim.judge(runs, by_seed)[0] for runs in by_seed} == {per_seed}
    assert seed_means.settled(seed_means.gap_means(claim, by_seed)) == on_means
    said = seed_means.means_sentence(claim, by_seed)
    says = f'is *{on_means}*' if on_means == 'tied' else f'*{on_means}*'
    assert f'taken together the seeds say it {says}' in said and 'does not change the verdict' in said


def test_a_threshold_is_read_on_the_means_too_and_a_bare_claim_has_no_second_look():
    by_seed = with_lead(LEAD)  # the unregularised run falls from 0.6 to about 0.2 on every seed: ratio about 0.36
    found, = seed_means.gap_means(claims.by_key('collapse'), by_seed)
    assert found['mean_b'] == 0.35 and found['label'] == 'entropy ratio, end to start against the threshold 0.35'
    assert found['tolerance'] == pytest.approx(claims.bound_tolerance(claims.by_key('collapse').bounds[0], by_seed)
                                               / math.sqrt(len(by_seed)))
    bare = claims.Claim('bare', claims.OBSERVATION, 'a bare check', ('none',), lambda runs: (True, ''))
    assert seed_means.means_sentence(bare, by_seed) is None


def test_the_reading_of_a_tied_claim_carries_the_means_and_counts_its_ties():
    by_seed = with_lead(LEAD)
    summary = claims.seed_verdict(claims.by_key('bonus-slows-collapse'), by_seed, list(range(len(by_seed))))
    assert summary['verdict'] == claims.TIED
    found = explanations.explain(summary, by_seed)
    assert found['means'] == seed_means.means_sentence(claims.by_key('bonus-slows-collapse'), by_seed)
    text = '\n'.join(explanations.explanation_lines([found]))
    assert 'tied, 0 of 5 seeds (5 tied; the bare check true on 5).' in text and 'true on 0 of 5' not in text
    assert 'the seeds say it *holds*' in text
    assert ties.TIED == 'tied'


@pytest.mark.parametrize('k, n, said', [(1, 1, 'its one gap'), (2, 2, 'both gaps'), (6, 6, 'all 6 gaps'),
                                        (2, 4, '2 of its 4 gaps'), (1, 2, '1 of its 2 gaps')])
def test_gaps_are_counted_in_words(k, n, said):
    assert seed_means._gaps(k, n) == said
