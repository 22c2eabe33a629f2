"""`python -m machinery.bench`: speed of the substrate on this machine, in seconds and as ratios to a floor.

Prints seconds per default GRPO step (64 episodes sampled + the update, torch on one thread) and its two parts,
sampled episodes per second, seconds to build the RL base from an empty cache (the build always runs on its fixed
sft.BUILD_THREADS threads; one build by default, --builds N for a median of N), and the process's peak memory; every
time is a median over repetitions. Then the cost curves: how a step's ratio to its floor moves with the group size,
the tasks per step and the episodes' length, three sizes each, one changed at a time, so that a reader can plan a
bigger run.

Seconds do not travel: two machines of the same kind differ 2.5x. So each time is also printed as a ratio to a floor
measured in the same process: the work's floating-point operations divided by this machine's single-thread float32
matrix-multiply rate (512 x 512 products), sampled right next to each repetition so that the floor follows the load
of a shared machine (the RL-base build runs on 2 threads; its floor still uses the 1-thread rate). The counting rule is
torch.utils.flop_counter's: 2*m*n*k for every matrix product (mm, addmm, bmm, forward and backward), and for
attention its two products over the whole T x T score matrix (causal masking not discounted; torch counts only the
CUDA attention kernels, so the CPU one is added below with torch's own formulas); element-wise work (softmax, layer
norm, GELU, Adam) is not counted. The floor is thus the time the matrix products alone would take at the speed of a
large product, which no step reaches (TinyAgent's matrices are 64 wide, and the policy's tokens are sampled one per
call); the ratio says how far above it a measurement is, and changes far less between machines than the seconds do.

The FLOPs are counted on a replay: the same seeded steps run again under a counter, untimed. The build's count
takes one more whole build, so it is kept in the cache folder, keyed like the RL base, and redone only when the
build changes.

Last, the pretrained model's forward, backward and sampling in tokens per second, each beside a floor of the same
linear-layer products timed in the same run (machinery/bench_model.py); `--model-only` measures just that part,
`--no-model` leaves it out.

`--pin-cost` instead measures what the CPU pin (agentrl/cpu.py) costs: a matmul-heavy workload and default GRPO
steps, each in fresh processes with and without the pin, alternated.
"""
import argparse
import copy
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time

import torch
from torch.utils.flop_counter import FlopCounterMode, sdpa_backward_flop_count, sdpa_flop_count

from agentrl.cpu import ARITHMETIC_VAR, ARITHMETICS, PINS, adam, cpu_pin_status
from machinery.arithmetic import cpu_name
from agentrl.paths import cache_dir
from agentrl.substrate.config import active
from agentrl.substrate.grpo import RLConfig, compute_advantages, rl_update
from agentrl.substrate.gym import Env, make_env, make_tasks
from agentrl.substrate.rollout import behavior_stats, collate, sample_step
from agentrl.substrate.sft import BUILD_THREADS, cache_key, make_rl_base, model_config, rl_base_description
from agentrl.substrate.tokenizer import build_tokenizer
from agentrl.verified_cache import load_verified, save_verified

MATMUL_SIZE = 512  # the floor's products: [512, 512] @ [512, 512] in float32
FLOP_COUNTING_RULE = 'torch.utils.flop_counter, with CPU attention counted by its formulas'

aten = torch.ops.aten
CPU_ATTENTION_FLOPS = {  # the CPU attention kernels, which torch.utils.flop_counter does not know, with its formulas
    aten._scaled_dot_product_flash_attention_for_cpu:
        lambda query, key, value, *args, out_shape=None, **kwargs: sdpa_flop_count(query, key, value),
    aten._scaled_dot_product_flash_attention_for_cpu_backward:
        lambda grad_out, query, key, value, *args, out_shape=None, **kwargs:
            sdpa_backward_flop_count(grad_out, query, key, value),
}


def flop_counter():
    """A torch.utils.flop_counter.FlopCounterMode that also counts CPU attention; no printout."""
    return FlopCounterMode(display=False, custom_mapping=CPU_ATTENTION_FLOPS)


