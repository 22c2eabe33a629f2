"""KL estimators and the regularisers of chapter 10: KL to a reference policy, entropy bonus."""
import torch

import agentrl as arl
from agentrl.logprobs import check_same_shape

KL_KINDS = ('k1', 'k2', 'k3')
KL_ESTIMATE_KINDS = ('k1', 'k2', 'k3', 'k1+', 'k3+')


def kl_penalty(logp, ref_logp, kind):
    """Per-token estimate of KL(pi || ref) for tokens drawn from pi, l = ref_logp - logp: [...], [...] -> [...]; k1 = -l, k2 = l^2/2, k3 = e^l - 1 - l."""
    check_same_shape('logp', logp, 'ref_logp', ref_logp)
    log_ratio = ref_logp - logp  # l = log pi_ref(y) - log pi(y), y ~ pi
    if kind == 'k1':
        return -log_ratio
    if kind == 'k2':
        return 0.5 * log_ratio ** 2
    if kind == 'k3':
        return torch.expm1(log_ratio) - log_ratio
    raise ValueError(f'unknown KL kind {kind!r}; valid kinds: {", ".join(map(repr, KL_KINDS))}')


def check_kl_kind(kind):
    """Raise ValueError unless kind is one of kl_estimate's kinds."""
    if kind not in KL_ESTIMATE_KINDS:
        raise ValueError(f'unknown KL kind {kind!r}; valid kinds: {", ".join(map(repr, KL_ESTIMATE_KINDS))}')


def kl_estimate(logp, ref_logp, kind='k3'):
    """Per-token KL(pi_theta || pi_ref) estimate [B, T]; kind 'k1'|'k2'|'k3', or 'k1+'|'k3+' = value of k, gradient of k2."""
    arl.check_kl_kind(kind)
    if kind.endswith('+'):
        value = arl.kl_penalty(logp, ref_logp, kind[:-1])
        grad = arl.kl_penalty(logp, ref_logp, 'k2')
        return grad - grad.detach() + value.detach()  # straight-through: forward value, k2 gradient
    return arl.kl_penalty(logp, ref_logp, kind)
