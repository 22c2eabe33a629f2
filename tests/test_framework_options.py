"""The exact statements about the frameworks' options, on policies other than the ones the notebook prints."""
import pytest

from agentrl.ch10 import framework_options as fo


def by(rows, **match):
    return [r for r in rows if all(r[key] == value for key, value in match.items())]


@pytest.fixture(scope='module')
def kl_rows():
    return fo.off_policy_kl_table(steps=(0.0, 0.4, 1.5), k=5, seed=11)


def test_ratio_weighted_k3_follows_the_reverse_kl_at_every_distance_and_the_plain_one_does_not(kl_rows):
    assert all(r['reverse_error'] < 1e-12 for r in by(kl_rows, kind='k3', weighting='ratio'))
    assert all(r['reverse_error'] < 1e-12 for r in by(kl_rows, kind='k3+', weighting='ratio-detached'))
    plain = by(kl_rows, kind='k3+', weighting='none')
    assert plain[0]['reverse_error'] < 1e-12 < 1e-3 < plain[1]['reverse_error'] < plain[2]['reverse_error']
    assert all(r['forward_error'] < 1e-12 for r in by(kl_rows, kind='k3', weighting='ratio-detached'))


def test_ratio_weighted_values_are_the_kl_and_plain_ones_drift(kl_rows):
    for r in by(kl_rows, weighting='ratio'):
        if r['kind'] in ('k1', 'k3', 'k3+'):
            assert r['value'] == pytest.approx(r['kl'], rel=1e-12)
    far = by(kl_rows, kind='k3', weighting='none', step=1.5)[0]
    assert abs(far['value'] - far['kl']) > 1e-2


def test_k2_per_token_misses_only_the_first_tokens_share_of_later_kl():
    rows = fo.two_token_kl_table(k=3, seed=5, shifts=(0.5, 1.5))
    for shift in (0.5, 1.5):
        assert by(rows, shift=shift, loss='k1 reward, whole sequence')[0]['first_error'] < 1e-12
        assert by(rows, shift=shift, loss='k1 reward, to go')[0]['first_error'] < 1e-12
        for name in ('k2 per token', 'k1 reward, own token'):
            row = by(rows, shift=shift, loss=name)[0]
            assert row['second_error'] < 1e-12 and row['first_error'] > 1e-3


def test_only_the_whole_sequence_ratio_is_exact_off_policy_and_gspo_scales_by_the_length():
    rows = fo.ratio_table(steps=(0.0, 0.5), k=3, seed=7)
    assert all(r['error'] < 1e-12 for r in by(rows, loss='sequence ratio, unclipped'))
    for name in ('token ratios, unclipped', 'PPO, token ratios', 'CISPO'):
        assert by(rows, loss=name, step=0.0)[0]['error'] < 1e-12  # on policy every loss is the policy gradient
        assert by(rows, loss=name, step=0.5)[0]['error'] > 1e-2
    on_policy_gspo = by(rows, loss='GSPO', step=0.0)[0]
    # one ratio per sequence, its log the mean over 2 tokens: the gradient is the true one divided by 2
    assert on_policy_gspo['error'] == pytest.approx(0.5, abs=1e-12)
    assert on_policy_gspo['cosine'] == pytest.approx(1.0, abs=1e-12)


def test_sequence_weights_correct_a_sampler_exactly_and_token_weights_do_not():
    rows = fo.sampler_table(temperatures=(1.0, 1.6), thresholds=(float('inf'),), k=3, seed=9)
    assert all(r['error'] < 1e-12 and r['uncorrected'] < 1e-12 for r in by(rows, temperature=1.0))
    for mode in ('sequence_truncate', 'sequence_mask'):
        assert by(rows, temperature=1.6, mode=mode)[0]['error'] < 1e-12
    for mode in ('token_truncate', 'token_mask'):
        row = by(rows, temperature=1.6, mode=mode)[0]
        assert 1e-3 < row['error'] < row['uncorrected']


def test_a_tight_sequence_mask_can_be_worse_than_no_correction():
    rows = fo.sampler_table(temperatures=(2.0,), thresholds=(1.2,), k=4, seed=3)
    masked = by(rows, mode='sequence_mask')[0]
    assert masked['error'] > masked['uncorrected']
