"""Clip-Cov and KL-Cov token selection on hand-made batches: exactly which tokens are detached or penalised."""
import warnings
from pathlib import Path

import pytest
import torch

import agentrl as arl

from agentrl.ch10.regularizers import centered_cross_product, clip_cov_selection, kl_cov_selection, treated_count

MASK = torch.tensor([[1, 1, 1, 0], [1, 1, 1, 1]])  # 7 policy tokens, one padding position


def test_centered_cross_product_is_computed_over_policy_tokens_only():
    logp = torch.tensor([[-1.0, -2.0, -3.0, 99.0], [-1.0, -1.0, -2.0, -2.0]])
    adv = torch.tensor([1.0, -1.0])
    cov = centered_cross_product(logp, adv, MASK)
    mean_logp = (-1 - 2 - 3 - 1 - 1 - 2 - 2) / 7  # the padding's 99 does not count
    mean_adv = (3 * 1.0 + 4 * -1.0) / 7
    expected = torch.tensor([[(-1 - mean_logp) * (1 - mean_adv), (-2 - mean_logp) * (1 - mean_adv), (-3 - mean_logp) * (1 - mean_adv), 0.0],
                             [(x - mean_logp) * (-1 - mean_adv) for x in (-1.0, -1.0, -2.0, -2.0)]])
    assert torch.allclose(cov, expected)
    assert cov[0, 3] == 0.0


def test_kl_cov_selects_the_top_fraction_of_policy_tokens():
    cov = torch.tensor([[0.1, 5.0, -2.0, 100.0], [3.0, 0.2, 4.0, -1.0]])  # 100.0 sits on padding
    assert torch.equal(kl_cov_selection(cov, MASK, 2 / 7), torch.tensor([[False, True, False, False], [False, False, True, False]]))
    assert torch.equal(kl_cov_selection(cov, MASK, 3 / 7 + 1e-9), torch.tensor([[False, True, False, False], [True, False, True, False]]))
    # int(0.1 * 7) = 0, but at least one token is treated (the authors' max(int(r * N), 1)): the top one
    assert torch.equal(kl_cov_selection(cov, MASK, 0.1), torch.tensor([[False, True, False, False], [False] * 4]))


def test_clip_cov_draws_only_among_tokens_inside_the_bounds():
    cov = torch.tensor([[0.5, 2.0, 3.0, 4.0], [6.0, 1.2, 4.8, 0.9]])  # inside (1, 5): (0,1) (0,2) (1,1) (1,2); (0,3) is padding
    inside = torch.tensor([[False, True, True, False], [False, True, True, False]])
    seen = torch.zeros_like(inside)
    for seed in range(50):
        picked = clip_cov_selection(cov, MASK, 2 / 7, (1.0, 5.0), torch.Generator().manual_seed(seed))
        assert int(picked.sum()) == 2
        assert not (picked & ~inside).any()
        seen |= picked
    assert torch.equal(seen, inside)  # every eligible token gets drawn sometimes
    everything = clip_cov_selection(cov, MASK, 1.0, (1.0, 5.0), torch.Generator().manual_seed(0))
    assert torch.equal(everything, inside)  # asking for more than are eligible takes all eligible ones


def test_clip_cov_treats_at_least_one_token_at_the_papers_fraction():
    cov = torch.tensor([[0.5, 2.0, 3.0, 4.0], [6.0, 1.5, 5.5, 0.9]])
    picked = clip_cov_selection(cov, MASK, 2e-4, (1.0, 5.0), torch.Generator().manual_seed(0))
    assert int(picked.sum()) == 1  # int(2e-4 * 7) = 0 would treat none
    assert treated_count(2e-4, 7) == 1 and treated_count(0.5, 7) == 3 and treated_count(0.5, 0) == 0
    assert treated_count(2e-4, 1) == 1  # a lone policy token is treated too


def test_clip_cov_bounds_are_strict():
    cov = torch.tensor([[1.0, 5.0, 3.0, 4.0], [1.0, 5.0, 1.0, 5.0]])  # only (0, 2) lies strictly inside (1, 5)
    for seed in range(20):
        picked = clip_cov_selection(cov, MASK, 1.0, (1.0, 5.0), torch.Generator().manual_seed(seed))
        assert torch.equal(picked, torch.tensor([[False, False, True, False], [False] * 4]))


