"""Carry the sweep records across a change of the training code that moves no bit (a refactor, a new hook).

A sweep record stands for the training code that made it (agentrl.fingerprint.code_fingerprint). A full sweep takes
about three and a half hours here, so a change that computes the same numbers is shown to do so instead: every
setting of the chosen seeds is trained again with this tree's code, on every substrate of the substrate sweep and on
the framework sweep's substrate, and each run's summary must equal the recorded one exactly. A part that passes gets
a 'certified' entry naming this tree's code, the seeds rerun, the machine and the time; a part with any difference
is left as it is, stale, and the differences are printed (sweep it again: the change moved results).

    python -m machinery.certify [--seeds 0] [--workers 2] [--only substrate|framework]

A rerun is bit-for-bit only on a machine whose arithmetic matches the one that swept the record (the CPU named in
its sessions); on another, differences say nothing about the change.
"""
import argparse
import datetime
import os
import sys
import time

from agentrl import stopping
from agentrl.calibration.substrates import load_record
from agentrl.ch10 import framework_claims
from agentrl.fingerprint import code_fingerprint, made_by
from agentrl.paths import FRAMEWORK_SWEEP
from machinery import framework_sweep, substrate_sweep


def differences(recorded, rerun, where):
    """[(where, seed, setting, what)] between the recorded summaries and a rerun's ({seed: {setting: summary}}), the
    cache keys ('run', which name the code) aside."""
    found = []
    for seed, settings in rerun.items():
        for setting, summary in settings.items():
            stored = recorded.get(seed, {}).get(setting)
            if stored is None:
                found.append((where, seed, setting, 'not in the record'))
            elif {k: v for k, v in stored.items() if k != 'run'} != {k: v for k, v in summary.items() if k != 'run'}:
                found.append((where, seed, setting, 'differs from the record'))
    return found


def stamp(seeds, runs, seconds):
    return dict(code=code_fingerprint(), seeds=list(seeds), runs=runs, seconds=seconds,
                date=datetime.date.today().isoformat(), cpu=substrate_sweep.cpu_name(), cpus=os.cpu_count())


def certify_substrates(seeds, executor, say=print):
    """Rerun `seeds` of every substrate not yet standing for this code; certify those that match -> differences."""
    record, code, problems = load_record(), code_fingerprint(), []
    todo = [name for name, entry in record['substrates'].items() if not made_by(entry, code)]
    if executor is not None and todo:
        configs = [record['substrates'][name]['config'] for name in todo]
        for key in executor.map(substrate_sweep.build_base, configs):
            say(f'RL base {key[:12]} ready')
    for name in todo:
        entry = record['substrates'][name]
        started = time.perf_counter()
        rerun = substrate_sweep.sweep_substrate(name, seeds, executor)['runs']
        found = differences(entry['runs'], rerun, name)
        problems += found
        if not found:
            entry.setdefault('certified', []).append(stamp(seeds, sum(map(len, rerun.values())),
                                                           time.perf_counter() - started))
            substrate_sweep.write_record(record)  # after each substrate: a stop keeps the certified ones
        say(f'{name}: ' + (f'{len(found)} runs differ' if found else
                           f'{sum(map(len, rerun.values()))} runs bit-identical, certified'))
    return problems


def certify_frameworks(seeds, executor, say=print):
    """Rerun `seeds` of the framework sweep if it does not stand for this code yet; certify it if they match."""
    record, code = framework_claims.load_record(), code_fingerprint()
    if made_by(record, code):
        return []
    started = time.perf_counter()
    rerun = framework_sweep.sweep(seeds, executor, steps=record['steps'])['runs']
    found = differences(record['runs'], rerun, 'frameworks')
    if not found:
        record.setdefault('certified', []).append(stamp(seeds, sum(map(len, rerun.values())),
                                                        time.perf_counter() - started))
        substrate_sweep.write_record(record, FRAMEWORK_SWEEP)
    say('frameworks: ' + (f'{len(found)} runs differ' if found else
                          f'{sum(map(len, rerun.values()))} runs bit-identical, certified'))
    return found


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--seeds', nargs='+', type=int, default=[0])
    parser.add_argument('--workers', type=int, default=2, help='LocalCluster workers (0: train in this process)')
    parser.add_argument('--only', choices=('substrate', 'framework'), default=None)
    args = parser.parse_args(argv)
    problems = []
    try:
        with stopping.raise_on_signals(), substrate_sweep.cluster_executor('', args.workers) as (executor, _):
            if args.only != 'framework':
                problems += certify_substrates(args.seeds, executor)
            if args.only != 'substrate':
                problems += certify_frameworks(args.seeds, executor)
    except stopping.Stopped as stop:
        print(f'STOPPED by {stop.name}: the parts certified before the stop are in the records', file=sys.stderr)
        return stop.exit_code
    for problem in problems:
        print(' | '.join(map(str, problem)))
    print(f'{len(problems)} runs differ: those parts were not certified' if problems else
          'every rerun run is bit-identical to its record')
    return 1 if problems else 0


if __name__ == '__main__':
    status = main()
    if status > 128:
        stopping.die_by(status - 128)
    sys.exit(status)