def matmul_rate(threads, repetitions=15, inner=10):
    """This machine's float32 matrix-multiply rate in FLOP/s on `threads` threads: 2*512**3 FLOPs per product over
    the median of `repetitions` timings of `inner` products each (after a warm-up)."""
    saved = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        generator = torch.Generator().manual_seed(0)
        a, b = (torch.randn(MATMUL_SIZE, MATMUL_SIZE, generator=generator) for _ in range(2))
        out = torch.empty(MATMUL_SIZE, MATMUL_SIZE)
        for _ in range(inner):
            torch.mm(a, b, out=out)
        seconds = []
        for _ in range(repetitions):
            start = time.perf_counter()
            for _ in range(inner):
                torch.mm(a, b, out=out)
            seconds.append((time.perf_counter() - start) / inner)
    finally:
        torch.set_num_threads(saved)
    return 2 * MATMUL_SIZE ** 3 / statistics.median(seconds)


def rate_sample():
    """A quick sample of the 1-thread matmul rate (FLOP/s), taken next to a timed repetition."""
    return matmul_rate(1, repetitions=5, inner=2)


class FixedLengthEnv(Env):
    """An environment whose episodes have a chosen length, for the sequence-length cost curve: a prompt of
    `prompt_words` words, then `turns` calls, each answered with `observation_words` words; the reward is the
    parity of the policy's words (so groups carry a spread). Every word comes from the task's own prompt."""

    def __init__(self, prompt_words, observation_words, turns):
        super().__init__(max_turns=turns)
        self.prompt_words, self.observation_words = prompt_words, observation_words

    def reset(self, task, offset=0):
        words = super().reset(task, offset)
        self.filler = [w for w in words if not w.startswith('<')] or words
        return [words[0]] + self.words(self.prompt_words - 1)

    def step(self, call):
        self.info['n_turns'] += 1
        self.info['actions'].append(' '.join(call))
        self.info['reward'] = float(sum(len(w) for w in self.info['actions']) % 2)
        self.done = self.info['n_turns'] >= self.max_turns
        return ['<obs>'] + self.words(self.observation_words - 2) + ['</obs>'], self.done

    def words(self, count):
        return [self.filler[i % len(self.filler)] for i in range(count)]


# Prompt words, observation words, turns: episodes of about 64, 128 and 240 tokens (calls of up to 6 words).
SEQUENCE_LENGTHS = {64: (28, 6, 3), 128: (56, 18, 3), 240: (102, 40, 3)}
COST_CURVES = [('group_size', [4, 8, 16]), ('tasks_per_step', [4, 8, 16]), ('sequence_length', list(SEQUENCE_LENGTHS))]


def grpo_steps(repetitions, model, tok, count=False, sequence_length=None, **overrides):
    """GRPO steps from `model` (a copy is trained) with RLConfig(**overrides), after one warm-up step; per step a dict
    of seconds (whole step, sampling, update), episodes sampled, tokens sampled, the matmul rate sampled just before
    the step, and, with count=True, the FLOPs of the sampling and of the update (the times are then not meaningful).
    The same seed gives the same steps, so a counted run replays a timed one. sequence_length: play FixedLengthEnv
    episodes of about that many tokens (a key of SEQUENCE_LENGTHS) instead of the gym's."""
    train = make_tasks('train')
    model = copy.deepcopy(model)
    cfg = RLConfig(**overrides)
    torch.manual_seed(cfg.seed)
    generator = torch.Generator().manual_seed(cfg.seed)
    optimizer = adam(model.parameters(), lr=cfg.lr)
    if sequence_length is None:
        env_factory = lambda: make_env(cfg)  # noqa: E731
    else:
        env_factory = lambda: FixedLengthEnv(*SEQUENCE_LENGTHS[sequence_length])  # noqa: E731
    steps = []
    for repetition in range(repetitions + 1):  # the first step warms up
        counters = (flop_counter(), flop_counter()) if count else None
        rate = None if count else rate_sample()
        start = time.perf_counter()
        if count:
            counters[0].__enter__()
        kept, sampled = sample_step(model, env_factory, train, tok, cfg, generator)
        if count:
            counters[0].__exit__(None, None, None)
        sampled_at = time.perf_counter()
        behavior_stats(sampled)
        batch = collate(kept or sampled, tok.pad_id)
        if count:
            counters[1].__enter__()
        rl_update(model, optimizer, batch, compute_advantages(batch, cfg), cfg, None, generator)
        if count:
            counters[1].__exit__(None, None, None)
        end = time.perf_counter()
        if repetition:
            step = dict(seconds=end - start, sampling_seconds=sampled_at - start, update_seconds=end - sampled_at,
                        episodes=len(sampled), tokens=sum(len(t.ids) for t in sampled), rate=rate)
            if count:
                step.update(sampling_flops=counters[0].get_total_flops(), update_flops=counters[1].get_total_flops())
            steps.append(step)
    return steps


