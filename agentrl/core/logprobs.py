"""Per-token quantities computed from a policy's logits: log-probs of chosen tokens, entropy, masked means."""
import torch


def check_same_shape(name_a, a, name_b, b):
    """Raise ValueError naming both shapes unless tensors a and b have the same shape."""
    if a.shape != b.shape:
        raise ValueError(f'{name_a} has shape {tuple(a.shape)} but {name_b} has shape {tuple(b.shape)}; '
                         'they must be equal')


def selected_log_probs(logits, ids):
    """log-softmax of logits [B, T, V] gathered at token ids [B, T] -> [B, T]."""
    if logits.shape[:-1] != ids.shape:
        raise ValueError(f'logits has shape {tuple(logits.shape)} and ids has shape {tuple(ids.shape)}; '
                         'ids must have the shape of logits without its last (vocabulary) axis')
    return torch.log_softmax(logits, -1).gather(-1, ids.unsqueeze(-1)).squeeze(-1)


def entropy_from_logits(logits):
    """Exact entropy in nats of softmax(logits) over the last axis: [..., V] -> [...].

    A logit of -inf (a token masked out) has probability 0 and adds 0 (p log p -> 0), value and gradient alike.
    """
    logp = torch.log_softmax(logits, -1)
    finite_logp = logp.masked_fill(torch.isneginf(logp), 0.0)  # 0 * -inf would be nan
    return -(logp.exp() * finite_logp).sum(-1)


def masked_mean(x, mask):
    """Mean of x over the positions where mask is 1 (padding ignored): [...], [...] -> scalar; 0 if mask is empty."""
    check_same_shape('x', x, 'mask', mask)
    keep = mask > 0
    if x.dtype in (torch.float16, torch.bfloat16):  # their sums overflow early (float16 at 65504): add in float32
        return masked_mean(x.float(), mask).to(x.dtype)
    return torch.where(keep, x, torch.zeros_like(x)).sum() / keep.sum().clamp(min=1).to(x.dtype)
