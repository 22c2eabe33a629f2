"""Sampling episodes: every episode of a batch advances one token per model call, together, with a KV cache.

Each episode has a queue of forced tokens (the prompt, then each observation) that are fed to the
model as they are; when its queue is empty the policy samples the next token from
softmax(logits / temperature) with the caller's torch.Generator. A call ends at ';' (or when it is
as long as a call may be); the environment answers it, and the answer becomes the next queue.
Finished episodes are fed padding, and dropped from the batch once a quarter of its rows are done.
An episode that reaches the model's context is cut there (info['truncated'] = True, reward 0).
"""
import collections
import dataclasses

import torch

from agentrl.substrate.gym import draw_offset


@dataclasses.dataclass
class Trajectory:
    """One episode: token ids, which of them the policy wrote, the sampler's log-probs, reward and info."""
    task_id: str
    group: int  # index of the episode's group (same task) within its sample
    ids: list  # [L] token ids: prompt, calls, observations
    policy: list  # [L] True where the policy sampled the token
    logps: list  # [L] the sampler's log-prob of each policy token at its temperature (0.0 elsewhere)
    reward: float
    info: dict  # n_turns, submitted, hidden_pass, actions, n_invalid, reads, edited, truncated, reward

    @property
    def n_policy_tokens(self):
        return sum(self.policy)


def _compact(cache_part, keep, t):
    """Rows `keep` of a cache part [B, H, context, D], positions 0..t copied (later ones are written before use)."""
    kept = cache_part.new_empty((len(keep),) + cache_part.shape[1:])
    kept[:, :, :t + 1] = cache_part[keep, :, :t + 1]
    return kept


@torch.inference_mode()
def run_episodes(model, envs, tasks, tok, temperature, generator, groups=None):
    """Play one episode per (env, task) as one batch; policy tokens ~ softmax(logits / temperature) -> trajectories.

    Each function's offset in its file is drawn uniformly with generator; then the prompts' common
    first tokens are read in one pass, and every episode advances one token per model call.
    """
    B, context = len(envs), model.cfg.context
    if B == 0:
        return []
    uniforms = torch.rand(B, generator=generator).tolist()  # where each task's function starts in its file
    prompts = [tok.encode(env.reset(task, draw_offset(task, u))) for env, task, u in zip(envs, tasks, uniforms)]
    shared = min(len(p) for p in prompts)  # prompt tokens every episode has: read them in one pass
    seqs = [p[:shared] for p in prompts]
    queues = [collections.deque(p[shared:]) for p in prompts]
    policy = [[False] * shared for _ in range(B)]
    logps = [[0.0] * shared for _ in range(B)]
    calls = [[] for _ in range(B)]  # words of the call each episode is writing
    rows = list(range(B))  # the episode in each row of the cache and the logits
    active = set(rows)  # episodes that still take tokens (finished ones in `rows` are fed padding)
    cache = model.new_cache(B)
    logits = model.prefill(torch.tensor(seqs), cache)  # [B, V]: scores for position `shared`
    t = shared - 1  # the newest position every row has read
    while True:
        samplers = [i for i, b in enumerate(rows) if b in active and not queues[b]]
        if samplers:
            logp = torch.log_softmax(logits[samplers] / temperature, dim=-1)  # [S, V]
            picks = torch.multinomial(logp.exp(), 1, generator=generator)[:, 0]  # [S]
            picked_logp = logp.gather(1, picks[:, None])[:, 0].tolist()
            sampled = {rows[i]: pick for i, pick in zip(samplers, zip(picks.tolist(), picked_logp))}
        for b in [b for b in rows if b in active]:
            env = envs[b]
            if queues[b]:
                seqs[b].append(queues[b].popleft())
                policy[b].append(False)
                logps[b].append(0.0)
            else:
                token, token_logp = sampled[b]
                seqs[b].append(token)
                policy[b].append(True)
                logps[b].append(token_logp)
                calls[b].append(tok.words[token])
                if env.call_is_complete(calls[b]):
                    observation, _ = env.step(calls[b])
                    calls[b] = []
                    queues[b].extend(tok.encode(observation))
            if not queues[b] and env.done:
                active.discard(b)
            elif t + 2 >= context:  # no room for another token: cut the episode cleanly
                env.info['truncated'] = True
                active.discard(b)
        t += 1
        if not active:
            break
        if len(active) <= 0.75 * len(rows):  # drop finished episodes from the batch
            keep = torch.tensor([i for i, b in enumerate(rows) if b in active])
            cache = [tuple(_compact(part, keep, t) for part in block_cache) for block_cache in cache]
            rows = [b for b in rows if b in active]
        current = torch.tensor([seqs[b][t] if b in active else tok.pad_id for b in rows])  # [R]
        logits = model.decode_step(current, cache, t)  # [R, V]: scores for position t + 1
    groups = groups if groups is not None else [0] * B
    return [Trajectory(task.task_id, group, seq, pol, lp, env.reward, dict(env.info, actions=list(env.info['actions'])))
            for env, task, group, seq, pol, lp in zip(envs, tasks, groups, seqs, policy, logps)]


