"""GRPO on the real model: the engine's plug-ins, advantages and update (agentrl.substrate.grpo), fed by a rollout.

The step is train_rl's, read top to bottom: sample groups, let plug-ins shape the rewards, compute group advantages,
update, log. What differs is where the groups come from (agentrl.realrl.rollout.TaskRollout) and what each step logs
beside the engine's stats: the sampling policy's exact entropy, the KL to the base model, and a few replies.
"""
import copy

import torch

from agentrl.cpu import adam, fixed_threads
from agentrl.pretrained.loader import MODEL_THREADS
from agentrl.progress import progress
from agentrl.substrate.grpo import NonFiniteLossError, Plugin, compute_advantages, engine_plugins, rl_update, \
    sampler_config, skipped_update

REPLIES_LOGGED = 2  # replies kept in each step's record, from its first group


class ResetReference(Plugin):
    """After step `at_step - 1`, the KL term's reference becomes a frozen copy of the current policy."""

    def __init__(self, kl_term, at_step):
        self.kl_term, self.at_step, self.model = kl_term, at_step, None

    def begin(self, model, cfg):
        self.model = model

    def end_step(self, record):
        if record['step'] + 1 == self.at_step:
            self.kl_term.reference = copy.deepcopy(self.model).eval().requires_grad_(False)
            record['reference_reset'] = True


def train_real(policy, rollout, cfg, steps, plugins=(), reference=None, label='GRPO', on_step=None):
    """GRPO for `steps` steps on the rollout's tasks -> history (one dict per step).

    policy: an agentrl.realrl.policy.CausalLMPolicy with gradients on; reference: the frozen base policy the logs
    measure the KL to (None: no KL logged). on_step(step, record, policy, optimizer), when given, is called after
    each step (e.g. to save a checkpoint). Torch runs on MODEL_THREADS threads.
    """
    if not isinstance(steps, int) or isinstance(steps, bool) or steps < 0:
        raise ValueError(f'steps must be an int >= 0, got {steps!r}')
    plugins = engine_plugins(cfg, plugins)
    sampler = sampler_config(cfg)
    with fixed_threads(MODEL_THREADS):
        torch.manual_seed(cfg.seed)
        gen = torch.Generator().manual_seed(cfg.seed)  # prompt draws, sampling, minibatch order: one stream
        for plugin in plugins:
            plugin.begin(policy, cfg)
        optimizer = adam(policy.parameters(), lr=cfg.lr)
        acts_alone = any(p.acts_alone for p in plugins)
        history = []
        for step in progress(range(steps), desc=label):
            kept, sampled = rollout.sample_step(policy, sampler, gen)
            record = dict(step=step, **rollout.stats(sampled, reference, sampler.temperature))
            record['signal'] = float(bool(kept))  # 0: no group had a reward spread
            record['replies'] = sampled[0].texts[:REPLIES_LOGGED]
            batch = rollout.collate(kept or sampled)
            for plugin in plugins:
                plugin.shape_rewards(batch, record)
            advantages = compute_advantages(batch, cfg)
            for plugin in plugins:
                plugin.before_update(policy, batch, advantages, record)
            try:
                if kept or acts_alone:
                    record.update(rl_update(policy, optimizer, batch, advantages, cfg, generator=gen, plugins=plugins))
                else:  # nothing to learn from: no step (an Adam step on a zero gradient would still move the weights)
                    record.update(skipped_update(policy, batch, cfg))
            except NonFiniteLossError as error:
                raise NonFiniteLossError(f'{label}, step {step}: {error}') from error
            for plugin in plugins:
                plugin.after_update(policy, record)
            for plugin in plugins:
                plugin.end_step(record)
            history.append(record)
            if on_step is not None:
                on_step(step, record, policy, optimizer)
    return history
