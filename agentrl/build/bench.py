"""`python -m agentrl.build.bench`: speed of the substrate on this machine, in seconds and as ratios to a floor.

Prints seconds per default GRPO step (64 episodes sampled + the update, torch on one thread) and its two parts,
sampled episodes per second, seconds to build the RL base from an empty cache (the build always runs on its fixed
sft.BUILD_THREADS threads), and the process's peak memory; every time is a median over repetitions.

Seconds do not travel: two machines of the same kind differ 2.5x. So each time is also printed as a ratio to a floor
measured in the same process: the work's floating-point operations divided by this machine's single-thread float32
matrix-multiply rate (512 x 512 products), sampled right next to each repetition so that the floor follows the load
of a shared machine (the RL-base build runs on 2 threads; its floor still uses the 1-thread rate). The counting rule is
torch.utils.flop_counter's: 2*m*n*k for every matrix product (mm, addmm, bmm, forward and backward), and for
attention its two products over the whole T x T score matrix (causal masking not discounted; torch counts only the
CUDA attention kernels, so the CPU one is added below with torch's own formulas); element-wise work (softmax, layer
norm, GELU, Adam) is not counted. The floor is thus the time the matrix products alone would take at the speed of a
large product, which no step reaches (TinyAgent's matrices are 64 wide, and sampling is one token per call); the ratio
says how far above it a measurement is, and changes far less between machines than the seconds do.

The FLOPs are counted on a replay: the same seeded steps (and one build) run again under a counter, untimed.

`--pin-cost` instead measures what the CPU pin (agentrl/cpu.py) costs: a matmul-heavy workload and default GRPO
steps, each in fresh processes with and without the pin, alternated.
"""
import argparse
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

from agentrl.cpu import PINS, cpu_pin_status
from agentrl.substrate.grpo import RLConfig, compute_advantages, rl_update
from agentrl.substrate.gym import make_env, make_tasks
from agentrl.substrate.rollout import behavior_stats, collate, sample_step
from agentrl.substrate.sft import BUILD_THREADS, make_rl_base
from agentrl.substrate.tokenizer import build_tokenizer

MATMUL_SIZE = 512  # the floor's products: [512, 512] @ [512, 512] in float32

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