def time_builds(repetitions, tok):
    """(per repetition: seconds to build the RL base in an empty temporary cache directory and the mean of the
    matmul rates sampled just before and just after it, the model the last build made)."""
    builds = []
    for _ in range(repetitions):
        with tempfile.TemporaryDirectory() as directory:
            rate = rate_sample()
            start = time.perf_counter()
            model = make_rl_base(tok, directory=directory)
            seconds = time.perf_counter() - start
            builds.append((seconds, (rate + rate_sample()) / 2))
    return builds, model


def build_flops(tok):
    """FLOPs of one RL-base build from an empty cache. The build is deterministic, so the count is kept in the cache
    folder, keyed by everything that determines the build (as the RL base itself is), and counted again only when
    that changes: counting means one more whole build."""
    tasks = make_tasks('train')
    model_cfg, sft_cfg = model_config(len(tok)), active().sft
    description = dict(rl_base=rl_base_description(tok, tasks, model_cfg, sft_cfg), counter=FLOP_COUNTING_RULE)
    path = cache_dir() / f'bench-build-flops-{cache_key(tok, tasks, model_cfg, sft_cfg)[:16]}.pt'
    saved = load_verified(path, description, 'counted RL-base FLOPs')
    if saved is not None:
        return saved['flops']
    with tempfile.TemporaryDirectory() as directory, flop_counter() as counter:
        make_rl_base(tok, directory=directory)
    flops = counter.get_total_flops()
    save_verified(path, dict(flops=flops), description)
    return flops


def ratio_row(name, seconds, floors, target=''):
    """A table row: median seconds, median floor seconds, median of the per-repetition ratios seconds / floor."""
    ratios = [s / f for s, f in zip(seconds, floors)]
    return (f'| {name} | {statistics.median(seconds):.3f} | {statistics.median(floors):.4f} | '
            f'{statistics.median(ratios):.1f} | {target} |')


def pin_line():
    """One line saying which CPU kernels are in force."""
    status = cpu_pin_status()
    pins = ' '.join(f'{name}={status[name]}' for name in PINS if status[name] is not None) or 'no pin variables set'
    return f'{status["machine"]}, torch CPU capability {status["capability"]} ({pins})'


def floors(timed, counted, key):
    """Per repetition: the FLOPs of `key` ('sampling', 'update' or 'both') in the counted replay / the rate timed."""
    def flops(c):
        return c['sampling_flops'] + c['update_flops'] if key == 'both' else c[f'{key}_flops']
    return [flops(c) / t['rate'] for t, c in zip(timed, counted)]


def cost_curves(model, tok, steps):
    """For each axis of COST_CURVES, three sizes: (axis, size, episodes, mean tokens per episode, step ratio,
    sampling ratio, update ratio, sampling's share of the step's seconds), the other settings at their defaults."""
    rows = []
    for axis, sizes in COST_CURVES:
        for size in sizes:
            settings = {axis: size}
            timed = grpo_steps(steps, model, tok, **settings)
            counted = grpo_steps(steps, model, tok, count=True, **settings)
            def ratio(key, seconds):
                return statistics.median(s / f for s, f in zip(seconds, floors(timed, counted, key)))
            rows.append(dict(axis=axis, size=size, episodes=statistics.median(t['episodes'] for t in timed),
                             tokens=statistics.median(t['tokens'] / t['episodes'] for t in timed),
                             step=ratio('both', [t['seconds'] for t in timed]),
                             sampling=ratio('sampling', [t['sampling_seconds'] for t in timed]),
                             update=ratio('update', [t['update_seconds'] for t in timed]),
                             sampling_share=statistics.median(t['sampling_seconds'] / t['seconds'] for t in timed)))
    return rows


