"""GRPO on SmolLM2-135M-Instruct for every setting of agentrl.realrl.claims on seeds, in resumable parts (make
real-sweep): each finished run joins results/real_sweep.json at once, so a stop loses at most the runs under way.

    python -m machinery.real_sweep [--settings none 'KL k3 0.3' ...] [--seeds 0 1 2] [--base]
                                   [--scheduler tcp://HOST:8786 | --workers N]
    python -m machinery.real_sweep --check [--check-steps N] --settings KL-Cov --seeds 1

--check trains the named runs again here, from nothing (never from the run cache), and holds each against the
record: every step and the held-out evaluation, or only the first N steps; it exits 1 if any differs.

The runs go through a Dask cluster: the scheduler named by --scheduler (or $AGENTRL_DASK_SCHEDULER), else a
LocalCluster of --workers processes on this machine (0: in this process). Each worker loads the model once and sends
every run back here, where it is saved in the run cache and written into the record; a worker lost mid-run has its run
trained again on another, with the same bits. A run already in the record is skipped; runs made by other real-model
code than this tree's (agentrl.realrl.runs.real_code_fingerprint) are dropped from the record when a run of this
tree's joins it, since the verdicts must come from one code. --base evaluates the base model (the pass@k curve the
trained ones are set beside). Every run uses torch's MODEL_THREADS threads, so on two cores one worker is the
default: two would only share the cores. `make` never runs this; notebook 15 renders from the record.
"""
import argparse
import datetime
import itertools
import json
import os
import sys
from functools import lru_cache
from pathlib import Path

from agentrl import executors, stopping
from agentrl.atomic import atomic_output
from agentrl.paths import REAL_SWEEP, REPO
from agentrl.pretrained.loader import load_smollm2
from agentrl.realrl import claims, runs
from agentrl.verified_cache import save_verified
from machinery.substrate_sweep import cluster_executor, cpu_name

RECORD = REAL_SWEEP
SMOLLM2 = 'smollm2'  # the sweep's model; any other `model` is the folder of a saved tokenizer (the tests' stand-in)
TIMING = ('seconds', 'peak_rss_mb')  # what a run summary holds of the machine it ran on, not of the run


def empty_record(code, level, steps, model=SMOLLM2):
    return dict(code=code, level=level, steps=steps, model=model, runs={}, base=None, sessions=[])


def load_record(path=RECORD):
    """The record, or an empty one for this tree's code."""
    if path.is_file():
        return json.loads(path.read_text())
    return empty_record(runs.real_code_fingerprint(), runs.SWEEP_LEVEL, runs.SWEEP_STEPS)


def write_record(record, path=RECORD):
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_output(path, suffix='.json') as tmp:
        tmp.write_text(json.dumps(record, indent=1, sort_keys=True) + '\n')


def current(record, code, level, steps, model=SMOLLM2):
    """The record kept for this code, level, length and model: unchanged if it was made by them, else emptied ->
    (record, whether it was emptied)."""
    made_by = (record['code'], record['level'], record['steps'], record.get('model', SMOLLM2))
    if made_by == (code, level, steps, model):
        return record, False
    return empty_record(code, level, steps, model), True


def without_timing(record):
    """The record's runs and base evaluation without what the machine contributed (time, memory, sessions): two
    sweeps of the same tree on machines whose arithmetic matches give equal ones."""
    def strip(summary):
        return None if summary is None else {k: v for k, v in summary.items() if k not in TIMING}
    return dict(base=strip(record['base']),
                runs={seed: {name: strip(s) for name, s in named.items()} for seed, named in record['runs'].items()})


