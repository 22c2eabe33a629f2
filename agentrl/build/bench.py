"""`python -m agentrl.build.bench`: speed of the substrate on this machine (medians of repetitions).

Prints seconds per default GRPO step (64 episodes sampled + the update, torch on one thread), sampled
episodes per second, seconds to build the RL base from an empty cache (the build always runs on its
fixed sft.BUILD_THREADS threads), and the process's peak memory.
"""
import argparse
import resource
import statistics
import sys
import tempfile
import time

import torch

from agentrl.substrate.grpo import RLConfig, compute_advantages, rl_update
from agentrl.substrate.gym import make_env, make_tasks
from agentrl.substrate.rollout import behavior_stats, collate, sample_step
from agentrl.substrate.sft import make_rl_base
from agentrl.substrate.tokenizer import build_tokenizer
from agentrl.substrate.sft import BUILD_THREADS


def time_grpo_steps(repetitions):
    """Per default GRPO step from the RL base: (seconds for the whole step, seconds for its sampling)."""
    tok = build_tokenizer(make_tasks('all'))
    train = make_tasks('train')
    model = make_rl_base(tok)
    cfg = RLConfig()
    generator = torch.Generator().manual_seed(cfg.seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    env_factory = lambda: make_env(cfg)  # noqa: E731
    steps, sampling = [], []
    for repetition in range(repetitions + 1):  # the first step warms up
        start = time.perf_counter()
        kept, sampled = sample_step(model, env_factory, train, tok, cfg, generator)
        sampled_at = time.perf_counter()
        behavior_stats(sampled)
        batch = collate(kept, tok.pad_id)
        rl_update(model, optimizer, batch, compute_advantages(batch, cfg), cfg, None, generator)
        if repetition:
            steps.append(time.perf_counter() - start)
            sampling.append((sampled_at - start, len(sampled)))
    return steps, sampling


def time_builds(repetitions):
    """Seconds to build the RL base in an empty temporary cache directory, per repetition."""
    tok = build_tokenizer(make_tasks('all'))
    seconds = []
    for _ in range(repetitions):
        with tempfile.TemporaryDirectory() as directory:
            start = time.perf_counter()
            make_rl_base(tok, directory=directory)
            seconds.append(time.perf_counter() - start)
    return seconds


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--steps', type=int, default=9, help='timed GRPO steps (default 9)')
    parser.add_argument('--builds', type=int, default=5, help='timed RL-base builds (default 5)')
    args = parser.parse_args(argv)
    if args.steps < 5 or args.builds < 5:
        parser.error('medians need at least 5 repetitions of each measurement')
    torch.set_num_threads(1)
    steps, sampling = time_grpo_steps(args.steps)
    builds = time_builds(args.builds)
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports kilobytes
    print(f'torch {torch.__version__}; GRPO steps on {torch.get_num_threads()} thread, builds on {BUILD_THREADS}; '
          f'medians of {args.steps} steps and {args.builds} builds')
    print('| measurement | median | target |')
    print('|---|---|---|')
    print(f'| seconds per default GRPO step (64 episodes sampled + update) | {statistics.median(steps):.3f} | <= 0.6 |')
    print(f'| sampled episodes per second | {statistics.median(n / s for s, n in sampling):.0f} | |')
    print(f'| seconds to build the RL base from an empty cache | {statistics.median(builds):.1f} | <= 60 |')
    print(f'| peak memory (max RSS, MB) | {peak_mb:.0f} | |')
    return 0


if __name__ == '__main__':
    sys.exit(main())