def bench(steps, builds, curves=True, curve_steps=5):
    """Measure everything and print the tables."""
    torch.set_num_threads(1)
    tok = build_tokenizer(make_tasks('all'))
    load_start = os.getloadavg()
    timed_builds, model = time_builds(builds, tok)
    timed = grpo_steps(steps, model, tok)
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports kilobytes; before the counting
    load_end = os.getloadavg()
    counted = grpo_steps(steps, model, tok, count=True)  # untimed replays, for the FLOPs
    replayed = all((t['episodes'], t['tokens']) == (c['episodes'], c['tokens']) for t, c in zip(timed, counted))
    flops_build = build_flops(tok)
    rates = [t['rate'] for t in timed] + [rate for _, rate in timed_builds]

    print(f'torch {torch.__version__}; {pin_line()}')
    print(f'load average (1 min) {load_start[0]:.2f} at the start, {load_end[0]:.2f} at the end of the timing; '
          f'{os.cpu_count()} CPUs')
    print(f'floor rate: float32 {MATMUL_SIZE}x{MATMUL_SIZE} matmul on 1 thread, sampled next to each repetition: '
          f'median {statistics.median(rates) / 1e9:.1f} GFLOP/s '
          f'(from {min(rates) / 1e9:.1f} to {max(rates) / 1e9:.1f})')
    print(f'GRPO steps on 1 thread, builds on {BUILD_THREADS}; medians of {steps} steps and {builds} '
          f'build{"s" if builds > 1 else ""}; FLOPs per step '
          f'{statistics.median(c["sampling_flops"] + c["update_flops"] for c in counted) / 1e9:.2f} G '
          f'(median), per build {flops_build / 1e12:.2f} T')
    if not replayed:
        print('note: the counted replay sampled different episodes from the timed steps; floors are approximate')
    print()
    print('| measurement | median s | floor s | ratio | target |')
    print('|---|---|---|---|---|')
    print(ratio_row('default GRPO step (64 episodes sampled + update)', [t['seconds'] for t in timed],
                    floors(timed, counted, 'both'), '<= 2 x floor'))
    print(ratio_row('... its sampling', [t['sampling_seconds'] for t in timed], floors(timed, counted, 'sampling'),
                    '<= 3 x floor'))
    print(ratio_row('... its update', [t['update_seconds'] for t in timed], floors(timed, counted, 'update')))
    print(ratio_row(f'RL base build from an empty cache ({BUILD_THREADS} threads)', [s for s, _ in timed_builds],
                    [flops_build / rate for _, rate in timed_builds]))
    print()
    print(f'sampled episodes per second: {statistics.median(t["episodes"] / t["sampling_seconds"] for t in timed):.0f}'
          ' (median)')
    print(f'peak memory (max RSS): {peak_mb:.0f} MB')
    print('ratio = seconds / floor (median over repetitions); floor = the matrix-product FLOPs of the same work '
          '(counted on a seeded replay) / the 1-thread matmul rate sampled next to it')
    if curves:
        print()
        print(f'cost curves: one setting changed at a time from the default step, medians of {curve_steps} steps; '
              'sequence_length plays episodes of a fixed length (FixedLengthEnv) instead of the gym')
        print()
        print('| axis | size | episodes | tokens per episode | step ratio | sampling ratio | update ratio '
              '| sampling share of the step |')
        print('|---|---|---|---|---|---|---|---|')
        for row in cost_curves(model, tok, curve_steps):
            print(f'| {row["axis"]} | {row["size"]} | {row["episodes"]:.0f} | {row["tokens"]:.0f} | {row["step"]:.1f} '
                  f'| {row["sampling"]:.1f} | {row["update"]:.1f} | {100 * row["sampling_share"]:.0f}% |')


def pin_cost_worker(steps):
    """In a child process: the capability in force, the 1-thread matmul rate and the median GRPO step, as JSON."""
    torch.set_num_threads(1)
    status = cpu_pin_status()
    rate = matmul_rate(1, repetitions=25)
    timed = grpo_steps(steps, make_rl_base(build_tokenizer(make_tasks('all'))), build_tokenizer(make_tasks('all')))
    print(json.dumps(dict(capability=status['capability'], rate=rate,
                          step=statistics.median(t['seconds'] for t in timed))))