def grpo_steps(repetitions, count=False):
    """Default GRPO steps from the RL base, after one warm-up step; per step a dict of seconds (whole step, sampling,
    update), episodes sampled, tokens sampled, the matmul rate sampled just before the step, and, with count=True, the
    FLOPs of the sampling and of the update (the times are then not meaningful). The same seed gives the same steps,
    so a counted run replays a timed one."""
    tok = build_tokenizer(make_tasks('all'))
    train = make_tasks('train')
    model = make_rl_base(tok)
    cfg = RLConfig()
    torch.manual_seed(cfg.seed)
    generator = torch.Generator().manual_seed(cfg.seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    env_factory = lambda: make_env(cfg)  # noqa: E731
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
        batch = collate(kept, tok.pad_id)
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


def time_builds(repetitions):
    """Per repetition: (seconds to build the RL base in an empty temporary cache directory, the mean of the matmul
    rates sampled just before and just after)."""
    tok = build_tokenizer(make_tasks('all'))
    builds = []
    for _ in range(repetitions):
        with tempfile.TemporaryDirectory() as directory:
            rate = rate_sample()
            start = time.perf_counter()
            make_rl_base(tok, directory=directory)
            seconds = time.perf_counter() - start
            builds.append((seconds, (rate + rate_sample()) / 2))
    return builds


def build_flops():
    """FLOPs of one RL-base build from an empty cache (the build is deterministic, so one count serves all)."""
    tok = build_tokenizer(make_tasks('all'))
    with tempfile.TemporaryDirectory() as directory, flop_counter() as counter:
        make_rl_base(tok, directory=directory)
    return counter.get_total_flops()


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


def bench(steps, builds):
    """Measure everything and print the tables."""
    torch.set_num_threads(1)
    load_start = os.getloadavg()
    timed = grpo_steps(steps)
    timed_builds = time_builds(builds)
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports kilobytes; before the counting
    load_end = os.getloadavg()
    counted = grpo_steps(steps, count=True)  # untimed replays, for the FLOPs
    replayed = all((t['episodes'], t['tokens']) == (c['episodes'], c['tokens']) for t, c in zip(timed, counted))
    flops_build = build_flops()
    rates = [t['rate'] for t in timed] + [rate for _, rate in timed_builds]

    print(f'torch {torch.__version__}; {pin_line()}')
    print(f'load average (1 min) {load_start[0]:.2f} at the start, {load_end[0]:.2f} at the end of the timing; '
          f'{os.cpu_count()} CPUs')
    print(f'floor rate: float32 {MATMUL_SIZE}x{MATMUL_SIZE} matmul on 1 thread, sampled next to each repetition: '
          f'median {statistics.median(rates) / 1e9:.1f} GFLOP/s '
          f'(from {min(rates) / 1e9:.1f} to {max(rates) / 1e9:.1f})')
    print(f'GRPO steps on 1 thread, builds on {BUILD_THREADS}; medians of {steps} steps and {builds} builds; '
          f'FLOPs per step {statistics.median(c["sampling_flops"] + c["update_flops"] for c in counted) / 1e9:.2f} G '
          f'(median), per build {flops_build / 1e12:.2f} T')
    if not replayed:
        print('note: the counted replay sampled different episodes from the timed steps; floors are approximate')
    print()
    print('| measurement | median s | floor s | ratio | target |')
    print('|---|---|---|---|---|')
    print(ratio_row('default GRPO step (64 episodes sampled + update)', [t['seconds'] for t in timed],
                    [(c['sampling_flops'] + c['update_flops']) / t['rate'] for t, c in zip(timed, counted)],
                    '<= 0.6 s'))
    print(ratio_row('... its sampling', [t['sampling_seconds'] for t in timed],
                    [c['sampling_flops'] / t['rate'] for t, c in zip(timed, counted)]))
    print(ratio_row('... its update', [t['update_seconds'] for t in timed],
                    [c['update_flops'] / t['rate'] for t, c in zip(timed, counted)]))
    print(ratio_row(f'RL base build from an empty cache ({BUILD_THREADS} threads)', [s for s, _ in timed_builds],
                    [flops_build / rate for _, rate in timed_builds], '<= 60 s'))
    print()
    print(f'sampled episodes per second: {statistics.median(t["episodes"] / t["sampling_seconds"] for t in timed):.0f}'
          ' (median)')
    print(f'peak memory (max RSS): {peak_mb:.0f} MB')
    print('ratio = seconds / floor (median over repetitions); floor = the matrix-product FLOPs of the same work '
          '(counted on a seeded replay) / the 1-thread matmul rate sampled next to it')


def pin_cost_worker(steps):
    """In a child process: the capability in force, the 1-thread matmul rate and the median GRPO step, as JSON."""
    torch.set_num_threads(1)
    status = cpu_pin_status()
    rate = matmul_rate(1, repetitions=25)
    timed = grpo_steps(steps)
    print(json.dumps(dict(capability=status['capability'], rate=rate,
                          step=statistics.median(t['seconds'] for t in timed))))


def pin_cost(steps, rounds):
    """Run pin_cost_worker in fresh processes, pinned and unpinned alternately, and print the medians."""
    results = {'pinned': [], 'unpinned': []}
    for _ in range(rounds):
        for setting in results:
            env = {k: v for k, v in os.environ.items() if k not in PINS}
            if setting == 'pinned':
                env.update(PINS)
                env.pop('AGENTRL_CPU_PIN', None)
            else:
                env['AGENTRL_CPU_PIN'] = '0'
            command = [sys.executable, '-m', 'agentrl.build.bench', '--pin-cost-worker', '--steps', str(steps)]
            out = subprocess.run(command, env=env, check=True, capture_output=True, text=True).stdout
            results[setting].append(json.loads(out.strip().splitlines()[-1]))
    capability = {s: sorted({r['capability'] for r in rs}) for s, rs in results.items()}
    print(f'torch {torch.__version__}; {platform.machine()}; {rounds} processes per setting, alternated; '
          f'load average (1 min) {os.getloadavg()[0]:.2f} at the end')
    print(f'capability: pinned {capability["pinned"]}, unpinned {capability["unpinned"]}')
    print()
    print('| workload | pinned | unpinned | pinned / unpinned |')
    print('|---|---|---|---|')
    def cell(setting, key, scale, digits):
        values = [r[key] / scale for r in results[setting]]
        return f'{statistics.median(values):.{digits}f} ({min(values):.{digits}f}-{max(values):.{digits}f})'

    rate = {s: statistics.median(r['rate'] for r in rs) for s, rs in results.items()}
    step = {s: statistics.median(r['step'] for r in rs) for s, rs in results.items()}
    print(f'| float32 512x512 matmul, 1 thread (GFLOP/s, higher is faster) | {cell("pinned", "rate", 1e9, 1)} | '
          f'{cell("unpinned", "rate", 1e9, 1)} | {rate["pinned"] / rate["unpinned"]:.2f} |')
    print(f'| default GRPO step, 1 thread (s, median of {steps} per process) | {cell("pinned", "step", 1, 3)} | '
          f'{cell("unpinned", "step", 1, 3)} | {step["pinned"] / step["unpinned"]:.2f} |')
    print('medians over the processes (min-max in brackets); the last column divides the medians')


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--steps', type=int, default=9, help='timed GRPO steps (default 9)')
    parser.add_argument('--builds', type=int, default=5, help='timed RL-base builds (default 5)')
    parser.add_argument('--pin-cost', action='store_true', help='measure what the CPU pin costs instead')
    parser.add_argument('--rounds', type=int, default=3, help='--pin-cost: processes per setting (default 3)')
    parser.add_argument('--pin-cost-worker', action='store_true', help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.steps < 5 or args.builds < 5:
        parser.error('medians need at least 5 repetitions of each measurement')
    if args.pin_cost_worker:
        pin_cost_worker(args.steps)
    elif args.pin_cost:
        pin_cost(args.steps, args.rounds)
    else:
        bench(args.steps, args.builds)
    return 0


if __name__ == '__main__':
    sys.exit(main())
