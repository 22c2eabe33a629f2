"""agentrl's math core against independent computations on enumerated distributions."""
import math

import pytest
import torch

import agentrl as arl


def random_pair(k=20, scale=1.0, seed=0):
    """A random policy and reference over k outcomes as float64 log-probs [k], [k]."""
    gen = torch.Generator().manual_seed(seed)
    logits = torch.randn(k, generator=gen, dtype=torch.float64)
    ref = logits + scale * torch.randn(k, generator=gen, dtype=torch.float64)
    return torch.log_softmax(logits, -1), torch.log_softmax(ref, -1)


def exact_reverse_kl(logp, ref_logp):
    """KL(pi || ref) = sum_x pi(x) (log pi(x) - log ref(x)), written out term by term."""
    return sum(math.exp(a) * (a - b) for a, b in zip(logp.tolist(), ref_logp.tolist()))


@pytest.mark.parametrize('scale', [0.05, 0.5, 2.0])
def test_estimator_means_against_exact_kl(scale):
    logp, ref_logp = random_pair(scale=scale)
    p = logp.exp()
    kl = exact_reverse_kl(logp, ref_logp)
    means = {kind: (p * arl.kl_penalty(logp, ref_logp, kind)).sum().item() for kind in arl.KL_KINDS}
    assert means['k1'] == pytest.approx(kl, rel=1e-10)  # unbiased
    assert means['k3'] == pytest.approx(kl, rel=1e-10)  # unbiased
    assert means['k2'] > kl * (1 + 1e-6)  # biased upward
    # the closed forms, written independently of the implementation
    l = (ref_logp - logp).tolist()
    assert means['k2'] == pytest.approx(sum(pi * x * x / 2 for pi, x in zip(p.tolist(), l)), rel=1e-12)
    assert means['k3'] == pytest.approx(sum(pi * (math.exp(x) - 1 - x) for pi, x in zip(p.tolist(), l)), rel=1e-9)


def test_estimator_moments_match_the_direct_sum():
    logp, ref_logp = random_pair(k=50, scale=0.3, seed=3)
    moments = arl.estimator_moments(logp, ref_logp)
    p, l = logp.exp().tolist(), (ref_logp - logp).tolist()
    k1 = [-x for x in l]
    mean = sum(pi * v for pi, v in zip(p, k1))
    std = math.sqrt(sum(pi * (v - mean) ** 2 for pi, v in zip(p, k1)))
    assert moments['k1'][0] == pytest.approx(mean, rel=1e-10)
    assert moments['k1'][1] == pytest.approx(std, rel=1e-10)
    assert moments['k3'][0] == pytest.approx(exact_reverse_kl(logp, ref_logp), rel=1e-10)


def test_k3_is_never_negative():
    l = torch.linspace(-30, 30, 20001, dtype=torch.float64)
    zero = torch.zeros_like(l)
    assert (arl.kl_penalty(zero, l, 'k3') >= 0).all()
    assert (arl.kl_penalty(zero.float(), l.float(), 'k3') >= 0).all()  # too coarse near 0 to see cancellation: below


def test_k3_keeps_its_precision_in_float32_near_the_reference():
    # where the cancellation is: naive exp(l) - 1 - l in float32 is -1.7e-8 at l = -1e-4 (true 5.0e-9), negative on
    # 1261 of these 4002 points, and up to 9% off even for |l| >= 1e-3; expm1 keeps k3 >= 0 and within 1% for |l| >= 1e-5
    magnitude = torch.logspace(-8, -1, 2001, dtype=torch.float64)
    l = torch.cat([-magnitude, magnitude]).float()  # [4002], the log-ratios float32 holds
    k3 = arl.kl_penalty(torch.zeros_like(l), l, 'k3')
    assert k3.dtype == torch.float32 and (k3 >= 0).all()
    exact = torch.expm1(l.double()) - l.double()  # float64 on the same float32 inputs
    relative = (k3.double() - exact).abs() / exact
    assert relative[l.abs() >= 1e-5].max() < 1e-2
    at = arl.kl_penalty(torch.zeros(1), torch.tensor([-1e-4]), 'k3').item()
    assert at == pytest.approx(math.expm1(-1e-4) + 1e-4, rel=1e-2)


@pytest.mark.parametrize('kind', arl.KL_ESTIMATE_KINDS)
def test_kl_of_a_policy_with_itself_is_exactly_zero(kind):
    logp, _ = random_pair()
    assert torch.equal(arl.kl_estimate(logp, logp, kind), torch.zeros_like(logp))
    if kind in arl.KL_KINDS:
        assert torch.equal(arl.kl_penalty(logp, logp, kind), torch.zeros_like(logp))


def test_the_sign_convention_is_log_ref_minus_log_pi():
    logp, ref_logp = torch.tensor([-0.1]), torch.tensor([-2.0])  # pi puts more mass here than ref does
    assert arl.kl_penalty(logp, ref_logp, 'k1').item() == pytest.approx(1.9)  # k1 = log pi - log ref > 0
    assert arl.kl_penalty(logp, ref_logp, 'k3').item() == pytest.approx(math.exp(-1.9) - 1 + 1.9)


