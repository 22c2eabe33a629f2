"""The off-policy KL weights, loss aggregation, sequence ratios and sampler weights against closed forms written here."""
import math

import pytest
import torch

from agentrl.core import aggregation, off_policy
from agentrl.core.aggregation import aggregate, relative_scale, sequence_scale, token_weights
from agentrl.core.entropy_control import adapt_entropy_coef, top_entropy_mask
from agentrl.core.off_policy import (cispo_surrogate, ratio_weighted_kl, sampler_weights, sequence_log_ratio,
                                     sequence_sum)
from agentrl.core.exact import expected_off_policy_kl, two_token_kl_grads, two_token_log_probs

F64 = torch.float64


def three_policies(k=6, distance=0.5, seed=0):
    """theta (a leaf), pi_old's and the reference's log-probs [k]: pi_old is `distance` away from pi in logit noise."""
    gen = torch.Generator().manual_seed(seed)
    logits = torch.randn(k, generator=gen, dtype=F64)
    old = (logits + distance * torch.randn(k, generator=gen, dtype=F64)).log_softmax(-1)
    ref = torch.randn(k, generator=gen, dtype=F64).log_softmax(-1)
    return logits.clone().requires_grad_(), old, ref


def reverse_kl_grad(theta, ref):
    """d/dtheta KL(pi || ref) for pi = softmax(theta): pi * (log pi - log ref - KL), by hand."""
    p = theta.detach().softmax(-1)
    log_ratio = p.log() - ref
    return p * (log_ratio - (p * log_ratio).sum())


def forward_kl_grad(theta, ref):
    """d/dtheta KL(ref || pi) for pi = softmax(theta): pi - ref, by hand."""
    return theta.detach().softmax(-1) - ref.exp()


@pytest.mark.parametrize('distance', [0.1, 0.5, 1.5])
@pytest.mark.parametrize('kind, weighting, follows', [
    ('k1', 'ratio', 'reverse'), ('k3', 'ratio', 'reverse'),  # E_old[r k] is KL(pi || ref) as a function of theta
    ('k2', 'ratio-detached', 'reverse'), ('k3+', 'ratio-detached', 'reverse'),  # E_pi of k2's gradient
    ('k3', 'ratio-detached', 'forward')])  # E_pi of k3's own gradient: the forward KL's
def test_the_ratio_makes_an_estimator_exact_at_any_distance(distance, kind, weighting, follows):
    theta, old, ref = three_policies(distance=distance)
    _, grad = expected_off_policy_kl(theta, old, ref, kind, weighting)
    truth = reverse_kl_grad(theta, ref) if follows == 'reverse' else forward_kl_grad(theta, ref)
    assert torch.allclose(grad, truth, atol=1e-12)


@pytest.mark.parametrize('kind, follows', [('k3+', 'reverse'), ('k2', 'reverse'), ('k3', 'forward')])
def test_without_the_ratio_the_estimators_are_exact_only_on_policy(kind, follows):
    truth_of = reverse_kl_grad if follows == 'reverse' else forward_kl_grad
    errors = []
    for distance in (0.0, 0.3, 1.0):
        theta, old, ref = three_policies(distance=distance)
        if distance == 0.0:
            old = theta.detach().log_softmax(-1)
        _, grad = expected_off_policy_kl(theta, old, ref, kind, 'none')
        errors.append((grad - truth_of(theta, ref)).norm().item())
    assert errors[0] < 1e-12 and errors[1] > 1e-3 and errors[2] > errors[1]


@pytest.mark.parametrize('kind, weighting', [('k2', 'ratio'), ('k3+', 'ratio'), ('k1', 'ratio-detached')])
def test_the_other_weightings_follow_neither_kl(kind, weighting):
    theta, old, ref = three_policies(distance=0.5)
    _, grad = expected_off_policy_kl(theta, old, ref, kind, weighting)
    assert (grad - reverse_kl_grad(theta, ref)).norm() > 1e-3 and (grad - forward_kl_grad(theta, ref)).norm() > 1e-3


