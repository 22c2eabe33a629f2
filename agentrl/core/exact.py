"""Expectations computed exactly on small categoricals: every outcome is enumerated and weighted, nothing is sampled."""
import torch

from agentrl.core.kl import KL_KINDS, kl_estimate, kl_penalty


def estimator_moments(logp, ref_logp):
    """{kind: (mean, std)} of one draw of each plain estimator when x ~ pi; logp, ref_logp [K] -> dict."""
    pi = logp.exp()  # [K], the weight of each outcome
    table = {}
    for kind in KL_KINDS:
        draw = kl_penalty(logp, ref_logp, kind)  # [K]: what the estimator reports if x is sampled
        centre = (pi * draw).sum()
        spread = (pi * (draw - centre).square()).sum().sqrt()
        table[kind] = centre.item(), spread.item()
    return table


def expected_loss_grad(theta, ref_logp, kind):
    """Batch-average gradient of a KL loss on samples x ~ softmax(theta), in the infinite-batch limit -> [K].

    The sampling weights enter as constants, exactly as in a real batch: autograd follows k(x) through
    log pi(x) and never through the fact that pi chose x.
    """
    logp = theta.log_softmax(-1)  # [K]
    frozen = logp.exp().detach()  # [K], how often each x shows up in the batch
    surrogate = torch.sum(frozen * kl_estimate(logp, ref_logp, kind))
    (grad,) = torch.autograd.grad(surrogate, theta)
    return grad


def kl_grads(theta, ref_logp):
    """Exact d/dtheta of KL(pi || ref) and of KL(ref || pi), pi = softmax(theta) -> (reverse [K], forward [K])."""
    def divergence(log_a, log_b):  # KL(a || b) from log-probs [K]
        return (log_a.exp() * (log_a - log_b)).sum()

    logp = theta.log_softmax(-1)
    (reverse,) = torch.autograd.grad(divergence(logp, ref_logp), theta, retain_graph=True)
    (forward,) = torch.autograd.grad(divergence(ref_logp, logp), theta)
    return reverse, forward
