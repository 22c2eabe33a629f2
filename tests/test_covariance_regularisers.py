"""Clip-Cov and KL-Cov token selection on hand-made batches: exactly which tokens are detached or penalised."""
import torch

from agentrl.regularization import centered_cross_product, clip_cov_selection, kl_cov_selection

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
    assert not kl_cov_selection(cov, MASK, 0.1).any()  # int(0.1 * 7) = 0 tokens: a fraction, not a percent


def test_clip_cov_draws_only_among_tokens_inside_the_bounds():
    cov = torch.tensor([[0.5, 2.0, 3.0, 4.0], [6.0, 1.0, 5.0, 0.9]])  # inside [1, 5]: (0,1) (0,2) (1,1) (1,2); (0,3) is padding
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
