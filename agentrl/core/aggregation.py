"""How a per-token loss becomes one number: the aggregation modes the RL frameworks offer, as token weights.

Each mode is a weighted sum, loss = sum over tokens of w[i, t] * value[i, t], and within a sequence every policy
token gets the same weight. So a mode is fully described by the weight a sequence's token sum receives, which we
call its sequence scale (B sequences; L_i policy tokens in sequence i):

    token-mean               1 / mean_j L_j   (every token of the batch counts the same)
    seq-mean-token-mean      1 / L_i          (every sequence counts the same, whatever its length)
    seq-mean-token-sum       1                (the sequence's summed loss, averaged over sequences)
    seq-mean-token-sum-norm  1 / horizon      (the same, over a fixed length: Dr. GRPO, arXiv 2503.20783)

When a KL or entropy term is aggregated one way and the policy term another, sequence i's term is weighted
scale_term(i) / scale_policy(i) relative to its policy gradient (relative_scale): the coefficient the reader set
is multiplied by that, sequence by sequence.
"""
import torch

from agentrl.core.logprobs import check_same_shape

AGGREGATIONS = ('token-mean', 'seq-mean-token-mean', 'seq-mean-token-sum', 'seq-mean-token-sum-norm')


def sequence_scale(mask, mode, horizon=None):
    """The weight each sequence's token sum gets under `mode`, times the number of sequences: mask [B, T] -> [B]
    (float64).

    horizon: the fixed length of 'seq-mean-token-sum-norm' (required there, ignored elsewhere)."""
    if mode not in AGGREGATIONS:
        raise ValueError(f'unknown aggregation {mode!r}; allowed: {", ".join(map(repr, AGGREGATIONS))}')
    lengths = (mask > 0).sum(-1).to(torch.float64)  # [B]: weights are formed in float64
    if mode == 'token-mean':
        return torch.full_like(lengths, len(lengths) / lengths.sum().clamp(min=1).item())
    if mode == 'seq-mean-token-mean':
        return 1 / lengths.clamp(min=1)
    if mode == 'seq-mean-token-sum':
        return torch.ones_like(lengths)
    if not (isinstance(horizon, (int, float)) and not isinstance(horizon, bool) and horizon > 0):
        raise ValueError(f"'seq-mean-token-sum-norm' divides by a fixed length: horizon must be a number > 0, "
                         f'got {horizon!r}')
    return torch.full_like(lengths, 1 / horizon)


def token_weights(mask, mode, horizon=None):
    """The weight of every token in the aggregated loss: mask [B, T] -> [B, T] (0 on padding)."""
    scale = sequence_scale(mask, mode, horizon)  # [B]
    per_token = scale / max(len(scale), 1)
    return torch.where(mask > 0, per_token[:, None].expand(mask.shape), torch.zeros((), dtype=scale.dtype))


def aggregate(values, mask, mode, horizon=None):
    """The per-token values [B, T] reduced to a scalar as `mode` does (see the module's table)."""
    check_same_shape('values', values, 'mask', mask)
    weights = token_weights(mask, mode, horizon).to(values.dtype)
    return torch.where(mask > 0, values, torch.zeros_like(values)).mul(weights).sum()


def relative_scale(mask, term_mode, policy_mode, horizon=None):
    """Per sequence [B]: how much a term aggregated by term_mode weighs against a policy term aggregated by policy_mode.

    1 everywhere when both use the same mode. It changes with each sequence's length only when one of the two is
    'seq-mean-token-mean'; between the other modes it is one constant for the batch (seq-mean-token-sum against
    token-mean: the mean length; against seq-mean-token-sum-norm: the horizon)."""
    return sequence_scale(mask, term_mode, horizon) / sequence_scale(mask, policy_mode, horizon)
