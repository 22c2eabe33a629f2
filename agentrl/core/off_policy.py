"""When the tokens were not drawn by the policy being trained: ratio-weighted KL, sequence ratios, sampler weights.

Three distances matter in one GRPO update. The trainer differentiates at pi (log-probs `logp`); the tokens were
drawn by pi_old, the weights at the start of the update (`old_logp`, recomputed by the trainer), since every
minibatch after the first and every second epoch has already moved pi; and when an inference engine samples, the
probabilities it drew with (`sampler_logp`) differ from the trainer's pi_old too. Every function takes log-probs of
the chosen tokens, shaped [B, T] (or any shape, where no sequence is involved), and a 0/1 mask of policy tokens.
"""
import torch

from agentrl.core.kl import kl_estimate
from agentrl.core.logprobs import check_same_shape

KL_WEIGHTINGS = ('none', 'ratio', 'ratio-detached')
SAMPLER_MODES = ('token_truncate', 'token_mask', 'sequence_truncate', 'sequence_mask')


def ratio_weighted_kl(logp, ref_logp, old_logp, kind, weighting='ratio', estimator=kl_estimate):
    """A per-token estimate of KL(pi || ref) on tokens drawn by pi_old: [...] x 3 -> [...].

    estimator(logp, ref_logp, kind) is the per-token estimate (kl_estimate; chapter 9's kl_penalty also fits).
    weighting 'none': the estimate as the chapter uses it, right only while pi is pi_old;
    'ratio': times r = pi / pi_old, differentiated too, so that E_old[r k] = E_pi[k] holds for value and gradient;
    'ratio-detached': times r as a constant, so the gradient is E_pi of the estimator's own gradient.
    """
    check_same_shape('logp', logp, 'old_logp', old_logp)
    if weighting not in KL_WEIGHTINGS:
        raise ValueError(f'unknown KL weighting {weighting!r}; allowed: {", ".join(map(repr, KL_WEIGHTINGS))}')
    estimate = estimator(logp, ref_logp, kind)
    if weighting == 'none':
        return estimate
    ratio = torch.exp(logp - old_logp)
    return (ratio if weighting == 'ratio' else ratio.detach()) * estimate


def sequence_sum(values, mask):
    """Sum over each row's policy tokens: [B, T], [B, T] -> [B]."""
    check_same_shape('values', values, 'mask', mask)
    return torch.where(mask > 0, values, torch.zeros_like(values)).sum(-1)


def sequence_log_ratio(logp, old_logp, mask):
    """GSPO's length-normalised log-ratio of each sequence: mean over its policy tokens of logp - old_logp -> [B].

    exp of it is the geometric mean of the token ratios; a row without policy tokens gets 0 (ratio 1)."""
    check_same_shape('logp', logp, 'old_logp', old_logp)
    lengths = (mask > 0).sum(-1).clamp(min=1).to(logp.dtype)
    return sequence_sum(logp - old_logp, mask) / lengths


def clipped_objective(ratio, advantages, low, high):
    """PPO's pessimistic objective min(ratio * A, clip(ratio, 1 - low, 1 + high) * A), element by element."""
    return torch.minimum(ratio * advantages, ratio.clamp(1 - low, 1 + high) * advantages)


def gspo_surrogate(logp, old_logp, advantages, mask, low, high):
    """GSPO (Zheng et al. 2025, arXiv 2507.18071): the clipped objective of each sequence's ratio, [B, T] x 2, [B],
    [B, T] -> [B]. One ratio per sequence, so the clip keeps or silences a whole sequence, never a single token."""
    ratio = torch.exp(sequence_log_ratio(logp, old_logp, mask))  # [B]
    return clipped_objective(ratio, advantages, low, high)


def cispo_surrogate(logp, old_logp, advantages, low, high):
    """CISPO (MiniMax 2025, arXiv 2506.13585): per token clip(r, 1 - low, 1 + high), held constant, times A log pi.

    [B, T] x 2, [B] -> [B, T]. Its gradient is clip(r) A grad log pi on every token: a token past the clip keeps a
    capped gradient, where PPO's clipped objective gives it none."""
    check_same_shape('logp', logp, 'old_logp', old_logp)
    weight = torch.exp(logp - old_logp).clamp(1 - low, 1 + high).detach()
    return weight * advantages[:, None] * logp


def sampler_weights(old_logp, sampler_logp, mask, mode, threshold):
    """Constant weights [B, T] that correct a loss for tokens drawn by the sampler instead of the trainer's pi_old.

    The token weight is w = pi_old / pi_sampler; a sequence's is the product of its tokens' w. 'token_truncate':
    min(w, threshold); 'token_mask': w where w <= threshold, else 0; 'sequence_truncate' and 'sequence_mask': the
    same with the sequence weight, given to each of its tokens. Padding gets 0.
    """
    check_same_shape('old_logp', old_logp, 'sampler_logp', sampler_logp)
    check_same_shape('old_logp', old_logp, 'mask', mask)
    if mode not in SAMPLER_MODES:
        raise ValueError(f'unknown sampler correction {mode!r}; allowed: {", ".join(map(repr, SAMPLER_MODES))}')
    if not threshold > 0:
        raise ValueError(f'the sampler-correction threshold must be > 0, got {threshold!r}')
    keep = mask > 0
    log_weight = (old_logp - sampler_logp).detach()  # [B, T]
    if mode.startswith('sequence'):
        log_weight = sequence_sum(log_weight, mask)[:, None].expand_as(log_weight)  # [B, T], one value per row
    weight = log_weight.exp()
    if mode.endswith('truncate'):
        weight = weight.clamp(max=threshold)
    else:
        weight = torch.where(weight <= threshold, weight, torch.zeros_like(weight))
    return torch.where(keep, weight, torch.zeros_like(weight))
