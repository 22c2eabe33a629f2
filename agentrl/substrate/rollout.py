"""Sampling episodes: a batch of episodes played together, with a KV cache.

Each episode starts with forced tokens (its prompt) and, after each tool call, gets more (the environment's
answer); the policy writes the rest, one token at a time, drawn from softmax(logits / temperature) with the
caller's torch.Generator. A call ends at ';' (or when it is as long as a call may be). An episode that reaches
the model's context is cut there (info['truncated'] = True, reward 0).

Forced tokens are read in chunks, one model call per group of episodes, while the policy's tokens keep a fixed
clock: an episode samples the token at position p at tick p - 1, as if every episode advanced one token per tick,
and at each tick the episodes due to sample draw together, in episode order, in one torch.multinomial call. So
reading ahead changes when the model computes a token's scores, never which draw picks it: the draws are those
of a sampler that feeds every episode one token per model call.
"""
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


class _Batch:
    """The episodes of one run_episodes call: their tokens so far, what the cache holds, and who is still playing."""

    def __init__(self, model, envs, tok, prompts):
        self.model, self.envs, self.tok = model, envs, tok
        self.context = model.cfg.context
        B = len(envs)
        self.seqs = [[] for _ in range(B)]
        self.policy = [[] for _ in range(B)]
        self.logps = [[] for _ in range(B)]
        self.calls = [[] for _ in range(B)]  # words of the call each episode is writing
        self.fed = [0] * B  # tokens of each episode already in the cache (positions 0..fed-1)
        self.slot = list(range(B))  # each episode's row in the cache
        self.playing = set(range(B))  # episodes that will sample again
        self.cache = model.new_cache(B)
        self.next_logits = None  # [B, V]: scores for each playing episode's next position, once fed
        for b, prompt in enumerate(prompts):
            self.force(b, prompt)

    def force(self, b, tokens):
        """Append forced tokens to episode b (as many as the context holds); end the episode if it is over or cut."""
        seq = self.seqs[b]
        room = self.context - len(seq)
        seq += tokens[:room]
        self.policy[b] += [False] * min(len(tokens), room)
        self.logps[b] += [0.0] * min(len(tokens), room)
        if len(tokens) > room or (not self.envs[b].done and len(seq) >= self.context):
            self.envs[b].info['truncated'] = True  # no room left for the next token: cut the episode cleanly
            self.playing.discard(b)
        elif self.envs[b].done:
            self.playing.discard(b)

    def write(self, b, token, token_logp):
        """Append a sampled token to episode b; a finished call goes to the environment, whose answer is forced."""
        self.seqs[b].append(token)
        self.policy[b].append(True)
        self.logps[b].append(token_logp)
        self.calls[b].append(self.tok.words[token])
        observation = []
        if self.envs[b].call_is_complete(self.calls[b]):
            answer, _ = self.envs[b].step(self.calls[b])
            self.calls[b] = []
            observation = self.tok.encode(answer)
        self.force(b, observation)

    def read_pending(self):
        """Read every playing episode's unread tokens into the cache; their next position's scores go to next_logits.

        Episodes that start at the same position share a model call: one for those with a single new token (the
        policy's), one (right-padded to the longest) for those with a chunk. Padding writes cache positions that
        the episode's own later tokens overwrite before any query reads them.
        """
        by_start = {}
        for b in sorted(self.playing):
            unread = len(self.seqs[b]) - self.fed[b]
            if unread:
                by_start.setdefault((self.fed[b], unread == 1), []).append(b)
        for (start, _), episodes in sorted(by_start.items()):
            width = max(len(self.seqs[b]) for b in episodes) - start
            ids = torch.full((len(episodes), width), self.tok.pad_id, dtype=torch.long)
            for row, b in enumerate(episodes):
                chunk = self.seqs[b][start:]
                ids[row, :len(chunk)] = torch.tensor(chunk)
            slots = [self.slot[b] for b in episodes]
            slots = None if slots == list(range(self.cache[0].shape[1])) else torch.tensor(slots)
            hidden = self.model.read(ids, self.cache, start, slots)  # [n, W, C]
            last = torch.tensor([len(self.seqs[b]) - start - 1 for b in episodes])
            logits = self.model.logits(hidden[torch.arange(len(episodes)), last])  # [n, V]
            if self.next_logits is None:
                self.next_logits = logits.new_zeros((len(self.envs), logits.shape[-1]))
            self.next_logits[torch.tensor(episodes)] = logits
            for b in episodes:
                self.fed[b] = len(self.seqs[b])

    def compact(self):
        """Once a quarter of the cache's rows belong to finished episodes, keep only the playing ones' rows."""
        if len(self.playing) > 0.75 * self.cache[0].shape[1]:
            return
        keep = sorted(self.playing)
        rows = torch.tensor([self.slot[b] for b in keep])
        longest = max(self.fed[b] for b in keep)
        self.cache = [_copy_rows(block_cache, rows, longest) for block_cache in self.cache]
        for row, b in enumerate(keep):
            self.slot[b] = row


def _copy_rows(block_cache, rows, length):
    """Rows `rows` of a block's cache [2, B, H, context, D], positions 0..length-1 copied (later ones are written
    before anything reads them)."""
    kept = block_cache.new_empty((2, len(rows)) + block_cache.shape[2:])
    kept[:, :, :, :length] = block_cache[:, rows, :, :length]
    return kept


@torch.inference_mode()
def run_episodes(model, envs, tasks, tok, temperature, generator, groups=None):
    """Play one episode per (env, task) as one batch; policy tokens ~ softmax(logits / temperature) -> trajectories.

    Each function's offset in its file is drawn uniformly with generator. Then, tick by tick, the episodes due to
    sample at that tick draw their tokens in one call; between ticks, what they wrote and the environment's answers
    are read into the cache (see the module's docstring).
    """
    if len(envs) == 0:
        return []
    uniforms = torch.rand(len(envs), generator=generator).tolist()  # where each task's function starts in its file
    prompts = [tok.encode(env.reset(task, draw_offset(task, u))) for env, task, u in zip(envs, tasks, uniforms)]
    batch = _Batch(model, envs, tok, prompts)
    while batch.playing:
        batch.read_pending()
        batch.compact()
        tick = min(len(batch.seqs[b]) for b in batch.playing)  # the next position some episode samples
        due = [b for b in sorted(batch.playing) if len(batch.seqs[b]) == tick]
        logp = torch.log_softmax(batch.next_logits[torch.tensor(due)] / temperature, dim=-1)  # [S, V]
        picks = torch.multinomial(logp.exp(), 1, generator=generator)[:, 0]  # [S]
        picked_logp = logp.gather(1, picks[:, None])[:, 0].tolist()
        for b, token, token_logp in zip(due, picks.tolist(), picked_logp):
            batch.write(b, token, token_logp)
    groups = groups if groups is not None else [0] * len(envs)
    return [Trajectory(task.task_id, group, seq, pol, lp, env.reward, dict(env.info, actions=list(env.info['actions'])))
            for env, task, group, seq, pol, lp in zip(envs, tasks, groups, batch.seqs, batch.policy, batch.logps)]


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
