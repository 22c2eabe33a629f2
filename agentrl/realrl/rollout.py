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
from agentrl.realrl.policy import stop_test
from agentrl.realrl.rewards import in_format, reward
from agentrl.realrl.sampling import sample_replies
from agentrl.realrl.tasks import draw_tasks


@dataclass
class ReplyGroup:
    """cfg.group_size replies to one prompt."""
    task: object  # agentrl.realrl.tasks.Task
    prompt: torch.Tensor  # [P]
    tokens: torch.Tensor  # [G, L] the drawn ids
    mask: torch.Tensor  # [G, L] 1.0 up to and including the end of turn
    logp: torch.Tensor  # [G, L, V] the sampling distribution at each position, as log-probs (None if not kept)
    texts: list  # [G] the replies, decoded
    rewards: list  # [G] 0.0 or 1.0
    formats: list  # [G] whether each reply has the asked form (right or wrong)

    @property
    def flat(self):
        return len(set(self.rewards)) == 1

    def chosen_logp(self):
        """The sampler's log-prob of each drawn token -> [G, L] (zeros when the distributions were not kept)."""
        if self.logp is None:
            return torch.zeros(self.tokens.shape)
        return self.logp.gather(-1, self.tokens[..., None])[..., 0]


class TaskRollout:
    """Sampling, scoring and collating on `tasks` for the GRPO engine (see the module's docstring)."""

    def __init__(self, tasks, codec, reply_tokens, sandbox=None):
        if reply_tokens < 1:
            raise ValueError(f'reply_tokens must be >= 1, got {reply_tokens}')
        self.tasks, self.codec, self.reply_tokens, self.sandbox = list(tasks), codec, reply_tokens, sandbox

    def groups(self, policy, tasks, size, temperature, generator, keep_logp=True):
        """`size` replies to each task's prompt at `temperature`, all drawn in one batch with `generator`, scored ->
        [ReplyGroup] (keep_logp=False: without the per-position distributions, which only training reads)."""
        prompts = [self.codec.prompt(task) for task in tasks]
        drawn = sample_replies(policy.lm, prompts, size, self.reply_tokens, generator, temperature, self.codec.end_id,
                               keep_logp=keep_logp, finished=stop_test(self.codec, tasks))
        out = []
        for task, samples in zip(tasks, drawn):
            texts = [self.codec.text(row, m) for row, m in zip(samples.tokens, samples.mask)]
            out.append(ReplyGroup(task, samples.prompt, samples.tokens, samples.mask, samples.logp, texts,
                                  [reward(task, text, self.sandbox) for text in texts],
                                  [in_format(task, text) for text in texts]))
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
        """Groups -> the engine's batch: ids [B, T] (prompt then reply, right-padded), action_mask [B, T-1] (1 where
        token t + 1 is a reply token), sample_logp [B, T-1], rewards [B], n_turns [B] (one turn each)."""
        rows = [(g.prompt, tokens, mask, logp) for g in groups
                for tokens, mask, logp in zip(g.tokens, g.mask, g.chosen_logp())]
        T = max(len(p) + len(t) for p, t, _, _ in rows)
        ids = torch.full((len(rows), T), self.codec.pad_id, dtype=torch.long)
        action_mask, sample_logp = torch.zeros(len(rows), T - 1), torch.zeros(len(rows), T - 1)
        for b, (prompt, tokens, mask, logp) in enumerate(rows):
            P, L = len(prompt), len(tokens)
            ids[b, :P + L] = torch.cat([prompt, tokens])
            action_mask[b, P - 1:P - 1 + L] = mask
            sample_logp[b, P - 1:P - 1 + L] = logp * mask
        rewards = torch.tensor([r for g in groups for r in g.rewards], dtype=torch.float)
        return dict(ids=ids, action_mask=action_mask, sample_logp=sample_logp, rewards=rewards,
                    n_turns=torch.ones(len(rows), dtype=torch.long))

    def stats(self, groups, reference=None, temperature=1.0):
        """Means over the sampled replies: reward (= pass@1, the rewards being 0 or 1), the share in the asked format,
        reply length in tokens, the share of flat groups, and the sampling policy's entropy over the whole vocabulary
        at the reply positions.
        With a reference policy, also the KL to it at those positions (both at `temperature`, the sampler's): exact,
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
        if reference is not None:
            ref_logp = reply_logp(reference, groups, temperature)[on]  # [N, V]
            exact = (logp.exp() * (logp - ref_logp)).sum(-1)  # [N]
            tokens = torch.cat([g.tokens for g in groups])[on][:, None]  # [N, 1]
            log_ratio = (ref_logp.gather(-1, tokens) - logp.gather(-1, tokens))[:, 0]  # log pi_ref - log pi
            k3 = torch.expm1(log_ratio) - log_ratio
            record.update(kl_exact=exact.mean().item(), kl_k3=k3.mean().item())
        return record


def reply_logp(policy, groups, temperature=1.0):
    """The policy's log-distribution at every reply position of the groups' rows, without gradients -> [B, L, V]."""
    rows = [torch.cat([g.prompt, row]) for g in groups for row in g.tokens]
    starts = [len(g.prompt) - 1 for g in groups for _ in g.tokens]
    ids = torch.nn.utils.rnn.pad_sequence(rows, batch_first=True)  # [B, T], right-padded
    length = groups[0].tokens.shape[1]
    widths = torch.tensor(starts) + torch.cat([g.mask for g in groups]).sum(1).long()  # positions each row needs
    with fixed_threads(MODEL_THREADS), torch.no_grad():
        logits = policy(ids, widths)  # [B, T, V]
        picked = torch.stack([logits[b, s:s + length] for b, s in enumerate(starts)])  # [B, L, V]
        return torch.log_softmax(picked.float() / temperature, -1)