def test_the_ratio_weighted_values_are_the_kl_of_pi():
    theta, old, ref = three_policies(distance=0.8)
    p = theta.detach().softmax(-1)
    kl = sum(pi * (math.log(pi) - r) for pi, r in zip(p.tolist(), ref.tolist()))
    for kind in ('k1', 'k3'):
        assert expected_off_policy_kl(theta, old, ref, kind, 'ratio')[0] == pytest.approx(kl, rel=1e-12)
        assert expected_off_policy_kl(theta, old, ref, kind, 'none')[0] != pytest.approx(kl, rel=1e-3)


def test_a_bad_weighting_is_named():
    theta, old, ref = three_policies()
    with pytest.raises(ValueError, match="unknown KL weighting 'ratio2'; allowed: 'none', 'ratio', 'ratio-detached'"):
        off_policy.ratio_weighted_kl(theta.log_softmax(-1), ref, old, 'k3', 'ratio2')


def two_token_policy(k=4, seed=1):
    gen = torch.Generator().manual_seed(seed)
    first = torch.randn(k, generator=gen, dtype=F64).requires_grad_()
    second = torch.randn(k, k, generator=gen, dtype=F64).requires_grad_()
    ref = two_token_log_probs(torch.randn(k, generator=gen, dtype=F64), torch.randn(k, k, generator=gen, dtype=F64))
    return first, second, ref


def test_two_token_sequence_kl_gradient_by_enumeration():
    first, second, (ref_a, ref_b) = two_token_policy()
    k = len(first)
    total = 0
    for a in range(k):
        for b in range(k):
            logp = first.log_softmax(-1)[a] + second[a].log_softmax(-1)[b]
            total = total + logp.exp() * (logp - ref_a[a, 0] - ref_b[a, b])
    by_hand = torch.autograd.grad(total, (first, second))
    grads = two_token_kl_grads(first, second, ref_a, ref_b)
    for name in ('exact', 'k1 reward, whole sequence', 'k1 reward, to go'):
        assert all(torch.allclose(g, h, atol=1e-12) for g, h in zip(grads[name], by_hand)), name


def test_k2_per_token_misses_exactly_the_later_tokens_kl():
    first, second, (ref_a, ref_b) = two_token_policy()
    grads = two_token_kl_grads(first, second, ref_a, ref_b)
    for name in ('k2 per token', 'k1 reward, own token'):  # equal to each other, token by token
        assert torch.allclose(grads[name][1], grads['exact'][1], atol=1e-12)  # the last token: nothing comes later
        missing = grads['exact'][0] - grads[name][0]
        # what is missing: the second token's KL credited to the first choice, pi(a) (KL_a - E[KL_a])
        p_a = first.detach().softmax(-1)
        q = second.detach().log_softmax(-1)
        kl_a = (q.exp() * (q - ref_b)).sum(-1)  # [K]
        assert torch.allclose(missing, p_a * (kl_a - (p_a * kl_a).sum()), atol=1e-12)
        assert missing.norm() > 1e-3
    assert all(torch.allclose(g, h, atol=1e-12) for g, h in zip(grads['k2 per token'], grads['k1 reward, own token']))


LENGTHS = (3, 1, 4)


def mask_of(lengths, width=5):
    return (torch.arange(width)[None, :] < torch.tensor(lengths)[:, None]).to(F64)


@pytest.mark.parametrize('mode, scale', [
    ('token-mean', lambda lengths: [len(lengths) / sum(lengths)] * len(lengths)),
    ('seq-mean-token-mean', lambda lengths: [1 / n for n in lengths]),
    ('seq-mean-token-sum', lambda lengths: [1.0] * len(lengths)),
    ('seq-mean-token-sum-norm', lambda lengths: [1 / 8] * len(lengths))])
