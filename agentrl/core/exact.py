"""Expectations computed exactly on small categoricals: every outcome is enumerated and weighted, nothing is sampled."""
import torch

from agentrl.core.kl import KL_KINDS, kl_estimate, kl_penalty
from agentrl.core.off_policy import ratio_weighted_kl


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


def expected_off_policy_kl(theta, old_logp, ref_logp, kind, weighting):
    """Value and batch-average gradient of ratio_weighted_kl on tokens x ~ pi_old, pi = softmax(theta), in the
    infinite-batch limit -> (value, grad [K]). The sampling weights pi_old(x) are constants, as in a real batch."""
    logp = theta.log_softmax(-1)  # [K]
    drawn = old_logp.exp().detach()  # [K], how often pi_old draws each x
    surrogate = torch.sum(drawn * ratio_weighted_kl(logp, ref_logp, old_logp, kind, weighting))
    (grad,) = torch.autograd.grad(surrogate, theta)
    return surrogate.item(), grad


def two_token_log_probs(first, second):
    """log pi of every two-token sequence (a, b) of a tabular policy -> (log pi(a) [K, 1], log pi(b | a) [K, K]).

    first [K]: logits of the first token; second [K, K]: row a holds the logits of the second token after a."""
    return first.log_softmax(-1)[:, None], second.log_softmax(-1)


TWO_TOKEN_KL_LOSSES = ('exact', 'k2 per token', 'k1 reward, whole sequence', 'k1 reward, to go', 'k1 reward, own token')


def two_token_kl_grads(first, second, ref_first, ref_second):
    """Exact expected gradients, w.r.t. (first, second), of ways to penalise the sequence KL(pi || ref) of a
    two-token policy, every sequence enumerated and weighted by pi -> {name: (grad first [K], grad second [K, K])}.

    ref_first [K, 1] and ref_second [K, K]: the reference's log-probs, as two_token_log_probs gives them.
    'exact': the gradient of the sequence KL itself. 'k2 per token': k2 of each token as a loss. 'k1 reward, ...':
    k1 = log pi - log ref as a (negated) reward in REINFORCE; 'whole sequence' credits both tokens' k1 to both
    choices, 'to go' credits a token's choice with its own k1 and the later ones, 'own token' with its own only.
    """
    lp_a, lp_b = two_token_log_probs(first, second)  # [K, 1], [K, K]
    weight = (lp_a + lp_b).exp().detach()  # [K, K], pi(a, b) as a sampling frequency
    k1_a, k1_b = (lp_a - ref_first).detach(), (lp_b - ref_second).detach()  # [K, 1], [K, K]
    losses = {
        'exact': ((lp_a + lp_b).exp() * (lp_a + lp_b - ref_first - ref_second)).sum(),
        'k2 per token': (weight * (0.5 * (lp_a - ref_first) ** 2 + 0.5 * (lp_b - ref_second) ** 2)).sum(),
        'k1 reward, whole sequence': (weight * (k1_a + k1_b) * (lp_a + lp_b)).sum(),
        'k1 reward, to go': (weight * ((k1_a + k1_b) * lp_a + k1_b * lp_b)).sum(),
        'k1 reward, own token': (weight * (k1_a * lp_a + k1_b * lp_b)).sum()}
    return {name: torch.autograd.grad(loss, (first, second), retain_graph=True) for name, loss in losses.items()}


def estimator_moments_rows(logp, ref_logp):
    """estimator_moments for many distributions at once, in float64: logp, ref_logp [N, K] ->
    {kind: (mean [N], std [N])}, plus 'kl' (the exact KL(pi || ref) [N]) and 'k1<0' (the chance that a draw of k1 is
    negative, i.e. pi's mass on outcomes the reference likes more [N])."""
    logp, ref_logp = logp.double(), ref_logp.double()
    pi = logp.exp()  # [N, K]
    moments = {}
    for kind in KL_KINDS:
        draw = kl_penalty(logp, ref_logp, kind)  # [N, K]
        centre = (pi * draw).sum(-1)  # [N]
        moments[kind] = centre, (pi * (draw - centre[:, None]).square()).sum(-1).sqrt()
    moments['kl'] = (pi * (logp - ref_logp)).sum(-1)
    moments['k1<0'] = (pi * (ref_logp > logp)).sum(-1)
    return moments