@lru_cache(maxsize=2)
def pretrained_for(model):
    """What a worker trains: SmolLM2-135M-Instruct, or for a tokenizer folder a tiny Llama of that tokenizer's vocabulary,
    randomly initialised from a fixed seed (a sweep the tests can afford). Loaded once per process."""
    if model == SMOLLM2:
        return load_smollm2()
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    from agentrl.pretrained.loader import Pretrained

    tokenizer = AutoTokenizer.from_pretrained(model, local_files_only=True)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=1024)
    with torch.random.fork_rng():
        torch.manual_seed(0)
        tiny = LlamaForCausalLM(config)
    return Pretrained(tiny.eval().requires_grad_(False), tokenizer, Path(model), 0.0)


def train_job(name, description, model):
    """A worker's side of the sweep: the run of RealRunSpec(name, **description) on `model`, trained and evaluated
    -> dict(provenance, run, vocab_size). Nothing is saved on the worker: the caller keeps the run."""
    spec = runs.RealRunSpec(name=name, **description)
    pretrained = pretrained_for(model)
    return dict(provenance=runs.provenance(spec), run=runs.train_and_evaluate(spec, pretrained),
                vocab_size=pretrained.model.config.vocab_size)


def sweep(settings, seeds, base=False, path=RECORD, say=print, executor=None, where=None, model=SMOLLM2,
          steps=runs.SWEEP_STEPS, level=runs.SWEEP_LEVEL):
    """Train and evaluate each (setting, seed) not yet in the record through `executor` (None: here, one after the
    other), writing the record as each run comes back -> the record."""
    record, emptied = current(load_record(path), runs.real_code_fingerprint(), level, steps, model)
    if emptied:
        say('the record was made by other real-model code, settings or model: starting it afresh')
    session = dict(date=datetime.date.today().isoformat(), cpu=cpu_name(), cpus=os.cpu_count(), runs=[],
                   **(where or dict(scheduler='this process', workers=0)))
    record['sessions'].append(session)
    wanted = []  # (seed or None for the base model, spec)
    if base and record['base'] is None:
        wanted.append((None, runs.RealRunSpec(name='base', level=level, steps=0)))
    wanted += [(seed, runs.setting_spec(name, seed, steps, level)) for seed in seeds for name in settings
               if name not in record['runs'].get(str(seed), {})]
    cached = {}
    if model == SMOLLM2:  # a run this machine has trained already is taken from its run cache
        for index, (_, spec) in enumerate(wanted):
            run = runs.load_run(spec)
            if run is not None:
                cached[index] = dict(provenance=runs.provenance(spec), run=run, vocab_size=None)
    training = [index for index in range(len(wanted)) if index not in cached]
    jobs = [(wanted[i][1].name, wanted[i][1].describe(), model) for i in training]
    trained = ((training[j], result) for j, result in executors.finished(executor, train_job, jobs))
    for index, result in itertools.chain(cached.items(), trained):
        seed, spec = wanted[index]
        if result['vocab_size'] is None:
            result['vocab_size'] = pretrained_for(model).model.config.vocab_size
        if result['provenance'] != runs.provenance(spec):
            raise RuntimeError(f'the worker trained {spec.name!r} (seed {spec.seed}) under another provenance than '
                               f'this process would: {result["provenance"]} against {runs.provenance(spec)}')
        if model == SMOLLM2 and index not in cached:  # the stand-in's runs stay out of the run cache
            save_verified(runs.run_path(spec), result['run'], result['provenance'])
        summary = runs.run_summary(result['run'], result['vocab_size'])
        if seed is None:
            record['base'] = summary
            say(f'base model evaluated in {summary["seconds"]:.0f} s')
        else:
            record['runs'].setdefault(str(seed), {})[spec.name] = summary
            session['runs'].append(f'{spec.name} | seed {seed}')
            say(f'{spec.name}, seed {seed}: {summary["seconds"]:.0f} s, peak {summary["peak_rss_mb"] / 1024:.2f} GB, '
                f'pass@1 {summary["evaluation"]["pass_at_k"][0]:.3f}')
        write_record(record, path)
    write_record(record, path)
    return record