def sample_groups(model, env_factory, tasks, tok, cfg, generator):
    """cfg.group_size episodes per task, groups contiguous, at cfg.temperature with generator -> list of trajectories."""
    repeated = [task for task in tasks for _ in range(cfg.group_size)]
    groups = [i for i in range(len(tasks)) for _ in range(cfg.group_size)]
    envs = [env_factory() for _ in repeated]
    return run_episodes(model, envs, repeated, tok, cfg.temperature, generator, groups)


def has_signal(group):
    """Whether a group's rewards differ (a group with equal rewards has zero GRPO advantage)."""
    return len({t.reward for t in group}) > 1


def split_groups(trajs):
    """Contiguous trajectories -> list of groups (lists), by their group index."""
    groups = []
    for traj in trajs:
        if not groups or groups[-1][0].group != traj.group:
            groups.append([])
        groups[-1].append(traj)
    return groups


def sample_step(model, env_factory, tasks, tok, cfg, generator):
    """One step's sampling: cfg.tasks_per_step random tasks x cfg.group_size episodes -> (kept, sampled).

    `kept` drops the groups whose rewards are all equal. If no group of the draw has a reward spread,
    new tasks are drawn (at most cfg.max_redraws times) so that the update has something to learn
    from; `sampled` is always the first draw, the unfiltered behaviour of the policy.
    """
    sampled = None
    for _ in range(1 + cfg.max_redraws):
        picks = torch.randperm(len(tasks), generator=generator)[:cfg.tasks_per_step].tolist()
        trajs = sample_groups(model, env_factory, [tasks[i] for i in picks], tok, cfg, generator)
        sampled = trajs if sampled is None else sampled
        kept = [traj for group in split_groups(trajs) if has_signal(group) for traj in group]
        if kept:
            break
    return kept, sampled


def behavior_stats(trajs):
    """Means over episodes: reward, reads, invalid calls, turns, policy tokens, submitted, truncated; zero-variance group share."""
    if not trajs:
        raise ValueError('behavior_stats needs at least one trajectory')
    n = len(trajs)
    groups = split_groups(trajs)
    return dict(
        reward=sum(t.reward for t in trajs) / n,
        reads=sum(t.info['reads'] for t in trajs) / n,
        invalid=sum(t.info['n_invalid'] for t in trajs) / n,
        turns=sum(t.info['n_turns'] for t in trajs) / n,
        policy_tokens=sum(t.n_policy_tokens for t in trajs) / n,
        submitted=sum(t.info['submitted'] for t in trajs) / n,
        truncated=sum(t.info['truncated'] for t in trajs) / n,
        zero_var=sum(not has_signal(g) for g in groups) / len(groups),
    )


def collate(trajs, pad_id):
    """Trajectories -> dict: ids [B, T] (right-padded), action_mask [B, T-1], sample_logp [B, T-1], rewards [B], n_turns [B].

    action_mask[b, t] = 1 where token t + 1 was written by the policy; sample_logp holds the sampler's
    log-prob of that token (0 off the mask).
    """
    T = max((len(t.ids) for t in trajs), default=1)
    B = len(trajs)
    ids = torch.full((B, T), pad_id, dtype=torch.long)
    action_mask = torch.zeros(B, T - 1)
    sample_logp = torch.zeros(B, T - 1)
    for b, traj in enumerate(trajs):
        L = len(traj.ids)
        ids[b, :L] = torch.tensor(traj.ids)
        action_mask[b, :L - 1] = torch.tensor(traj.policy[1:], dtype=torch.float)
        sample_logp[b, :L - 1] = torch.tensor(traj.logps[1:])
    rewards = torch.tensor([t.reward for t in trajs], dtype=torch.float)
    n_turns = torch.tensor([t.info['n_turns'] for t in trajs], dtype=torch.long)
    return dict(ids=ids, action_mask=action_mask, sample_logp=sample_logp, rewards=rewards, n_turns=n_turns)
