"""The frameworks' options on TinyAgent (make framework-sweep): every setting notebook 12 judges, on seeds 0-4, trained
through the same executors as the other sweeps; what its claims read of each run is committed in
results/framework_sweep.json.

    python -m machinery.framework_sweep [--seeds 0 1 2 3 4] [--scheduler tcp://...] [--workers 2]
    python -m machinery.framework_sweep --check     the record against the runs in this machine's run cache

Without a scheduler address (--scheduler or $AGENTRL_DASK_SCHEDULER) it starts a Dask LocalCluster on this machine, as
the substrate sweep does. The runs are cached like every other run (agentrl.ch10.experiments), on the default (frozen)
substrate. `make` never runs this; notebook 12 renders from the committed record.
"""
import argparse
import datetime
import os
import platform
import sys
import time

from agentrl import executors, stopping
from agentrl.ch10 import across, experiments, framework_claims
from agentrl.fingerprint import code_fingerprint
from agentrl.paths import FRAMEWORK_SWEEP
from agentrl.substrate.config import DEFAULT, active
from machinery.substrate_sweep import cluster_executor, cpu_name, write_record

SEEDS = (0, 1, 2, 3, 4)


def sweep(seeds, executor, steps=40, arms_of=framework_claims.sweep_arms):
    """Every setting on `seeds`, trained through `executor` (loaded where cached) -> the record.
    arms_of(seed, steps): the settings of one seed (tests pass smaller ones)."""
    started = time.perf_counter()
    specs = framework_claims.sweep_specs(seeds, steps, arms_of)
    # the options first: the chapter's own settings among the specs are often trained meanwhile by notebook 09
    options = framework_claims.sweep_specs(seeds, steps, lambda seed, steps: [
        spec for spec in arms_of(seed, steps) if spec.name not in framework_claims.BASELINES])
    experiments.run_all(options, executor=executor)
    runs = experiments.run_all(specs, executor=executor)
    keys = {spec.name: experiments.run_path(spec).stem for spec in specs}
    return dict(code=code_fingerprint(), substrate=active().key(), is_default=active() == DEFAULT,
                seeds=list(seeds), steps=steps, seconds=time.perf_counter() - started,
                runs={str(seed): {name: dict(framework_claims.summary(run), run=keys[f'{name} | seed {seed}'])
                                  for name, run in across.runs_of_seed(runs, seed).items()}
                      for seed in seeds})


def check_record(record, arms_of=framework_claims.sweep_arms):
    """Each committed summary against the run of the same provenance in this machine's run cache -> the list of
    (seed, setting, problem); a run missing from the cache is a problem too."""
    problems = []
    for seed in record['seeds']:
        specs = {spec.name: spec for spec in arms_of(seed, record['steps'])}
        for setting, stored in record['runs'][str(seed)].items():
            spec = specs[setting]
            if experiments.run_path(spec).stem != stored['run']:
                problems.append((seed, setting, 'another provenance (code, base or kernels)'))
                continue
            run = experiments.load_run(spec)
            if run is None:
                problems.append((seed, setting, 'not in the run cache'))
            elif dict(framework_claims.summary(run), run=stored['run']) != stored:
                problems.append((seed, setting, 'the saved run differs from the record'))
    return problems


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--seeds', nargs='+', type=int, default=list(SEEDS))
    parser.add_argument('--scheduler', default=executors.scheduler_address() or '',
                        help=f'a Dask scheduler address (default: ${executors.SCHEDULER_VARIABLE}, else a '
                             'LocalCluster on this machine)')
    parser.add_argument('--workers', type=int, default=2, help='LocalCluster workers (0: train in this process)')
    parser.add_argument('--check', action='store_true', help='check the record against the run cache, train nothing')
    args = parser.parse_args(argv)
    if args.check:
        problems = check_record(framework_claims.load_record())
        for seed, setting, problem in problems:
            print(f'seed {seed}, {setting}: {problem}')
        print('the record matches the run cache' if not problems else f'{len(problems)} problems')
        return 1 if problems else 0
    if args.scheduler:
        try:
            executors.check_scheduler_address(args.scheduler)
        except ValueError as error:
            parser.error(str(error))
    try:
        with stopping.raise_on_signals(), cluster_executor(args.scheduler, args.workers) as (executor, where):
            record = sweep(args.seeds, executor)
    except stopping.Stopped as stop:
        print(f'STOPPED by {stop.name}: nothing written; the runs finished before it are in the run cache',
              file=sys.stderr, flush=True)
        return stop.exit_code
    record['session'] = dict(date=datetime.date.today().isoformat(), cpus=os.cpu_count(), machine=platform.machine(),
                             cpu=cpu_name(),
                             **where)
    write_record(record, FRAMEWORK_SWEEP)
    print(f'{sum(len(r) for r in record["runs"].values())} runs on seeds {", ".join(map(str, args.seeds))} in '
          f'{record["seconds"] / 60:.1f} min; written to {FRAMEWORK_SWEEP}')
    return 0

if __name__ == '__main__':
    status = main()
    if status > 128:  # stopped by a signal: end by it, so make and a calling shell stop too
        stopping.die_by(status - 128)
    sys.exit(status)
