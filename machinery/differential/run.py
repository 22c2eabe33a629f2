"""Every check of the frameworks installed here, on every case: `python -m machinery.differential.run --set NAME`.

Run with the frameworks' environment's Python (make frameworks-test does); writes results/frameworks/<set>.json:
the installed versions, this machine, and for each check its options, functions and each case's outcome.
"""
import argparse
import importlib
import importlib.metadata
import json
import platform
import sys
from pathlib import Path

from agentrl.atomic import atomic_output
from agentrl.paths import REPO
from machinery.differential.compare import as_expected, run_check

MODULES = {'verl': ('machinery.differential.verl', 'machinery.differential.verl_correction'),
           'TRL': ('machinery.differential.trl', 'machinery.differential.trl_scoring'),
           'OpenRLHF': ('machinery.differential.openrlhf',), 'ms-swift': ('machinery.differential.swift',)}
DISTRIBUTIONS = {'verl': 'verl', 'TRL': 'trl', 'OpenRLHF': 'openrlhf', 'ms-swift': 'ms-swift'}
SETS = ('reference', 'latest', 'swift')
# the swift layer's trl is 0.29, which ms-swift needs: only ms-swift's checks belong to that set
DEFAULT_FRAMEWORKS = {'reference': ('verl', 'TRL', 'OpenRLHF'), 'latest': ('verl', 'TRL', 'OpenRLHF'),
                      'swift': ('ms-swift',)}
RECORDS = REPO / 'results' / 'frameworks'


def installed(distribution):
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def cpu_name():
    try:
        for line in Path('/proc/cpuinfo').read_text().splitlines():
            if line.startswith('model name'):
                return line.split(':', 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def checks_of(framework):
    """Every check of one framework, in the order its modules declare them."""
    return [check for module in MODULES[framework] for check in importlib.import_module(module).registry.checks]


def run(set_name, frameworks=None, seed=0):
    """The record of one set: every check of each installed framework (or of `frameworks`), every case, on the
    tensors of `seed` (cases.make)."""
    if set_name not in SETS:
        raise ValueError(f'unknown framework set {set_name!r}; allowed: {", ".join(map(repr, SETS))}')
    import torch
    versions = {name: installed(dist) for name, dist in DISTRIBUTIONS.items()}
    record = dict(set=set_name, versions=versions, torch=torch.__version__, python=platform.python_version(),
                  cpu=cpu_name(), seed=seed, frameworks=[], checks=[])
    wanted = frameworks or DEFAULT_FRAMEWORKS[set_name]
    for name in MODULES:
        if name not in wanted or versions[name] is None:
            continue
        record['frameworks'].append(name)
        for check in checks_of(name):
            results = [run_check(check, case, set_name, seed) for case in check.cases]
            record['checks'].append(dict(
                framework=check.framework, version=versions[name], options=list(check.options),
                function=check.function, ours=check.ours, setting=check.setting, stand_in=check.stand_in,
                precision=check.precision,
                results=results, as_expected=all(map(as_expected, results))))
    return record


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--set', required=True, choices=SETS, help='which pinned framework set is installed here')
    parser.add_argument('--frameworks', nargs='*', choices=sorted(MODULES), help='only these (default: all installed)')
    parser.add_argument('--seed', type=int, default=0,
                        help='draw the cases from this seed; any other than 0 writes <set>-seed<N>.json beside the '
                             'record, which stays the seed-0 one (so does a run of only some frameworks)')
    args = parser.parse_args(argv)
    if args.seed < 0:
        parser.error(f'--seed must be 0 or more, got {args.seed}')
    record = run(args.set, args.frameworks, args.seed)
    RECORDS.mkdir(parents=True, exist_ok=True)
    # the committed record is the whole set on seed 0; a part of it, or other tensors, is written beside it
    part = args.frameworks and sorted(args.frameworks) != sorted(DEFAULT_FRAMEWORKS[args.set])
    name = args.set + (f'-seed{args.seed}' if args.seed else '') + ('-' + '-'.join(args.frameworks) if part else '')
    with atomic_output(RECORDS / f'{name}.json') as tmp:
        tmp.write_text(json.dumps(record, indent=1, sort_keys=True) + '\n')
    surprises = [c for c in record['checks'] if not c['as_expected']]
    agree = sum(all(r['outcome'] == 'agrees' for r in c['results']) for c in record['checks'])
    print(f"{name}: {len(record['checks'])} checks, {agree} agree on every case, "
          f'{len(surprises)} not as declared')
    for check in surprises:
        print('  not as declared:', check['framework'], check['function'], check['setting'])
    return 1 if surprises else 0


if __name__ == '__main__':
    sys.exit(main())
