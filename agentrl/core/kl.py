"""Per-token estimators of KL(pi || pi_ref) from tokens sampled by pi, and their straight-through variants."""
import torch

from agentrl.core.logprobs import check_same_shape

KL_KINDS = ('k1', 'k2', 'k3')  # the plain estimators (Schulman's note): value and gradient of the same formula
KL_ESTIMATE_KINDS = KL_KINDS + ('k1+', 'k3+')  # '+': the value of k1/k3 with the gradient of k2


def _k1(log_ratio):
    return -log_ratio


def _k2(log_ratio):
    return 0.5 * log_ratio ** 2


def _k3(log_ratio):
    return torch.expm1(log_ratio) - log_ratio  # expm1 keeps precision when the ratio is close to 1


_FORMULAS = {'k1': _k1, 'k2': _k2, 'k3': _k3}


def check_kl_kind(kind):
    """Raise ValueError unless kind is one of KL_ESTIMATE_KINDS."""
    if kind not in KL_ESTIMATE_KINDS:
        raise ValueError(f'unknown KL kind {kind!r}; valid kinds: {", ".join(map(repr, KL_ESTIMATE_KINDS))}')


def kl_penalty(logp, ref_logp, kind):
    """Plain estimate of KL(pi || ref) per sampled token: logp, ref_logp [...] -> [...].

    With l = ref_logp - logp: k1 = -l, k2 = l^2 / 2, k3 = e^l - 1 - l.
    """
    check_same_shape('logp', logp, 'ref_logp', ref_logp)
    formula = _FORMULAS.get(kind)
    if formula is None:
        raise ValueError(f'unknown KL kind {kind!r}; valid kinds: {", ".join(map(repr, KL_KINDS))}')
    return formula(ref_logp - logp)


def kl_estimate(logp, ref_logp, kind='k3'):
    """KL(pi || ref) estimate per token, any of KL_ESTIMATE_KINDS: [...] -> [...].

    A '+' kind reports the value of its base estimator but back-propagates the gradient of k2,
    the one whose sample gradient is unbiased for the reverse KL when used as a loss.
    """
    check_kl_kind(kind)
    if not kind.endswith('+'):
        return kl_penalty(logp, ref_logp, kind)
    shown = kl_penalty(logp, ref_logp, kind[:-1]).detach()
    carrier = kl_penalty(logp, ref_logp, 'k2')
    # forward value: shown; backward: the gradient of k2
    return carrier - carrier.detach() + shown
