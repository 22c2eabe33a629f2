"""The chapter's claims on several substrates (make substrate-sweep): every run the claims read, on seeds 0-4, on each
substrate, trained on a Dask cluster; what the claims read of each run is committed in results/substrate_sweep.json.

    python -m machinery.substrate_sweep [--substrates t45 t74 ...] [--seeds 0 1 2 3 4] [--scheduler tcp://...]
    python -m machinery.substrate_sweep --check     the record against the runs in this machine's run cache

The substrates and where their configurations come from are agentrl/calibration/substrates.py.

Without a scheduler address (--scheduler or $AGENTRL_DASK_SCHEDULER) the sweep starts a Dask LocalCluster on this
machine: 2 worker processes of 1 thread each, on 127.0.0.1, without a dashboard. The runs are cached like every other
run (agentrl.ch10.experiments); a substrate swept again replaces its entry in the record. The sweep runs in parts
(one substrate each, `--substrates`), each written as soon as it ends: a part made by this tree's training code
retires every part made by older code, so the parts that stand always share one fingerprint.
`make` never runs this; notebook 11 renders from the committed record.
"""
import argparse
import contextlib
import datetime
import json
import logging
import os
import platform
import sys
import time
from pathlib import Path

from agentrl import executors, stopping
from agentrl.atomic import atomic_output
from agentrl.calibration.substrates import BY_NAME, available, load_record, record_path, source, \
    substrate_config
from agentrl.ch10 import across, experiments
from agentrl.fingerprint import code_fingerprint, made_by
from agentrl.paths import REPO
from agentrl.substrate.config import DEFAULT, SubstrateConfig, use

SEEDS = (0, 1, 2, 3, 4)


def cpu_name():
    """The CPU's model name as /proc/cpuinfo gives it ('' where it cannot be read): timings travel with it."""
    with contextlib.suppress(OSError):
        for line in Path('/proc/cpuinfo').read_text().splitlines():
            if line.startswith('model name'):
                return line.split(':', 1)[1].strip()
    return ''


def write_record(record, path=None):
    path = Path(path or record_path())
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_output(path, suffix='.json') as tmp:
        tmp.write_text(json.dumps(record, sort_keys=True, indent=1, allow_nan=False) + '\n')


def keep_current(record, code):
    """The record with only the substrates (and sessions) made by the training code `code`: the parts that stand
    must all come from one fingerprint, so a part swept by this tree retires every part made by older code ->
    (record, names dropped)."""
    dropped = sorted(name for name, entry in record['substrates'].items() if not made_by(entry, code))
    substrates = {name: entry for name, entry in record['substrates'].items() if made_by(entry, code)}
    codes = {entry['code'] for entry in substrates.values()} | {code}
    kept = dict(record, substrates=substrates, sessions=[s for s in record['sessions'] if s.get('code') in codes])
    return kept, dropped


def stale_parts(record, code):
    """[(substrate, its code)] of every part of the record that does not stand for the training code `code` (made by
    other code, and not certified bit-identical under it)."""
    return [(name, entry['code']) for name, entry in record['substrates'].items() if not made_by(entry, code)]


def build_base(description):
    """A worker's job: build (or load) the RL base of a substrate into this machine's cache -> its cache key."""
    config = SubstrateConfig.from_description(description)
    with use(config):
        experiments.substrate()  # tokenizer, tasks and RL base, built once and saved to the cache
    return config.key()


def sweep_substrate(name, seeds, executor, repo=REPO, specs_of=across.seed_specs):
    """Every claim run of one substrate on `seeds`, trained through `executor` (loaded where cached) -> its entry.
    specs_of(seeds): the runs, named '<claim name> | seed <s>' (tests pass smaller ones)."""
    config, trial = substrate_config(name, repo)
    started = time.perf_counter()
    with use(config):
        specs = specs_of(seeds)
        runs = experiments.run_all(specs, executor=executor)
        keys = {spec.name: experiments.run_path(spec).stem for spec in specs}
    return dict(name=name, study=source(name).study, trial=trial, label=source(name).label,
                config=config.describe(), config_key=config.key(), is_default=config == DEFAULT,
                code=code_fingerprint(), seeds=list(seeds), seconds=time.perf_counter() - started,
                runs={str(seed): {claim_name: dict(across.run_summary(run), run=keys[f'{claim_name} | seed {seed}'])
                                  for claim_name, run in across.runs_of_seed(runs, seed).items()}
                      for seed in seeds})