@pytest.mark.parametrize('kind', ['k1+', 'k3+'])
def test_straight_through_value_and_gradient(kind):
    logp, ref_logp = random_pair(scale=0.8, seed=5)
    a = logp.clone().requires_grad_(True)
    b = logp.clone().requires_grad_(True)
    value = arl.kl_estimate(a, ref_logp, kind)
    assert torch.equal(value.detach(), arl.kl_penalty(logp, ref_logp, kind[:-1]))  # forward value of k
    (grad_st,) = torch.autograd.grad(value.sum(), a)
    (grad_k2,) = torch.autograd.grad(arl.kl_penalty(b, ref_logp, 'k2').sum(), b)
    assert torch.equal(grad_st, grad_k2)  # gradient of k2
    assert torch.allclose(grad_k2, logp - ref_logp)  # d/dlogp of (ref - logp)^2 / 2, by hand


def test_expected_loss_gradients_against_the_true_kl_gradients():
    """E[grad k1] = 0, E[grad k2] = grad reverse KL, E[grad k3] = grad forward KL, computed by hand for softmax."""
    gen = torch.Generator().manual_seed(11)
    theta = torch.randn(8, generator=gen, dtype=torch.float64, requires_grad=True)
    ref_logp = torch.log_softmax(torch.randn(8, generator=gen, dtype=torch.float64), -1)
    logp = torch.log_softmax(theta.detach(), -1)
    p, q = logp.exp(), ref_logp.exp()
    kl = (p * (logp - ref_logp)).sum()
    reverse_by_hand = p * (logp - ref_logp - kl)  # d KL(p || q) / d theta for p = softmax(theta)
    forward_by_hand = p - q  # d KL(q || p) / d theta
    reverse, forward = arl.kl_grads(theta, ref_logp)
    assert torch.allclose(reverse, reverse_by_hand, atol=1e-12)
    assert torch.allclose(forward, forward_by_hand, atol=1e-12)
    assert torch.allclose(arl.expected_loss_grad(theta, ref_logp, 'k1'), torch.zeros(8, dtype=torch.float64), atol=1e-12)
    for kind in ['k2', 'k1+', 'k3+']:
        assert torch.allclose(arl.expected_loss_grad(theta, ref_logp, kind), reverse_by_hand, atol=1e-12)
    assert torch.allclose(arl.expected_loss_grad(theta, ref_logp, 'k3'), forward_by_hand, atol=1e-12)
    assert not torch.allclose(forward_by_hand, reverse_by_hand, atol=1e-3)  # the directions really differ here


@pytest.mark.parametrize('vocab', [2, 7, 316])
def test_entropy_of_uniform_logits_is_log_v(vocab):
    logits = torch.full((3, 4, vocab), 1.7)  # [B, T, V]
    assert torch.allclose(arl.entropy_from_logits(logits), torch.full((3, 4), math.log(vocab)), atol=1e-5)


def test_entropy_matches_the_direct_sum():
    gen = torch.Generator().manual_seed(2)
    logits = torch.randn(5, 9, generator=gen, dtype=torch.float64) * 3
    for row, h in zip(logits, arl.entropy_from_logits(logits)):
        z = [math.exp(v) for v in row.tolist()]
        p = [v / sum(z) for v in z]
        assert h.item() == pytest.approx(-sum(pi * math.log(pi) for pi in p), rel=1e-10)
    assert arl.entropy_from_logits(torch.tensor([50.0, 0.0, 0.0])).item() == pytest.approx(0.0, abs=1e-18)


def test_masked_mean_ignores_padding():
    x = torch.tensor([[1.0, 2.0, 1e30], [3.0, float('nan'), float('inf')]])
    mask = torch.tensor([[1, 1, 0], [1, 0, 0]])
    assert arl.masked_mean(x, mask).item() == pytest.approx(2.0)
    assert arl.masked_mean(x, torch.zeros_like(mask)).item() == 0.0
    y = x.clone().requires_grad_(True)
    arl.masked_mean(y, mask).backward()
    assert torch.equal(y.grad, mask / 3.0)


def test_selected_log_probs_gathers_the_chosen_tokens():
    gen = torch.Generator().manual_seed(4)
    logits = torch.randn(2, 3, 5, generator=gen)  # [B, T, V]
    ids = torch.tensor([[0, 4, 2], [1, 1, 3]])  # [B, T]
    out = arl.selected_log_probs(logits, ids)
    for b in range(2):
        for t in range(3):
            row = logits[b, t]
            assert out[b, t].item() == pytest.approx((row[ids[b, t]] - torch.logsumexp(row, 0)).item(), abs=1e-6)


def test_unknown_kind_names_the_valid_ones():
    logp = torch.zeros(3)
    with pytest.raises(ValueError, match=r"'k4'.*'k1', 'k2', 'k3'"):
        arl.kl_penalty(logp, logp, 'k4')
    with pytest.raises(ValueError, match=r"'k2\+'.*'k1', 'k2', 'k3', 'k1\+', 'k3\+'"):
        arl.kl_estimate(logp, logp, 'k2+')
    with pytest.raises(ValueError, match='valid kinds'):
        arl.kl_estimate(logp, logp, None)


def test_mismatched_shapes_name_both_shapes():
    with pytest.raises(ValueError, match=r'\(2, 3\).*\(3, 2\)'):
        arl.kl_penalty(torch.zeros(2, 3), torch.zeros(3, 2), 'k3')
    with pytest.raises(ValueError, match=r'\(4,\).*\(5,\)'):
        arl.masked_mean(torch.zeros(4), torch.ones(5))
    with pytest.raises(ValueError, match=r'\(2, 3, 5\).*\(2, 4\)'):
        arl.selected_log_probs(torch.zeros(2, 3, 5), torch.zeros(2, 4, dtype=torch.long))