def test_each_aggregation_weighs_a_sequence_by_its_derived_scale(mode, scale):
    mask = mask_of(LENGTHS)
    values = torch.randn(mask.shape, dtype=F64, generator=torch.Generator().manual_seed(2)).requires_grad_()
    (weights,) = torch.autograd.grad(aggregation.aggregate(values, mask, mode, horizon=8), values)
    expected = torch.tensor(scale(LENGTHS), dtype=F64) / len(LENGTHS)
    assert torch.allclose(weights, mask * expected[:, None], atol=1e-15)
    assert torch.allclose(aggregation.sequence_scale(mask, mode, horizon=8), torch.tensor(scale(LENGTHS), dtype=F64))


def test_token_mean_is_the_masked_mean():
    mask = mask_of(LENGTHS)
    values = torch.randn(mask.shape, dtype=F64, generator=torch.Generator().manual_seed(3))
    assert aggregation.aggregate(values, mask, 'token-mean').item() == pytest.approx(
        values[mask > 0].mean().item(), rel=1e-14)


def test_a_term_aggregated_otherwise_than_the_policy_is_rescaled_by_length():
    mask = mask_of(LENGTHS)
    same = aggregation.relative_scale(mask, 'seq-mean-token-mean', 'seq-mean-token-mean')
    assert torch.equal(same, torch.ones(3, dtype=F64))
    mean_length = sum(LENGTHS) / len(LENGTHS)
    assert torch.allclose(aggregation.relative_scale(mask, 'seq-mean-token-mean', 'token-mean'),
                          torch.tensor([mean_length / n for n in LENGTHS], dtype=F64))
    assert torch.allclose(aggregation.relative_scale(mask, 'seq-mean-token-sum', 'token-mean'),
                          torch.full((3,), mean_length, dtype=F64))


def test_bad_aggregations_are_named():
    mask = mask_of(LENGTHS)
    with pytest.raises(ValueError, match="unknown aggregation 'mean'; allowed: 'token-mean', "):
        aggregation.sequence_scale(mask, 'mean')
    with pytest.raises(ValueError, match='horizon must be a number > 0, got None'):
        aggregation.sequence_scale(mask, 'seq-mean-token-sum-norm')


def test_the_sequence_ratio_is_the_geometric_mean_of_the_token_ratios():
    mask = mask_of((2, 3), width=3)
    logp = torch.tensor([[-1.0, -2.0, -9.0], [-0.5, -0.5, -0.5]], dtype=F64)
    old = torch.tensor([[-1.5, -1.0, 0.0], [-0.5, -1.0, -0.2]], dtype=F64)
    ratios = off_policy.sequence_log_ratio(logp, old, mask).exp()
    assert ratios.tolist() == pytest.approx([(math.exp(0.5) * math.exp(-1.0)) ** 0.5,
                                             (1 * math.exp(0.5) * math.exp(-0.3)) ** (1 / 3)], rel=1e-14)


def test_gspo_keeps_or_silences_a_whole_sequence():
    mask = mask_of((2, 2), width=2)
    old = torch.zeros(2, 2, dtype=F64)
    logp = torch.tensor([[0.5, -0.5], [0.5, 0.5]], dtype=F64, requires_grad=True)  # ratios e^0 and e^0.5 per row
    surrogate = off_policy.gspo_surrogate(logp, old, torch.tensor([1.0, 1.0], dtype=F64), mask, 0.2, 0.2)
    (grad,) = torch.autograd.grad(surrogate.sum(), logp)
    assert torch.all(grad[0] == 0.5) and torch.all(grad[1] == 0)  # d s / d logp_t = s / L in a kept row; 0 if clipped


def test_cispo_keeps_a_capped_gradient_where_ppo_has_none():
    old = torch.zeros(1, 3, dtype=F64)
    logp = torch.tensor([[0.0, 0.5, -0.5]], dtype=F64, requires_grad=True)  # ratios 1, e^0.5 (past 1.2), e^-0.5
    advantages = torch.tensor([2.0], dtype=F64)
    (cispo,) = torch.autograd.grad(off_policy.cispo_surrogate(logp, old, advantages, 0.2, 0.2).sum(), logp)
    ppo = off_policy.clipped_objective(torch.exp(logp - old), advantages[:, None], 0.2, 0.2)
    (ppo_grad,) = torch.autograd.grad(ppo.sum(), logp)
    assert cispo[0].tolist() == pytest.approx([2.0, 1.2 * 2.0, 0.8 * 2.0], rel=1e-14)
    assert ppo_grad[0].tolist() == pytest.approx([2.0, 0.0, math.exp(-0.5) * 2.0], rel=1e-14)