def test_clip_cov_never_draws_a_token_the_ppo_clip_already_silenced():
    cov = torch.tensor([[2.0, 2.0, 3.0, 4.0], [2.0, 3.0, 4.0, 2.5]])  # every policy token inside the band
    silenced = torch.tensor([[True, False, True, False], [True, True, False, True]])
    seen = torch.zeros_like(silenced)
    for seed in range(50):
        picked = clip_cov_selection(cov, MASK, 2 / 7, (1.0, 5.0), torch.Generator().manual_seed(seed), silenced)
        assert int(picked.sum()) == 2 and not (picked & silenced).any()
        seen |= picked
    assert torch.equal(seen, torch.tensor([[False, True, False, False], [False, False, True, False]]))


def hand_made_batch():
    """logp, old_logp [2, 4], advantages [2], mask [2, 4] with one padding position."""
    logp = torch.tensor([[-0.1, -2.5, -0.3, 0.0], [-1.0, -0.2, -3.0, -0.5]])
    old_logp = logp + torch.tensor([[0.05, -0.02, 0.03, 0.0], [-0.04, 0.01, 0.02, -0.03]])
    return logp, old_logp, torch.tensor([1.5, -0.5]), MASK  # not +-1: a product and a quotient by A differ


def test_policy_loss_kl_cov_penalises_exactly_the_top_tokens_without_the_ppo_clip():
    logp, old_logp, adv, mask = hand_made_batch()
    old_logp = old_logp.clone()
    old_logp[0, 2] = logp[0, 2] - 0.5  # ratio e^0.5 with A > 0: the PPO clip would silence this token
    cov = centered_cross_product(logp, adv, mask)
    top2 = kl_cov_selection(cov, mask, 2 / 7)
    assert not top2[0, 2]
    cfg, kl_cov = arl.RLConfig(), arl.CovariancePolicyLoss('kl_cov', fraction=2 / 7, kl_coef=0.5)
    kl_cov.begin(None, cfg)
    x = logp.clone().requires_grad_(True)
    loss, stats = arl.policy_loss(x, old_logp, adv, mask, cfg, (kl_cov,))
    (grad,) = torch.autograd.grad(loss, x)
    ratio = torch.exp(logp - old_logp)
    # d/dlogp of -(1/7) sum [ratio * A - 0.5 |logp - old| on the top tokens]
    expected = -(ratio * adv[:, None] - torch.where(top2, 0.5 * torch.sign(logp - old_logp), torch.zeros_like(logp))) / 7
    expected = torch.where(mask > 0, expected, torch.zeros_like(expected))
    assert torch.allclose(grad, expected, atol=1e-7)
    assert grad[0, 2] != 0  # no clip: the token past the range keeps its gradient
    assert stats['cov_selected_frac'] == pytest.approx(2 / 7)


def test_policy_loss_clip_cov_detaches_exactly_the_drawn_tokens():
    logp, old_logp, adv, mask = hand_made_batch()
    cfg = arl.RLConfig(seed=3)
    clip_cov = arl.CovariancePolicyLoss('clip_cov', fraction=3 / 7 + 1e-9, bounds=(-10.0, 10.0))
    clip_cov.begin(None, cfg)
    x = logp.clone().requires_grad_(True)
    rng = torch.get_rng_state()
    loss, stats = arl.policy_loss(x, old_logp, adv, mask, cfg, [clip_cov])
    assert torch.equal(torch.get_rng_state(), rng)
    (grad,) = torch.autograd.grad(loss, x)
    (plain,) = torch.autograd.grad(arl.policy_loss(x, old_logp, adv, mask, arl.RLConfig())[0], x)
    zeroed = (grad == 0) & (plain != 0)
    assert int(zeroed.sum()) == 3  # three of the seven policy tokens lose their gradient, the rest keep it exactly
    assert torch.equal(grad[~zeroed], plain[~zeroed])
    assert stats['cov_selected_frac'] == pytest.approx(3 / 7)
    again = torch.autograd.grad(arl.policy_loss(x, old_logp, adv, mask, cfg, [clip_cov])[0], x)[0]
    assert torch.equal(again, grad)  # the draw is reproducible and takes nothing from the training streams


