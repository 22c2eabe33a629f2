"""GRPO on SmolLM2-135M-Instruct for every setting of agentrl.realrl.claims on seeds, in resumable parts (make
real-sweep): each finished run joins results/real_sweep.json at once, so a stop loses at most the run under way.

    python -m machinery.real_sweep [--settings none 'KL k3 0.3' ...] [--seeds 0 1 2] [--base]

A run already in the record is skipped; runs made by other real-model code than this tree's
(agentrl.realrl.runs.real_code_fingerprint) are dropped from the record when a run of this tree's joins it, since the
verdicts must come from one code. --base evaluates the base model (the pass@k curve the trained ones are set beside).
The runs use torch's MODEL_THREADS threads, one at a time: two at once on two cores would only share them. `make` never
runs this; notebook 15 renders from the record.
"""
import argparse
import datetime
import json
import os
import sys

from agentrl import stopping
from agentrl.atomic import atomic_output
from agentrl.paths import REPO
from agentrl.pretrained.loader import load_smollm2
from agentrl.realrl import claims, runs
from machinery.substrate_sweep import cpu_name

RECORD = REPO / 'results' / 'real_sweep.json'


def load_record(path=RECORD):
    """The record, or an empty one for this tree's code."""
    if path.is_file():
        return json.loads(path.read_text())
    return dict(code=runs.real_code_fingerprint(), level=runs.SWEEP_LEVEL, steps=runs.SWEEP_STEPS, runs={}, base=None,
                sessions=[])


def write_record(record, path=RECORD):
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_output(path, suffix='.json') as tmp:
        tmp.write_text(json.dumps(record, indent=1, sort_keys=True) + '\n')


def current(record, code, level, steps):
    """The record kept for this code, level and length: unchanged if it was made by them, else emptied -> (record,
    whether it was emptied)."""
    if (record['code'], record['level'], record['steps']) == (code, level, steps):
        return record, False
    return dict(code=code, level=level, steps=steps, runs={}, base=None, sessions=[]), True


def sweep(settings, seeds, base=False, path=RECORD, say=print, pretrained=None):
    """Train and evaluate each (setting, seed) not yet in the record, writing the record after each -> the record."""
    record, emptied = current(load_record(path), runs.real_code_fingerprint(), runs.SWEEP_LEVEL, runs.SWEEP_STEPS)
    if emptied:
        say('the record was made by other real-model code or settings: starting it afresh')
    pretrained = load_smollm2() if pretrained is None else pretrained
    vocab = pretrained.model.config.vocab_size
    session = dict(date=datetime.date.today().isoformat(), cpu=cpu_name(), cpus=os.cpu_count(), runs=[])
    record['sessions'].append(session)
    if base and record['base'] is None:
        spec = runs.RealRunSpec(name='base', level=runs.SWEEP_LEVEL, steps=0)
        record['base'] = runs.run_summary(runs.ensure_run(spec, pretrained), vocab)
        write_record(record, path)
        say(f'base model evaluated in {record["base"]["seconds"]:.0f} s')
    for seed in seeds:
        for name in settings:
            if name in record['runs'].get(str(seed), {}):
                continue
            spec = runs.setting_spec(name, seed)
            summary = runs.run_summary(runs.ensure_run(spec, pretrained), vocab)
            record['runs'].setdefault(str(seed), {})[name] = summary
            session['runs'].append(f'{name} | seed {seed}')
            write_record(record, path)
            say(f'{name}, seed {seed}: {summary["seconds"]:.0f} s, peak {summary["peak_rss_mb"] / 1024:.2f} GB, '
                f'pass@1 {summary["evaluation"]["pass_at_k"][0]:.3f}')
    return record


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--settings', nargs='+', default=list(claims.ARMS), choices=list(claims.SETTINGS))
    parser.add_argument('--seeds', nargs='+', type=int, default=list(runs.SWEEP_SEEDS))
    parser.add_argument('--base', action='store_true', help='evaluate the base model first')
    args = parser.parse_args(argv)
    try:
        with stopping.raise_on_signals():
            sweep(args.settings, args.seeds, args.base)
    except stopping.Stopped as stop:
        print(f'STOPPED by {stop.name}: the runs finished before it are in {RECORD.relative_to(REPO)}',
              file=sys.stderr, flush=True)
        return stop.exit_code
    return 0


if __name__ == '__main__':
    status = main()
    if status > 128:
        stopping.die_by(status - 128)
    sys.exit(status)
