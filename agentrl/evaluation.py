"""Held-out evaluation of a policy: pass@k by the unbiased estimator, diversity of behaviour, KL from the start."""
import math

import torch

import agentrl as arl


def pass_at_k(n, c, k):
    """Chance that k of n attempts (c correct), drawn without replacement, contain a pass; see Chapter 17."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f'pass_at_k needs 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}')
    return 1.0 if n - c < k else 1.0 - math.comb(n - c, k) / math.comb(n, k)


def diversity(model, start_model, tasks, tok, n=16, seed=0):
    """Held-out pass@1, pass@8, distinct action sequences per task, invalid calls, and k3 KL to start_model."""
    cfg = arl.RLConfig(group_size=n)
    trajs = arl.sample_groups(model, lambda: arl.make_env(cfg), tasks, tok, cfg, torch.Generator().manual_seed(seed))
    groups = [trajs[i:i + n] for i in range(0, len(trajs), n)]
    solved = [sum(bool(t.info['submitted'] and t.info['hidden_pass']) for t in g) for g in groups]
    batch = arl.collate(trajs, tok.pad_id)
    with torch.no_grad():
        start_logp = arl.selected_log_probs(start_model(batch['ids'])[:, :-1], batch['ids'][:, 1:])
    return dict(pass1=sum(pass_at_k(n, c, 1) for c in solved) / len(groups),
                pass8=sum(pass_at_k(n, c, 8) for c in solved) / len(groups),
                distinct=sum(len({' '.join(t.info['actions']) for t in g}) for g in groups) / len(groups),
                invalid=sum(t.info['n_invalid'] for t in trajs) / len(trajs),
                kl_start=arl.masked_mean(arl.kl_estimate(batch['sample_logp'], start_logp),
                                         batch['action_mask']).item())
