"""Held-out evaluation of a trained policy: how often it solves each task, how varied its attempts are, and how far
it has drifted from the policy it started from."""
import torch

from agentrl.core.kl import kl_estimate
from agentrl.core.logprobs import masked_mean, selected_log_probs
from agentrl.core.metrics import pass_at_k
from agentrl.substrate.grpo import RLConfig
from agentrl.substrate.gym import make_env
from agentrl.substrate.rollout import collate, sample_groups


def diversity(model, start_model, tasks, tok, n=16, seed=0):
    """Metrics of `model` on the given (held-out) tasks from n attempts at each -> dict.

    pass1, pass8: the unbiased pass@k of each task (arl.pass_at_k), averaged over the tasks; distinct: the number of
    different action sequences among a task's attempts, averaged; invalid: malformed tool calls per episode;
    kl_start: the per-token k3 estimate of KL(model || start_model) over the attempts' policy tokens. The attempts are
    drawn with a generator of their own seeded by `seed`; no global random state is read or changed.
    """
    def average(values):  # left to right, then one division
        return sum(values) / len(values)

    sampling, draws = RLConfig(group_size=n), torch.Generator().manual_seed(seed)
    episodes = sample_groups(model, lambda: make_env(sampling), tasks, tok, sampling, draws)
    by_task = [episodes[first:first + n] for first in range(0, len(episodes), n)]  # a task's attempts are adjacent
    wins = [sum(1 for ep in attempts if ep.info['submitted'] and ep.info['hidden_pass']) for attempts in by_task]
    routines = [len({' '.join(ep.info['actions']) for ep in attempts}) for attempts in by_task]
    padded = collate(episodes, tok.pad_id)
    tokens = padded['ids']  # [B, T]
    with torch.no_grad():
        start_logp = selected_log_probs(start_model(tokens)[:, :-1], tokens[:, 1:])  # per next token
    drift = masked_mean(kl_estimate(padded['sample_logp'], start_logp), padded['action_mask'])
    return dict(pass1=average([pass_at_k(n, c, 1) for c in wins]), pass8=average([pass_at_k(n, c, 8) for c in wins]),
                distinct=average(routines), invalid=average([ep.info['n_invalid'] for ep in episodes]),
                kl_start=drift.item())