def difference_words(where):
    """replay.first_difference's answer in words, or None when there is no difference."""
    if where is None:
        return None
    step, key, mine, theirs = where
    if key is None:
        return f'at step {step} the logged keys differ ({mine} here, {theirs} in the record)'
    return f'first at step {step}, `{key}`: {mine!r} here, {theirs!r} in the record'


def check(settings, seeds, path=RECORD, say=print, model=SMOLLM2, steps=None):
    """Train each (setting, seed) here again, from nothing, and hold it against the record's run (its first `steps`
    steps only, when given; else every step and the evaluation), time and memory aside -> how many differ."""
    from agentrl.realrl import replay

    record = load_record(path)
    code = runs.real_code_fingerprint()
    if (record['code'], record.get('model', SMOLLM2)) != (code, model):
        raise ValueError(f'{path.name} was made by other real-model code or another model than this tree\'s '
                         f'({record["code"]} against {code}): nothing in it can be checked here; sweep again first')
    differ = 0
    for seed in seeds:
        for name in settings:
            recorded = record['runs'].get(str(seed), {}).get(name)
            if recorded is None:
                say(f'{name}, seed {seed}: not in the record, so nothing to check against')
                differ += 1
                continue
            if steps:
                what = f'its first {steps} steps'
                live = replay.first_steps(name, seed, steps, pretrained_for(model))
                found = difference_words(replay.first_difference(live, recorded['history'][:steps]))
            else:
                what = f'all {len(recorded["history"])} steps and the held-out evaluation'
                spec = runs.setting_spec(name, seed, record['steps'], record['level'])
                run = json.loads(json.dumps(runs.train_and_evaluate(spec, pretrained_for(model))))  # as recorded
                found = difference_words(replay.first_difference(run['history'], recorded['history']))
                if found is None and len(run['history']) != len(recorded['history']):
                    found = f'{len(run["history"])} steps here, {len(recorded["history"])} in the record'
                if found is None and run['evaluation'] != recorded['evaluation']:
                    found = 'every step is equal, the held-out evaluation is not'
            if found is None:
                say(f'{name}, seed {seed}: equal to the record bit for bit ({what}), on {cpu_name()}')
            else:
                differ += 1
                say(f'{name}, seed {seed}: differs from the record, on {cpu_name()}: {found}')
    return differ


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--settings', nargs='+', default=list(claims.ARMS), choices=list(claims.SETTINGS))
    parser.add_argument('--seeds', nargs='+', type=int, default=list(runs.SWEEP_SEEDS))
    parser.add_argument('--base', action='store_true', help='evaluate the base model first')
    parser.add_argument('--check', action='store_true',
                        help='train the named runs again here and hold them against the record, instead of sweeping')
    parser.add_argument('--check-steps', type=int, default=None,
                        help=f'with --check, only the first N steps (1 to {runs.SWEEP_STEPS}); default the whole run')
    parser.add_argument('--scheduler', default=executors.scheduler_address() or '',
                        help=f'a Dask scheduler address (default: ${executors.SCHEDULER_VARIABLE}, else a '
                             'LocalCluster here)')
    parser.add_argument('--workers', type=int, default=1,
                        help='worker processes of the LocalCluster (0: train in this process); default 1')
    args = parser.parse_args(argv)
    if args.scheduler:
        executors.check_scheduler_address(args.scheduler)
    if args.workers < 0:
        parser.error(f'--workers must be 0 or more, got {args.workers}')
    if args.check_steps is not None and not (args.check and 1 <= args.check_steps <= runs.SWEEP_STEPS):
        parser.error(f'--check-steps goes with --check and must be from 1 to {runs.SWEEP_STEPS}, '
                     f'got {args.check_steps}')
    if args.check:
        return 1 if check(args.settings, args.seeds, RECORD, print, steps=args.check_steps) else 0
    try:
        with stopping.raise_on_signals():
            with cluster_executor(args.scheduler, args.workers) as (executor, where):
                sweep(args.settings, args.seeds, args.base, RECORD, print, executor, where)
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
