"""Sampling episodes: every episode of a batch advances one token per model call, together, with a KV cache.

Each episode has a queue of forced tokens (the prompt, then each observation) that are fed to the
model as they are; when its queue is empty the policy samples the next token from
softmax(logits / temperature) with the caller's torch.Generator. A call ends at ';' (or when it is
as long as a call may be); the environment answers it, and the answer becomes the next queue.
Finished episodes are fed padding, and dropped from the batch once a quarter of its rows are done.
An episode that reaches the model's context is cut there (info['truncated'] = True, reward 0).

run_episodes_chunked plays the same episodes with the same draws but reads forced tokens in chunks, one model
call per group of episodes instead of one per token. It keeps a fixed clock: an episode samples the token at
position p at tick p - 1, as if every episode advanced one token per tick, and at each tick the episodes due to
sample draw together, in episode order, in one torch.multinomial call, so reading ahead changes when the model
computes a token's scores, never which draw picks it.
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
        self.cache = model.new_chunk_cache(B)
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

        Episodes that start at the same position share a model call: one for those with a single new token, one
        (right-padded to the longest) for those with a chunk. Padding writes cache positions that the episode's
        own later tokens overwrite before any query reads them.
        """
        by_start = {}
        for b in sorted(self.playing):
            if self.fed[b] < len(self.seqs[b]):
                single = len(self.seqs[b]) - self.fed[b] == 1
                by_start.setdefault((self.fed[b], single), []).append(b)
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
def run_episodes_chunked(model, envs, tasks, tok, temperature, generator, groups=None):
    """run_episodes' episodes and draws, with the forced tokens read in chunks -> trajectories.

    Each function's offset in its file is drawn uniformly with generator. Then, tick by tick, the episodes due to
    sample at that tick draw their tokens in one call; between ticks, what they wrote and the environment's answers
    are read in chunks. The tokens and the generator's state are run_episodes' exactly; the log-probs agree to
    float rounding (a chunk's arithmetic is not one token's), so it is not the default: switching would change the
    last digits of every run that uses the sampler's log-probs, and every committed run would have to be redone.
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


def sample_groups(model, env_factory, tasks, tok, cfg, generator, sampler=run_episodes):
    """cfg.group_size episodes per task, groups contiguous, at cfg.temperature with generator -> list of trajectories.

    sampler: run_episodes, or run_episodes_chunked (the same draws, forced tokens read in chunks)."""
    repeated = [task for task in tasks for _ in range(cfg.group_size)]
    groups = [i for i in range(len(tasks)) for _ in range(cfg.group_size)]
    envs = [env_factory() for _ in repeated]
    return sampler(model, envs, repeated, tok, cfg.temperature, generator, groups)


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


def sample_step(model, env_factory, tasks, tok, cfg, generator, sampler=run_episodes):
    """One step's sampling: cfg.tasks_per_step random tasks x cfg.group_size episodes -> (kept, sampled).

    `kept` drops the groups whose rewards are all equal. If no group of the draw has a reward spread,
    new tasks are drawn (at most cfg.max_redraws times) so that the update has something to learn
    from; `sampled` is always the first draw, the unfiltered behaviour of the policy.
    """
    sampled = None
    for _ in range(1 + cfg.max_redraws):
        picks = torch.randperm(len(tasks), generator=generator)[:cfg.tasks_per_step].tolist()
        trajs = sample_groups(model, env_factory, [tasks[i] for i in picks], tok, cfg, generator, sampler)
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
