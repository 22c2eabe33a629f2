"""The real model's rollout: groups of replies to training prompts, scored, measured, and collated for the engine.

One step draws cfg.tasks_per_step prompts with the training generator, samples cfg.group_size replies to each at the
sampler's temperature, and scores every reply with the task's strict reward. Groups whose rewards are all equal carry
no GRPO signal: they are dropped from the update, and up to cfg.max_redraws fresh draws are made when none is left.
"""
from dataclasses import dataclass

import torch

from agentrl.core.logprobs import entropy_from_logits
from agentrl.cpu import fixed_threads
from agentrl.pretrained.loader import MODEL_THREADS
from agentrl.realrl.policy import context_key, stop_test
from agentrl.realrl.rewards import in_format, reward
from agentrl.realrl.sampling import sample_replies
from agentrl.realrl.tasks import draw_tasks

REPLIES_LOGGED = 2  # replies kept in each step's record, from its first group


@dataclass
class ReplyGroup:
    """cfg.group_size replies to one prompt."""
    task: object  # agentrl.realrl.tasks.Task
    context: int  # which of the rollout's prompts (CausalLMPolicy.contexts) the replies continue
    prompt: torch.Tensor  # [P]
    tokens: torch.Tensor  # [G, L] the drawn ids
    mask: torch.Tensor  # [G, L] 1.0 up to and including the end of turn
    logp: torch.Tensor  # [G, L, V] the sampling distribution at each position, as log-probs (None if not kept)
    texts: list  # [G] the replies, decoded
    rewards: list  # [G] 0.0 or 1.0
    formats: list  # [G] whether each reply has the asked form (right or wrong)
    temperature: float  # the sampler's

    @property
    def flat(self):
        return len(set(self.rewards)) == 1

    def chosen_logp(self):
        """The sampler's log-prob of each drawn token -> [G, L] (zeros when the distributions were not kept)."""
        if self.logp is None:
            return torch.zeros(self.tokens.shape)
        return self.logp.gather(-1, self.tokens[..., None])[..., 0]