@pytest.mark.parametrize('mode, expected', [
    ('token_truncate', [[2.0, 0.5, 0.0], [3.0, 3.0, 0.25]]),
    ('token_mask', [[2.0, 0.5, 0.0], [0.0, 0.0, 0.25]]),
    ('sequence_truncate', [[1.0, 1.0, 0.0], [3.0, 3.0, 3.0]]),
    ('sequence_mask', [[1.0, 1.0, 0.0], [0.0, 0.0, 0.0]])])
def test_sampler_weights(mode, expected):
    mask = mask_of((2, 3), width=3)
    old = torch.log(torch.tensor([[0.4, 0.1, 0.3], [0.8, 0.8, 0.1]], dtype=F64))
    sampler = torch.log(torch.tensor([[0.2, 0.2, 0.3], [0.2, 0.1, 0.4]], dtype=F64))  # w: 2, 0.5 | 4, 8, 0.25
    weights = off_policy.sampler_weights(old, sampler, mask, mode, threshold=3.0)
    assert torch.allclose(weights, torch.tensor(expected, dtype=F64), rtol=1e-12, atol=0)


def test_the_sampler_correction_recovers_the_true_policy_gradient():
    gen = torch.Generator().manual_seed(4)
    theta = torch.randn(6, generator=gen, dtype=F64).requires_grad_()
    sampler = (theta.detach() + 0.7 * torch.randn(6, generator=gen, dtype=F64)).log_softmax(-1)
    reward = torch.randn(6, generator=gen, dtype=F64)
    p = theta.softmax(-1)
    (truth,) = torch.autograd.grad((p * reward).sum(), theta)
    logp = theta.log_softmax(-1)
    mask = torch.ones(1, 6, dtype=F64)

    def expected_gradient(threshold):
        weights = off_policy.sampler_weights(logp.detach()[None], sampler[None], mask, 'token_truncate', threshold)[0]
        (grad,) = torch.autograd.grad((sampler.exp() * weights * reward * logp).sum(), theta, retain_graph=True)
        return grad
    (uncorrected,) = torch.autograd.grad((sampler.exp() * reward * logp).sum(), theta, retain_graph=True)
    largest = (logp.detach() - sampler).exp().max().item()
    assert torch.allclose(expected_gradient(largest * 1.01), truth, atol=1e-12)
    assert (uncorrected - truth).norm() > 1e-2
    assert 0 < (expected_gradient(largest / 2) - truth).norm() < (uncorrected - truth).norm()


def test_the_entropy_controller_steps_towards_the_target_within_its_bounds():
    from agentrl.core.entropy_control import adapt_entropy_coef
    assert adapt_entropy_coef(0.01, entropy=0.1, target=0.2, step=0.005) == pytest.approx(0.015)
    assert adapt_entropy_coef(0.01, entropy=0.2, target=0.2, step=0.005) == pytest.approx(0.015)  # at the target: up
    assert adapt_entropy_coef(0.01, entropy=0.3, target=0.2, step=0.005) == pytest.approx(0.005)
    assert adapt_entropy_coef(0.003, entropy=0.3, target=0.2, step=0.005) == 0.0
    assert adapt_entropy_coef(0.099, entropy=0.1, target=0.2, step=0.005, high=0.1) == 0.1
    with pytest.raises(ValueError, match='step must be > 0, got 0'):
        adapt_entropy_coef(0.01, 0.1, 0.2, step=0)


