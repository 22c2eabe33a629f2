"""The tensors every check runs on: float64, built afresh for each call so that gradients never leak between runs.

A case is a dict of tensors. The per-token ones are [B, T] (B rows, T positions); `mask` marks policy tokens with 1.
Log-probabilities are drawn as log-softmax values of random logits over a small vocabulary, so that they are valid
log-probabilities; 'far ratios' then pushes some log-ratios past every clamp the frameworks apply (±10, ±20).
"""
import torch

from agentrl.core.logprobs import entropy_from_logits

CASES = ('ragged', 'empty row', 'single token', 'long', 'far ratios')
LEAVES = ('logp', 'old_logp', 'ref_logp', 'logits')  # what a check may differentiate
GROUP_SIZE = 4  # rows per group, for the advantage estimators


def _log_probs(generator, shape, spread):
    # the log-probability of one token out of 8, under logits of the given spread
    logits = torch.randn(*shape, 8, generator=generator, dtype=torch.float64) * spread
    return torch.log_softmax(logits, -1)[..., 0]


def _lengths_mask(lengths, width):
    positions = torch.arange(width)[None, :]
    return (positions < torch.tensor(lengths)[:, None]).to(torch.float64)


def make(name, seed=0):
    """The case `name` (one of CASES): a dict of float64 tensors, the LEAVES requiring grad."""
    if name not in CASES:
        raise ValueError(f'unknown case {name!r}; allowed: {", ".join(map(repr, CASES))}')
    g = torch.Generator().manual_seed(seed * 1000 + CASES.index(name))
    if name == 'ragged':
        lengths, width = [7, 3, 1, 5, 6, 2, 7, 4], 7
    elif name == 'empty row':
        lengths, width = [5, 0, 3, 6, 0, 2, 4, 1], 6
    elif name == 'single token':
        lengths, width = [1, 1, 1, 1], 1
    elif name == 'long':
        lengths, width = [512, 300, 17, 511], 512
    else:
        lengths, width = [6, 6, 4, 5, 6, 3, 6, 2], 6
    rows = len(lengths)
    mask = _lengths_mask(lengths, width)  # [B, T]
    logp = _log_probs(g, (rows, width), 1.5)
    old_logp = logp + 0.3 * torch.randn(rows, width, generator=g, dtype=torch.float64)
    ref_logp = logp + 0.5 * torch.randn(rows, width, generator=g, dtype=torch.float64)
    if name == 'far ratios':
        # log-ratios from -30 to 21 on a few tokens: beyond verl's ±20 and every k3 clamp at ±10. Not much beyond 21
        # above: k3 of e^25 cancels terms of size 1e10 in its gradient, and float64 rounding there passes 1e-6
        far = torch.tensor([-30.0, -15.0, -11.0, 12.0, 21.0], dtype=torch.float64)
        ref_logp[0, :5] = logp[0, :5] + far
        old_logp[1, :5] = logp[1, :5] - far
    advantages = torch.randn(rows, generator=g, dtype=torch.float64)
    if name == 'far ratios':
        old_logp[2] = logp[2] - 12.0  # a whole row whose mean log-ratio, 12, passes GSPO's clamp at 10
        advantages[:3] = -advantages[:3].abs()  # A < 0 where r is far above 1: dual-clip PPO's territory
    rewards = torch.randint(0, 2, (rows,), generator=g).to(torch.float64)
    rewards[:GROUP_SIZE] = torch.tensor([0.0, 1.0, 1.0, 0.5])[:min(rows, GROUP_SIZE)]
    logits = torch.randn(rows, width, 16, generator=g, dtype=torch.float64) * 2  # [B, T, V]
    case = dict(logp=logp, old_logp=old_logp, ref_logp=ref_logp, mask=mask, rewards=rewards,
                advantages=advantages, logits=logits)
    for leaf in LEAVES:
        case[leaf] = case[leaf].detach().clone().requires_grad_(True)
    return case


def float32_quantile_moves(keep):
    """A condition on a case (for Differs.when): whether the (1 - keep) quantile of the policy tokens' entropies,
    taken in float32 as TRL and ms-swift take it, keeps other tokens than the same quantile in float64."""
    def moves(case):
        entropies = entropy_from_logits(case['logits']).detach()[case['mask'] > 0]
        if entropies.numel() == 0:
            return False
        exact = torch.quantile(entropies, 1 - keep)
        rounded = torch.quantile(entropies.float(), 1 - keep).double()
        return bool(((entropies >= exact) != (entropies >= rounded)).any())
    return moves
