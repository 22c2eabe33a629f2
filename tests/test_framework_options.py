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


def test_k3_plus_with_a_differentiated_ratio_follows_twice_the_reverse_minus_the_forward_kl():
    rows = fo.ratio_k3_plus_table(steps=(0.0, 0.7, 1.8), k=5, seed=13)
    for row in rows:
        assert row['combined_error'] < 1e-12
        assert row['reverse_error'] > 1e-2 and row['forward_error'] > 1e-2  # neither KL's gradient alone


def test_the_relative_scale_changes_with_length_only_against_the_per_sequence_mean():
    lengths, horizon = (2, 7, 31, 5), 48
    rows = fo.scale_pairs(lengths, horizon)
    assert len(rows) == 12
    for row in rows:
        assert row['constant'] == (not row['involves_per_sequence_mean'])
    at = {(r['term'], r['policy']): r['scales'] for r in rows}
    mean_length = sum(lengths) / len(lengths)
    assert at['seq-mean-token-sum', 'token-mean'] == pytest.approx([mean_length] * 4, rel=1e-12)
    assert at['seq-mean-token-sum', 'seq-mean-token-sum-norm'] == pytest.approx([horizon] * 4, rel=1e-12)
    assert at['seq-mean-token-sum', 'seq-mean-token-mean'] == pytest.approx(lengths, rel=1e-12)


def test_gspo_on_policy_is_the_true_gradient_over_the_length_only_when_lengths_agree():
    same = fo.gspo_on_policy(mixed=False, k=3, seed=8)
    assert same['cosine'] == pytest.approx(1.0, abs=1e-12) and same['error'] == pytest.approx(0.5, abs=1e-12)
    mixed = fo.gspo_on_policy(mixed=True, k=3, seed=8)
    assert mixed['lengths'] == [1, 2]
    assert mixed['cosine'] < 0.999  # not parallel to the true gradient
    assert mixed['error_vs_scaled'] < 1e-12  # each sequence's own term divided by its own length


def test_group_advantages_match_grpo_and_drop_or_widen_the_spread_as_asked():
    import torch

    import agentrl as arl
    from agentrl.substrate.grpo import compute_advantages
    rewards = torch.tensor([1.0, 0.0, 0.0, 1.0, 1.0, 1.0, 0.0, 0.0])
    cfg = arl.RLConfig(group_size=4, turn_cost=0.0)
    assert torch.allclose(fo.group_advantages(rewards, 4), compute_advantages({'rewards': rewards}, cfg))
    centred = torch.tensor([0.5, -0.5, -0.5, 0.5, 0.5, 0.5, -0.5, -0.5])
    assert torch.allclose(fo.group_advantages(rewards, 4, 'none'), centred)
    assert torch.allclose(fo.group_advantages(rewards, 4, 'batch'), centred / (rewards.std() + 1e-6))
    with pytest.raises(ValueError, match='unknown advantage scale'):
        fo.group_advantages(rewards, 4, 'token')