def test_the_top_entropy_mask_keeps_the_highest_share_of_policy_tokens():
    from agentrl.core.entropy_control import top_entropy_mask
    entropy = torch.tensor([[0.1, 0.9, 0.5, 7.0], [0.3, 0.7, 0.2, 0.8]], dtype=F64)
    mask = torch.tensor([[1, 1, 1, 0], [1, 1, 1, 1]], dtype=F64)  # 7.0 is padding: it must not count
    kept = top_entropy_mask(entropy, mask, keep=2 / 7)
    # 7 policy entropies sorted: .1 .2 .3 .5 .7 .8 .9; the 5/7 quantile lies between .7 and .8 (position 4.29)
    assert kept.tolist() == [[False, True, False, False], [False, False, False, True]]
    assert torch.equal(top_entropy_mask(entropy, mask, keep=1.0), mask > 0)
    with pytest.raises(ValueError, match=r'keep must be a share in \(0, 1\], got 0'):
        top_entropy_mask(entropy, mask, keep=0)


def test_bad_sampler_corrections_are_named():
    mask = mask_of((2,), width=2)
    logp = torch.zeros(1, 2, dtype=F64)
    with pytest.raises(ValueError, match="unknown sampler correction 'truncate'; allowed: 'token_truncate', "):
        off_policy.sampler_weights(logp, logp, mask, 'truncate', 2.0)
    for threshold in (0.0, float('nan')):
        with pytest.raises(ValueError, match='threshold must be > 0'):
            off_policy.sampler_weights(logp, logp, mask, 'token_mask', threshold)
    with pytest.raises(ValueError, match=r'old_logp has shape \(1, 2\) but sampler_logp has shape \(1, 3\)'):
        off_policy.sampler_weights(logp, torch.zeros(1, 3, dtype=F64), mask, 'token_mask', 2.0)


def test_the_top_entropy_mask_keeps_every_tie_at_its_threshold():
    from agentrl.core.entropy_control import top_entropy_mask
    entropy = torch.tensor([[0.1, 0.5, 0.5, 0.9]], dtype=F64)
    kept = top_entropy_mask(entropy, torch.ones_like(entropy), keep=0.5)  # the median is 0.5, held by two tokens
    assert kept.tolist() == [[False, True, True, True]]


# ------------------------------------------------------------------- shapes, axes and boundaries of the new functions

def _pair(rows=2, length=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(rows, length, generator=g, dtype=torch.float64),
            torch.randn(rows, length, generator=g, dtype=torch.float64))


SHAPE_CHECKS = [
    ('ratio_weighted_kl', lambda a, b: ratio_weighted_kl(a, a, b, 'k3'), 'logp', 'old_logp'),
    ('sequence_sum', lambda a, b: sequence_sum(a, b), 'values', 'mask'),
    ('sequence_log_ratio', lambda a, b: sequence_log_ratio(a, b, torch.ones(2, 3)), 'logp', 'old_logp'),
    ('cispo_surrogate', lambda a, b: cispo_surrogate(a, b, torch.ones(2), 0.2, 0.2), 'logp', 'old_logp'),
    ('sampler_weights', lambda a, b: sampler_weights(b, b, a, 'token_mask', 2.0), 'old_logp', 'mask'),
    ('aggregate', lambda a, b: aggregate(a, b, 'token-mean'), 'values', 'mask'),
    ('top_entropy_mask', lambda a, b: top_entropy_mask(a, b, 0.5), 'entropy', 'mask'),
]


@pytest.mark.parametrize('name, call, first, second', SHAPE_CHECKS, ids=[c[0] for c in SHAPE_CHECKS])
def test_mismatched_shapes_are_refused_naming_both_arguments(name, call, first, second):
    a, _ = _pair(2, 3)
    b, _ = _pair(2, 4)
    with pytest.raises(ValueError, match=rf'^{first} has shape \(2, \d\) but {second} has shape \(2, \d\); they must'):
        call(a, b)


def test_sums_and_lengths_run_along_each_sequence():
    values = torch.arange(6, dtype=torch.float64).view(2, 3)  # [[0, 1, 2], [3, 4, 5]]
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0]])
    assert sequence_sum(values, mask).tolist() == [1.0, 12.0]
    assert sequence_log_ratio(values, torch.zeros_like(values), mask).tolist() == [0.5, 4.0]
    assert sequence_scale(mask, 'seq-mean-token-mean').tolist() == [0.5, 1 / 3]
    # one sequence of a single token: its length-normalised ratio is that token's, not half of it
    assert sequence_log_ratio(values[:1], torch.zeros(1, 3, dtype=torch.float64),
                              torch.tensor([[0.0, 1.0, 0.0]])).tolist() == [1.0]