def pin_cost(steps, rounds):
    """Run pin_cost_worker in fresh processes under each arithmetic and unpinned, alternately; print the medians and
    each setting's ratio to the unpinned one (each setting builds its own RL base once, outside the timing)."""
    settings = {name: pins for name, pins in ARITHMETICS.items()}
    settings['unpinned'] = None
    results = {name: [] for name in settings}
    for _ in range(rounds):
        for setting, variables in settings.items():
            env = {k: v for k, v in os.environ.items() if k not in PINS and k not in (ARITHMETIC_VAR, 'AGENTRL_CPU_PIN')}
            if variables is None:
                env['AGENTRL_CPU_PIN'] = '0'
            else:
                env.update(variables)
                env[ARITHMETIC_VAR] = setting
            command = [sys.executable, '-m', 'machinery.bench', '--pin-cost-worker', '--steps', str(steps)]
            out = subprocess.run(command, env=env, check=True, capture_output=True, text=True).stdout
            results[setting].append(json.loads(out.strip().splitlines()[-1]))
    print(f'torch {torch.__version__}; {platform.machine()}; {cpu_name()}; {rounds} processes per setting, '
          f'alternated; load average (1 min) {os.getloadavg()[0]:.2f} at the end')
    print('capability: ' + ', '.join(f'{s} {sorted({r["capability"] for r in rs})}' for s, rs in results.items()))
    print()
    print('| workload | ' + ' | '.join(results) + ' | ' + ' | '.join(f'{s} / unpinned' for s in ARITHMETICS) + ' |')
    print('|---|' + '---|' * (len(results) + len(ARITHMETICS)))

    def row(label, key, scale, digits):
        cells, medians = [], {}
        for setting, found in results.items():
            values = [r[key] / scale for r in found]
            medians[setting] = statistics.median(values)
            cells.append(f'{medians[setting]:.{digits}f} ({min(values):.{digits}f}-{max(values):.{digits}f})')
        ratios = [f'{medians[s] / medians["unpinned"]:.2f}' for s in ARITHMETICS]
        print(f'| {label} | ' + ' | '.join(cells + ratios) + ' |')

    row('float32 512x512 matmul, 1 thread (GFLOP/s, higher is faster)', 'rate', 1e9, 1)
    row(f'default GRPO step, 1 thread (s, median of {steps} per process)', 'step', 1, 3)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--steps', type=int, default=9, help='timed GRPO steps (default 9)')
    parser.add_argument('--builds', type=int, default=1, help='timed RL-base builds (default 1; 5 or more for a median)')
    parser.add_argument('--no-curves', action='store_true', help='leave out the cost curves')
    parser.add_argument('--curve-steps', type=int, default=5, help='timed steps per point of the cost curves (default 5)')
    parser.add_argument('--no-model', action='store_true', help='leave out the pretrained model')
    parser.add_argument('--model-only', action='store_true', help='measure only the pretrained model')
    parser.add_argument('--model-repetitions', type=int, default=5,
                        help='timed repetitions of each model measurement (default 5)')
    parser.add_argument('--pin-cost', action='store_true', help='measure what the CPU pin costs instead')
    parser.add_argument('--rounds', type=int, default=3, help='--pin-cost: processes per setting (default 3)')
    parser.add_argument('--pin-cost-worker', action='store_true', help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.steps < 5 or args.curve_steps < 5:
        parser.error('medians need at least 5 timed steps (--steps, --curve-steps)')
    if args.builds < 1:
        parser.error('--builds must be at least 1')
    if args.model_repetitions < 3:
        parser.error('--model-repetitions must be at least 3, for a median')
    if args.model_only and args.no_model:
        parser.error('--model-only and --no-model exclude each other')
    if args.pin_cost_worker:
        pin_cost_worker(args.steps)
    elif args.pin_cost:
        pin_cost(args.steps, args.rounds)
    elif args.model_only:
        from machinery.bench_model import model_bench

        model_bench(args.model_repetitions)
    else:
        bench(args.steps, args.builds, curves=not args.no_curves, curve_steps=args.curve_steps)
        if not args.no_model:
            from machinery.bench_model import model_bench

            print()
            model_bench(args.model_repetitions)
    return 0


if __name__ == '__main__':
    sys.exit(main())
