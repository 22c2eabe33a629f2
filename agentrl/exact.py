"""Exact computations on enumerated distributions: estimator moments and the expected gradients of KL losses."""
import torch

import agentrl as arl


def estimator_moments(logp, ref_logp):
    """Exact mean and std of k1, k2, k3 under x ~ pi, by enumerating the K outcomes: [K] -> dict."""
    p = logp.exp()
    moments = {}
    for kind in ['k1', 'k2', 'k3']:
        k = arl.kl_penalty(logp, ref_logp, kind)  # [K], the estimate if outcome x is drawn
        mean = (p * k).sum()
        moments[kind] = (mean.item(), (p * (k - mean) ** 2).sum().sqrt().item())
    return moments


def expected_loss_grad(theta, ref_logp, kind):
    """Gradient of E_{x~pi}[k(x)] with x's sampling weights held fixed, as autograd sees a loss on samples."""
    logp = torch.log_softmax(theta, -1)  # [K]
    weights = logp.exp().detach()  # the sampler's probabilities
    return torch.autograd.grad((weights * arl.kl_estimate(logp, ref_logp, kind)).sum(), theta)[0]


def kl_grads(theta, ref_logp):
    """True gradients of reverse KL(pi || ref) and forward KL(ref || pi) with respect to the logits."""
    logp = torch.log_softmax(theta, -1)
    reverse = (logp.exp() * (logp - ref_logp)).sum()
    forward = (ref_logp.exp() * (ref_logp - logp)).sum()
    return torch.autograd.grad(reverse, theta, retain_graph=True)[0], torch.autograd.grad(forward, theta)[0]