def test_token_mean_over_a_single_policy_token_and_weights_in_the_values_dtype():
    mask = torch.tensor([[0.0, 1.0, 0.0]])
    assert sequence_scale(mask, 'token-mean').tolist() == [1.0]
    assert token_weights(mask, 'seq-mean-token-sum').tolist() == [[0.0, 1.0, 0.0]]  # one sequence: weight 1, not 1/2
    assert token_weights(mask, 'token-mean').dtype == torch.float64
    values = torch.tensor([[5.0, 2.0, 7.0]], dtype=torch.float32)
    total = aggregate(values, mask, 'seq-mean-token-sum')
    assert total.dtype == torch.float32 and total.item() == 2.0  # padding (mask 0) is left out, not weighted
    padded = torch.tensor([[-math.inf, 2.0, math.nan]])  # what a padding position may hold: it must not leak in
    assert aggregate(padded, mask, 'token-mean').item() == 2.0
    assert relative_scale(torch.tensor([[1.0, 1.0], [1.0, 0.0]]), 'seq-mean-token-sum-norm', 'seq-mean-token-sum',
                          horizon=4).tolist() == [0.25, 0.25]
    assert relative_scale(torch.tensor([[1.0, 1.0], [1.0, 0.0]]), 'seq-mean-token-sum', 'seq-mean-token-sum-norm',
                          horizon=4).tolist() == [4.0, 4.0]
    assert sequence_scale(mask, 'seq-mean-token-sum-norm', horizon=0.5).tolist() == [2.0]
    with pytest.raises(ValueError, match='horizon must be a number > 0, got 0'):
        sequence_scale(mask, 'seq-mean-token-sum-norm', horizon=0)


def test_boundaries_of_the_controller_the_mask_and_the_sampler_weights():
    assert adapt_entropy_coef(0.1, 0.5, 0.4, 0.05, low=0.2, high=0.2) == 0.2  # low == high is a fixed coefficient
    with pytest.raises(ValueError, match=r'low <= high, got low=0.3, high=0.2'):
        adapt_entropy_coef(0.1, 0.5, 0.4, 0.05, low=0.3, high=0.2)
    entropy = torch.tensor([[0.1, 0.9, 0.5, 0.7]])
    with pytest.raises(ValueError, match=r'keep must be a share in \(0, 1\], got 1.5'):
        top_entropy_mask(entropy, torch.ones(1, 4), 1.5)
    none = torch.zeros(1, 4)
    assert not top_entropy_mask(entropy, none, 0.5).any()  # no policy token: nothing kept, whatever keep says
    assert top_entropy_mask(entropy, torch.tensor([[1.0, 1.0, 1.0, 0.0]]), 1).tolist() == [[True, True, True, False]]
    old = torch.log(torch.tensor([[0.5, 0.5]], dtype=torch.float64))
    sampler = torch.log(torch.tensor([[0.25, 0.5]], dtype=torch.float64))  # weights 2 and 1
    assert sampler_weights(old, sampler, torch.ones(1, 2), 'token_mask', 2.0).tolist() == [[2.0, 1.0]]  # 2 <= 2 kept
    assert sampler_weights(old, sampler, torch.ones(1, 2), 'token_truncate', 0.5).tolist() == [[0.5, 0.5]]
    with pytest.raises(ValueError, match='threshold must be > 0, got 0'):
        sampler_weights(old, sampler, torch.ones(1, 2), 'token_mask', 0)


def test_the_default_weighting_is_the_differentiated_ratio():
    logp, old = _pair(2, 3, seed=4)
    ref = logp.detach() - 0.3
    assert torch.equal(ratio_weighted_kl(logp, ref, old, 'k3'), ratio_weighted_kl(logp, ref, old, 'k3', 'ratio'))