@pytest.mark.parametrize('options,named', [
    (dict(variant='clip'), 'variant'), (dict(variant='kl_cov', fraction=True), 'cov_fraction'),
    (dict(variant='kl_cov', fraction=2.0), 'cov_fraction'), (dict(variant='kl_cov', kl_coef=float('inf')), 'kl_cov_coef'),
    (dict(variant='kl_cov', fraction=0.0), 'cov_fraction'), (dict(variant='clip_cov', bounds=(5.0, 1.0)), 'cov_bounds'),
    (dict(variant='clip_cov', bounds=(2.0, 2.0)), 'cov_bounds')])
def test_bad_covariance_settings_are_refused_where_they_enter(options, named):
    with pytest.raises(ValueError, match=named):
        arl.CovariancePolicyLoss(**options)


def test_clip_cov_in_policy_loss_skips_clipped_tokens_and_warns_once_when_it_treats_none():
    logp, old_logp, adv, mask = hand_made_batch()
    cfg = arl.RLConfig(seed=1)
    old_logp = logp - 0.5  # every ratio e^0.5 > 1 + clip_high: the A > 0 row is silenced by the clip
    cov = centered_cross_product(logp, adv, mask)
    clip_cov = arl.CovariancePolicyLoss('clip_cov', fraction=1.0, bounds=(-100.0, 100.0))
    clip_cov.begin(None, cfg)
    stats = arl.policy_loss(logp, old_logp, adv, mask, cfg, [clip_cov])[1]
    assert stats['cov_selected_frac'] == pytest.approx(4 / 7)  # the 4 tokens of the A < 0 row, none of the other 3
    nothing = arl.CovariancePolicyLoss('clip_cov', fraction=2e-4, bounds=(float(cov.max()) + 1, float(cov.max()) + 2))
    nothing.begin(None, cfg)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        arl.policy_loss(logp, old_logp, adv, mask, cfg, [nothing])
    (warning,) = caught
    high = float(cov.max())
    assert str(warning.message) == (
        'clip_cov treated no token in a minibatch: cov_fraction 0.0002 of 7 policy tokens asks for 1, but none of '
        f'them is outside the PPO clip with a score strictly inside ({high + 1}, {high + 2}) (said once per run)')
    # attributed to the engine's line that called the plug-in, where a reader looks for the loss being built
    assert Path(warning.filename) == Path(arl.policy_loss.__code__.co_filename)
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        arl.policy_loss(logp, old_logp, adv, mask, cfg, [nothing])  # said once per run, not per minibatch
    nothing.begin(None, cfg)
    with pytest.warns(UserWarning, match='clip_cov treated no token'):
        arl.policy_loss(logp, old_logp, adv, mask, cfg, [nothing])  # a new run says it again


def test_kl_cov_says_so_when_a_minibatch_has_no_policy_token_at_all():
    logp, old_logp, adv, _ = hand_made_batch()
    kl_cov = arl.CovariancePolicyLoss('kl_cov')
    kl_cov.begin(None, arl.RLConfig())
    with pytest.warns(UserWarning) as caught:
        arl.policy_loss(logp, old_logp, adv, torch.zeros_like(MASK), arl.RLConfig(), [kl_cov])
    assert [str(w.message) for w in caught] == [
        'kl_cov treated no token in a minibatch: cov_fraction 0.0002 of 0 policy tokens asks for 0, but there is none '
        '(said once per run)']


def test_clip_cov_refuses_a_minibatch_before_begin():
    logp, old_logp, adv, mask = hand_made_batch()
    with pytest.raises(RuntimeError, match=r'^CovariancePolicyLoss needs begin\(model, cfg\) before its first minibatch: '
                                           r'it reads the seed and the clip range of cfg$'):
        arl.policy_loss(logp, old_logp, adv, mask, arl.RLConfig(), [arl.CovariancePolicyLoss('clip_cov')])
