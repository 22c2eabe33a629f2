"""Where a real-model GRPO step's time goes: `python -m machinery.real_profile [--settings none 'KL k3 0.3'] [--steps 3]`.

Runs a few steps of sweep settings (agentrl.realrl.claims.SETTINGS, seed 100, which no sweep uses) on SmolLM2-135M-Instruct with wall-clock timers around each part of the step:
sampling (the replies and their rewards), logging (the reference's forward for the exact KL), the update's no-grad
forwards (old log-probs; the reference's, for a KL term), its forward passes with gradients, backward passes and
Adam steps. Prints each part's median seconds per step, with the CPU's name; meaningful only on an idle machine.
"""
import argparse
import collections
import statistics
import sys
import time
from unittest import mock

import torch

from agentrl.pretrained.loader import load_smollm2
from agentrl.realrl import rollout as rollout_module
from agentrl.realrl.policy import CausalLMPolicy
from agentrl.realrl.claims import SETTINGS
from agentrl.realrl.runs import SWEEP_LEVEL, setting_spec, train_and_evaluate
from machinery.substrate_sweep import cpu_name


def timed(times, part, function):
    def wrapper(*args, **kwargs):
        start = time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            times[part] += time.perf_counter() - start
    return wrapper


def profile(setting, level, steps, seed=100):
    """{part: [seconds of each step]} for `steps` steps of the setting (evaluation not included)."""
    pretrained = load_smollm2()
    per_step, times = [], collections.Counter()
    forward = CausalLMPolicy.forward

    logging = timed(times, 'logging: exact entropy and KL', rollout_module.TaskRollout.stats)

    def forward_timed(self, ids, widths=None):
        if forward_timed.logging:  # the reference's forward for the logged KL: counted under logging only
            return forward(self, ids, widths)
        part = 'update: forward with gradients' if torch.is_grad_enabled() else 'update: no-grad forwards'
        return timed(times, part, forward)(self, ids, widths)
    forward_timed.logging = False

    def stats_timed(self, groups):
        forward_timed.logging = True
        try:
            return logging(self, groups)
        finally:
            forward_timed.logging = False

    def on_step(step, record, policy, optimizer):
        per_step.append(dict(times, step=time.perf_counter() - on_step.start))
        times.clear()
        on_step.start = time.perf_counter()

    spec = setting_spec(setting, seed, steps, level)
    patches = [mock.patch.object(CausalLMPolicy, 'forward', forward_timed),
               mock.patch.object(rollout_module.TaskRollout, 'sample_step',
                                 timed(times, 'sampling and rewards', rollout_module.TaskRollout.sample_step)),
               mock.patch.object(rollout_module.TaskRollout, 'stats', stats_timed),
               mock.patch.object(torch.Tensor, 'backward', timed(times, 'update: backward', torch.Tensor.backward)),
               mock.patch.object(torch.optim.Adam, 'step', timed(times, 'update: Adam steps', torch.optim.Adam.step))]
    for patch in patches:
        patch.start()
    try:
        on_step.start = time.perf_counter()
        with mock.patch('agentrl.realrl.runs.evaluate', lambda *a, **k: {}):
            train_and_evaluate(spec, pretrained, watch=on_step)
    finally:
        for patch in patches:
            patch.stop()
    return per_step


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--level', default=SWEEP_LEVEL)
    parser.add_argument('--steps', type=int, default=3)
    parser.add_argument('--settings', nargs='+', default=['none'], choices=list(SETTINGS))
    args = parser.parse_args(argv)
    print(f'CPU: {cpu_name()}; torch threads per run: 2; level {args.level}; {args.steps} steps')
    for setting in args.settings:
        per_step = profile(setting, args.level, args.steps)
        parts = sorted({p for s in per_step for p in s} - {'step'}) + ['step']
        print(f'\n{setting}: median seconds per step over {len(per_step)} steps')
        for part in parts:
            print(f'  {part:34s} {statistics.median(s.get(part, 0.0) for s in per_step):7.2f}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
