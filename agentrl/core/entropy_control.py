"""Two ways to steer entropy that the RL frameworks ship: a coefficient chasing a target, and a high-entropy mask.

The target controller is Skywork-OR1's (arXiv 2505.22312), the entropy twin of the adaptive KL coefficient: the
bonus coefficient grows by a fixed step while the measured entropy is at or below the target, shrinks otherwise,
and the bonus is applied only on steps whose entropy was at or below the target. The mask keeps the policy
gradient of the tokens whose entropy is in the top `keep` share of a batch's policy tokens, the finding of "Beyond
the 80/20 rule" (Wang et al. 2025, arXiv 2506.01939) that those few forking tokens carry what RL learns.
"""
import torch

from agentrl.core.logprobs import check_same_shape


def adapt_entropy_coef(coef, entropy, target, step, low=0.0, high=float('inf')):
    """One step of the target controller: coef + step if entropy <= target, else coef - step, kept in [low, high]."""
    if not step > 0:
        raise ValueError(f'the controller step must be > 0, got {step!r}')
    if not low <= high:
        raise ValueError(f'the coefficient bounds must have low <= high, got low={low!r}, high={high!r}')
    moved = coef + step if entropy <= target else coef - step
    return min(max(moved, low), high)


def top_entropy_mask(entropy, mask, keep):
    """bool [B, T]: the policy tokens whose entropy is at least the (1 - keep) quantile of the policy tokens' ones.

    entropy, mask [B, T]; keep in (0, 1] (1 keeps every policy token). The quantile interpolates linearly between
    order statistics, so about a share `keep` of the policy tokens is kept (ties at the threshold all stay)."""
    check_same_shape('entropy', entropy, 'mask', mask)
    if not 0 < keep <= 1:
        raise ValueError(f'keep must be a share in (0, 1], got {keep!r}')
    active = mask > 0
    if keep == 1 or not active.any():
        return active
    threshold = torch.quantile(entropy[active].detach().double(), 1 - keep)
    return active & (entropy.detach().double() >= threshold)
