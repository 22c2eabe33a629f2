"""GRPO on the real model: TinyAgent's loop, plug-ins, advantages and update (agentrl.substrate.grpo.run_grpo).

What differs is where the groups come from (agentrl.realrl.rollout.TaskRollout) and what each step logs beside the
engine's stats: the sampling policy's exact entropy, the KL to the base model, and a few replies.
"""
import copy

from agentrl.pretrained.loader import MODEL_THREADS
from agentrl.substrate.grpo import Plugin, run_grpo


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


def train_real(policy, rollout, cfg, steps, plugins=(), label='GRPO', on_step=None):
    """GRPO for `steps` steps on the rollout's tasks -> history (one dict per step): the engine's loop
    (agentrl.substrate.grpo.run_grpo) with a TaskRollout, torch on MODEL_THREADS threads.

    policy: an agentrl.realrl.policy.CausalLMPolicy with gradients on. on_step(step, record, policy, optimizer), when
    given, is called after each step (e.g. to save a checkpoint).
    """
    return run_grpo(policy, rollout, cfg, steps, plugins, label, threads=MODEL_THREADS, on_step=on_step)