class TaskRollout:
    """Sampling, scoring and collating on `tasks` for the GRPO engine (see the module's docstring).

    contexts: the tasks' prompts, in order; a policy that scores this rollout's batches holds them
    (CausalLMPolicy(lm, rollout.contexts)). reference: the frozen policy whose KL the step records measure (None: no
    KL logged).
    """

    def __init__(self, tasks, codec, reply_tokens, sandbox=None, reference=None):
        if reply_tokens < 1:
            raise ValueError(f'reply_tokens must be >= 1, got {reply_tokens}')
        self.tasks, self.codec, self.reply_tokens, self.sandbox = list(tasks), codec, reply_tokens, sandbox
        self.reference = reference
        self.contexts = [codec.prompt(task) for task in self.tasks]
        self._index = {task.task_id: k for k, task in enumerate(self.tasks)}

    def groups(self, policy, tasks, size, temperature, generator, keep_logp=True):
        """`size` replies to each task's prompt at `temperature`, all drawn in one batch with `generator`, scored ->
        [ReplyGroup] (keep_logp=False: without the per-position distributions, which only training reads)."""
        unknown = [task.task_id for task in tasks if task.task_id not in self._index]
        if unknown:
            raise ValueError(f'tasks {unknown} are not among the rollout\'s {len(self.tasks)} tasks')
        prompts = [self.contexts[self._index[task.task_id]] for task in tasks]
        drawn = sample_replies(policy.lm, prompts, size, self.reply_tokens, generator, temperature, self.codec.end_id,
                               keep_logp=keep_logp, finished=stop_test(self.codec, tasks))
        out = []
        for task, samples in zip(tasks, drawn):
            texts = [self.codec.text(row, m) for row, m in zip(samples.tokens, samples.mask)]
            out.append(ReplyGroup(task, self._index[task.task_id], samples.prompt, samples.tokens, samples.mask,
                                  samples.logp, texts, [reward(task, text, self.sandbox) for text in texts],
                                  [in_format(task, text) for text in texts], temperature))
        return out

    def sample_step(self, policy, cfg, generator):
        """One step's groups -> (kept, sampled): sampled is the first draw, kept its groups with a reward spread (or
        those of a later draw, at most cfg.max_redraws more, when the first has none)."""
        sampled = kept = None
        for _ in range(1 + cfg.max_redraws):
            tasks = draw_tasks(self.tasks, cfg.tasks_per_step, generator)
            drawn = self.groups(policy, tasks, cfg.group_size, cfg.temperature, generator)
            sampled = drawn if sampled is None else sampled
            kept = [g for g in drawn if not g.flat]
            if kept:
                break
        return kept, sampled

    def collate(self, groups):
        """Groups -> the engine's batch: ids [B, T] (context_key of the prompt, then the reply, right-padded),
        action_mask [B, T-1] (1 where token t + 1 is a reply token), sample_logp [B, T-1], rewards [B], n_turns [B]
        (one turn each)."""
        rows = [(g.context, tokens, mask, logp) for g in groups
                for tokens, mask, logp in zip(g.tokens, g.mask, g.chosen_logp())]
        T = 1 + max(len(tokens) for _, tokens, _, _ in rows)
        ids = torch.full((len(rows), T), self.codec.pad_id, dtype=torch.long)
        action_mask, sample_logp = torch.zeros(len(rows), T - 1), torch.zeros(len(rows), T - 1)
        for b, (context, tokens, mask, logp) in enumerate(rows):
            L = len(tokens)
            ids[b, 0] = context_key(context)
            ids[b, 1:1 + L] = tokens
            action_mask[b, :L] = mask
            sample_logp[b, :L] = logp * mask
        rewards = torch.tensor([r for g in groups for r in g.rewards], dtype=torch.float)
        return dict(ids=ids, action_mask=action_mask, sample_logp=sample_logp, rewards=rewards,
                    n_turns=torch.ones(len(rows), dtype=torch.long))

    def stats(self, groups):
        """Means over the sampled replies: reward (= pass@1, the rewards being 0 or 1), the share in the asked format,
        reply length in tokens, the share of flat groups, and the sampling policy's entropy over the whole vocabulary
        at the reply positions; then the first group's first REPLIES_LOGGED replies.
        With a reference policy, also the KL to it at those positions (both at the sampler's temperature): exact,
        and k3 on the drawn tokens."""
        mask = torch.cat([g.mask for g in groups])  # [B, L]
        on = mask.bool()
        logp = torch.cat([g.logp for g in groups])[on]  # [N, V]: the reply positions only
        n = mask.sum()
        record = dict(reward=sum(sum(g.rewards) for g in groups) / mask.shape[0],
                      format=sum(sum(g.formats) for g in groups) / mask.shape[0],
                      reply_tokens=(n / mask.shape[0]).item(),
                      zero_var=sum(g.flat for g in groups) / len(groups),
                      entropy_sampled=entropy_from_logits(logp).mean().item())
        if self.reference is not None:
            ref_logp = reply_logp(self.reference, self.collate(groups), groups[0].temperature)[on]  # [N, V]
            exact = (logp.exp() * (logp - ref_logp)).sum(-1)  # [N]
            tokens = torch.cat([g.tokens for g in groups])[on][:, None]  # [N, 1]
            log_ratio = (ref_logp.gather(-1, tokens) - logp.gather(-1, tokens))[:, 0]  # log pi_ref - log pi
            k3 = torch.expm1(log_ratio) - log_ratio
            record.update(kl_exact=exact.mean().item(), kl_k3=k3.mean().item())
        record['replies'] = groups[0].texts[:REPLIES_LOGGED]
        return record

    def after_update(self, policy, step, record):
        """Nothing: the held-out evaluation runs once, after training (agentrl.realrl.runs.evaluate)."""


def reply_logp(policy, batch, temperature=1.0):
    """The policy's log-distribution at every reply position of a collated batch's rows, without gradients -> [B, L,
    V] (L: the longest reply; positions after a row's reply are not computed and read as uniform)."""
    ids, mask = batch['ids'], batch['action_mask']  # [B, 1 + L], [B, L]
    widths = mask.sum(1).long().clamp(min=1)  # column j scores reply token j + 1
    with fixed_threads(MODEL_THREADS), torch.no_grad():
        logits = policy(ids, widths)[:, :-1]  # [B, L, V]
        return torch.log_softmax(logits.float() / temperature, -1)