@contextlib.contextmanager
def cluster_executor(scheduler, workers=2):
    """An executor on the Dask cluster at `scheduler`, or on a LocalCluster started here (`workers` processes of one
    thread, 127.0.0.1, no dashboard), or with workers 0 none (in this process) -> (executor, where it runs)."""
    if not scheduler and not workers:
        yield None, dict(scheduler='this process', workers=0)
        return
    if scheduler:
        with executors.dask_client(scheduler) as client:
            yield client.get_executor(pure=False), dict(scheduler=scheduler, workers=len(client.nthreads()))
        return
    from distributed import Client, LocalCluster

    stopping.quiet_resource_tracker()  # a stop leaves the workers' semaphores to it, which is no leak to report
    # A task's error reaches the client through its future; below CRITICAL the workers only narrate the cluster's
    # own life, and a stop that closes the scheduler first made a busy worker print a heartbeat traceback after
    # the sweep's last line.
    with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, host='127.0.0.1',
                      dashboard_address=None, silence_logs=logging.CRITICAL) as cluster, Client(cluster, set_as_default=False) as client:
        yield client.get_executor(pure=False), dict(scheduler='LocalCluster on this machine', workers=workers)


def run_sweep(names, seeds, scheduler='', path=None, repo=REPO, workers=2, say=print, specs_of=across.seed_specs):
    """Sweep the named substrates on the cluster and merge their entries into the record -> the record."""
    chosen = {name: substrate_config(name, repo)[0] for name in names}  # every name checked before anything runs
    record = load_record(path)
    began = time.perf_counter()
    with cluster_executor(scheduler, workers) as (executor, where):
        if executor is not None and not scheduler:  # workers sharing this machine's cache build the bases at once
            for key in executor.map(build_base, [config.describe() for config in chosen.values()]):
                say(f'RL base {key[:12]} ready')
        for name in names:
            entry = sweep_substrate(name, seeds, executor, repo, specs_of)
            record, dropped = keep_current(record, entry['code'])
            if dropped:
                say(f'dropped from the record, made by older training code: {", ".join(dropped)} (sweep them again)')
            record['substrates'][name] = entry
            write_record(record, path)  # after each substrate: a stop keeps the finished ones
            say(f'{name}: {sum(len(runs) for runs in entry["runs"].values())} runs on seeds '
                f'{", ".join(map(str, seeds))} in {entry["seconds"] / 60:.1f} min')
    record['sessions'].append(dict(date=datetime.date.today().isoformat(), substrates=list(names), seeds=list(seeds),
                                   seconds=time.perf_counter() - began, cpus=os.cpu_count(),
                                   machine=platform.machine(), cpu=cpu_name(), code=code_fingerprint(), **where))
    write_record(record, path)
    return record


def check_record(record, claim_specs=across.claim_specs):
    """Each committed run summary against the run of the same provenance in this machine's run cache -> the list of
    (substrate, seed, name, problem); a run missing from the cache is a problem too."""
    problems = []
    for name, entry in record['substrates'].items():
        config = SubstrateConfig.from_description(entry['config'])
        with use(config):
            for seed in entry['seeds']:
                specs = claim_specs(seed)
                for claim_name, stored in entry['runs'][str(seed)].items():
                    spec = specs[claim_name]
                    if experiments.run_path(spec).stem != stored['run']:
                        problems.append((name, seed, claim_name, 'another provenance (code, base or kernels)'))
                        continue
                    run = experiments.load_run(spec)
                    if run is None:
                        problems.append((name, seed, claim_name, 'not in the run cache'))
                    elif dict(across.run_summary(run), run=stored['run']) != stored:
                        problems.append((name, seed, claim_name, 'the saved run differs from the record'))
    return problems


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--substrates', nargs='+', default=None,
                        help=f'which substrates (default: every available one of {", ".join(BY_NAME)})')
    parser.add_argument('--seeds', nargs='+', type=int, default=list(SEEDS))
    parser.add_argument('--scheduler', default=executors.scheduler_address() or '',
                        help=f'a Dask scheduler address (default: ${executors.SCHEDULER_VARIABLE}, else a '
                             'LocalCluster started here)')
    parser.add_argument('--check', action='store_true', help='compare the record with the runs in the run cache')
    args = parser.parse_args(argv)
    if args.check:
        problems = check_record(load_record())
        for problem in problems:
            print(' | '.join(map(str, problem)))
        print(f'{len(problems)} problems' if problems else 'every recorded run matches the run cache')
        return 1 if problems else 0
    if args.scheduler:
        try:
            executors.check_scheduler_address(args.scheduler)
        except ValueError as error:
            parser.error(str(error))
    found = available()
    names = args.substrates or [name for name, value in found.items() if not isinstance(value, str)]
    for name in names:
        if name not in found:
            parser.error(f'unknown substrate {name!r}; the sweep knows {", ".join(found)}')
        if isinstance(found[name], str):
            parser.error(f'substrate {name!r} is not available: {found[name]}')
    try:
        with stopping.raise_on_signals():
            run_sweep(names, args.seeds, args.scheduler)
    except stopping.Stopped as stop:
        print(f'STOPPED by {stop.name}: the substrates swept before the stop are in the record; the runs finished '
              'before it are in the run cache', file=sys.stderr, flush=True)
        return stop.exit_code
    return 0


if __name__ == '__main__':
    status = main()
    if status > 128:  # stopped by a signal: end by it, so make and a calling shell stop too
        stopping.die_by(status - 128)
    sys.exit(status)
