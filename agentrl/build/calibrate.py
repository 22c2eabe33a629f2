"""`make calibrate`: a substrate against what the book's chapters 1-9 show, on seeds 0-4 (push rows: batch seeds 0-9).

The calibration set is the RL base and the unregularised default GRPO run (chapter 9's behaviour), nothing
else: no regularised setting of chapter 10 is run here. For each seed this trains the default run for 80
steps, keeps the policy it had after 40, and evaluates that one on the held-out tasks (16 attempts on each of
the 10). For each batch seed it pushes one RL-base batch (the one section 10.6 uses, drawn with that seed)
through 8 full-batch clipped-surrogate steps at clip_high 0.2. It prints one row per quantity: the book's
value, the band the mean must fall in, ours (mean, then each seed), and whether it holds. Exit status 1 if a
row does not hold.

`--candidate c18` measures a named configuration (agentrl.substrate.config.CANDIDATES) and `--config JSON` any
SubstrateConfig description, beside the default and without changing it. `--protocol confirmation` uses the
unseen seeds 5-9 (batch seeds 10-19). `--scheduler tcp://host:8786` (default: $AGENTRL_DASK_SCHEDULER) measures on
that Dask cluster's workers instead of local processes.
"""
import argparse
import copy
import dataclasses
import functools
import json
import sys

import torch

from agentrl import executors, stopping
from agentrl.atomic import atomic_output
from agentrl.ch10.evaluation import diversity
from agentrl.core.logprobs import entropy_from_logits, masked_mean, selected_log_probs
from agentrl.cpu import fixed_threads
from agentrl.substrate.config import CANDIDATES, DEFAULT, SubstrateConfig, use
from agentrl.substrate.grpo import Plugin, RLConfig, compute_advantages, policy_loss, train_rl
from agentrl.substrate.gym import make_env, make_tasks
from agentrl.substrate.model import count_parameters
from agentrl.substrate.rollout import collate, sample_groups
from agentrl.substrate.sft import make_rl_base
from agentrl.substrate.tokenizer import build_tokenizer

PUSH_UPDATES, PUSH_LR, PUSH_CLIP = 8, 1e-3, 0.2  # section 10.6's single-batch experiment, at the default clip


@dataclasses.dataclass(frozen=True)
class Protocol:
    """Which seeds a measurement uses (fixed before anything was measured)."""
    seeds: tuple = (0, 1, 2, 3, 4)  # GRPO run seeds (RLConfig.seed); rows are judged on their mean
    batch_seeds: tuple = tuple(range(10))  # generator seeds of the 10.6 batch: its two batch rows and two push rows
    short_steps: int = 40  # the chapter's run; the held-out evaluation is of this policy
    long_steps: int = 80  # the longer run of the final-entropy rows (its first short_steps are the short run)
    attempts: int = 16  # held-out attempts per task


SEARCH = Protocol()
CONFIRMATION = Protocol(seeds=(5, 6, 7, 8, 9), batch_seeds=tuple(range(10, 20)))  # unseen by the search


@functools.lru_cache(maxsize=4)
def prepare(config):
    """(tokenizer, train tasks, held-out tasks, RL base) of `config`: the base built once, then loaded from the cache."""
    with use(config):
        tok = build_tokenizer(make_tasks('all'))
        return tok, make_tasks('train'), make_tasks('heldout'), make_rl_base(tok)


def section_10_6_batch(rl_base, tok, train_tasks, cfg, seed):
    """The RL-base batch section 10.6 studies: one group of cfg.group_size episodes on each of the first 8 training
    tasks, drawn with a generator seeded `seed` -> (collated batch, advantages [B])."""
    episodes = sample_groups(rl_base, lambda: make_env(cfg), train_tasks[:8], tok, cfg, torch.Generator().manual_seed(seed))
    batch = collate(episodes, tok.pad_id)
    return batch, compute_advantages(batch, cfg)


def push_batch(rl_base, batch, advantages, cfg, updates=PUSH_UPDATES, lr=PUSH_LR):
    """Adam on one batch: `updates` full-batch steps of the clipped surrogate from the RL base -> dict of measures.

    Measures: rewarded (policy tokens with A > 0), rare (those with pi_old < 0.5), last_clip_frac, entropy_before,
    entropy_after (policy-token entropy of the whole next-token distribution).
    """
    ids, mask = batch['ids'], batch['action_mask']  # [B, T], [B, T-1]
    with torch.no_grad():
        logits = rl_base(ids)[:, :-1]  # [B, T-1, V]
        old_logp = selected_log_probs(logits, ids[:, 1:])
        before = masked_mean(entropy_from_logits(logits), mask).item()
    rewarded = (advantages[:, None] > 0) & (mask > 0)  # [B, T-1]
    policy = copy.deepcopy(rl_base)
    adam = torch.optim.Adam(policy.parameters(), lr=lr)
    for _ in range(updates):
        loss, stats = policy_loss(selected_log_probs(policy(ids)[:, :-1], ids[:, 1:]), old_logp, advantages, mask, cfg)
        adam.zero_grad()
        loss.backward()
        adam.step()
    with torch.no_grad():
        after = masked_mean(entropy_from_logits(policy(ids)[:, :-1]), mask).item()
    return dict(rewarded=int(rewarded.sum()), rare=int((rewarded & (old_logp.exp() < 0.5)).sum()),
                last_clip_frac=stats['clip_frac'], entropy_before=before, entropy_after=after)


def measure_batch(config, batch_seed):
    """The single-batch push of section 10.6 on the batch drawn with `batch_seed`, under `config` -> dict."""
    tok, train, _, base = prepare(config)
    with use(config), fixed_threads(1):
        cfg = RLConfig(clip_high=PUSH_CLIP)
        batch, advantages = section_10_6_batch(base, tok, train, cfg, batch_seed)
        return dict(batch_seed=batch_seed, **push_batch(base, batch, advantages, cfg))


class KeepPolicyAt(Plugin):
    """A read-only plug-in that keeps a copy of the policy as it is after `steps` updates (it draws nothing)."""

    def __init__(self, steps):
        self.steps, self.policy = steps, None

    def after_update(self, model, record):
        if record['step'] == self.steps - 1:
            self.policy = copy.deepcopy(model)


def measure_seed(config, seed, protocol=SEARCH):
    """Every calibration measurement of one GRPO seed under `config` -> dict (JSON-able; runs on one thread).

    One run of protocol.long_steps steps: its first protocol.short_steps steps are the short run, whose final
    policy (kept by KeepPolicyAt) is evaluated on the held-out tasks.
    """
    tok, train, heldout, base = prepare(config)
    with use(config), fixed_threads(1):
        keep = KeepPolicyAt(protocol.short_steps)
        history = train_rl(copy.deepcopy(base), train, tok, RLConfig(seed=seed, eval_every=0), protocol.long_steps,
                           plugins=[keep])
        return dict(seed=seed, vocab=len(tok), params=count_parameters(base), run40=history[:protocol.short_steps],
                    run80=history, heldout=diversity(keep.policy, base, heldout, tok, n=protocol.attempts))


def mean(values):
    return sum(values) / len(values)


@dataclasses.dataclass(frozen=True)
class RowSpec:
    """One calibration quantity: the book's value, its band, and how to read it from one measurement."""
    quantity: str
    book: str
    low: float  # None: no lower edge
    high: float  # None: no upper edge
    read: object  # one measurement (a seed's or a batch seed's) -> the value
    fmt: str
    source: str = 'seed'  # 'seed': over the GRPO seeds; 'batch': over the batch seeds
    scale: float = None  # a one-sided band's width for the band distance (a two-sided band's is high - low)

    @property
    def width(self):
        return self.scale if self.scale is not None else self.high - self.low


@dataclasses.dataclass(frozen=True)
class Row:
    """A quantity judged on measurements: its values (per seed or per batch seed), their mean, holds, distance."""
    spec: RowSpec
    values: tuple
    mean: float
    holds: bool
    distance: float  # 0 inside the band, else the distance to its nearest edge over the band's width

    @property
    def quantity(self):
        return self.spec.quantity


def _at(history, step):
    """The record of `step`; a run shorter than the chapter's (a smoke test's) gives its last step instead."""
    return history[min(step, len(history) - 1)]


def _entropy_late(history, first, last):
    """Mean policy-token entropy of steps first..last-1 (of the last steps that exist, in a shorter run)."""
    first = min(first, len(history) - 1)
    return mean([h['entropy'] for h in history[first:last]])


# The calibration rows: each a number chapter 10 prints of the RL base or of a run at chapter 9's settings, with its
# band (a step with no learning signal makes no update, so it clips nothing). The one-sided bands' widths (scale) were
# fixed with the search's rules, before it ran.
ROWS = [
    RowSpec('vocabulary', '316', 280, 350, lambda m: m['vocab'], '{:.0f}'),
    RowSpec('TinyAgent parameters', '157,244', 140_000, 175_000, lambda m: m['params'], '{:,.0f}'),
    RowSpec('policy tokens per episode (RL base)', '12-14', 10, 16, lambda m: _at(m['run40'], 0)['policy_tokens'], '{:.1f}'),
    RowSpec('RL base: reads per episode', '0.21-0.24', 0.15, 0.30, lambda m: _at(m['run40'], 0)['reads'], '{:.3f}'),
    RowSpec('RL base: batch reward', '0.17', 0.12, 0.24, lambda m: _at(m['run40'], 0)['reward'], '{:.3f}'),
    RowSpec('RL base: policy-token entropy', '0.52-0.57', 0.47, 0.62, lambda m: _at(m['run40'], 0)['entropy'], '{:.3f}'),
    RowSpec('RL base batch of 10.6: A>0 policy tokens', '121', 90, 150, lambda m: m['rewarded'], '{:.1f}', 'batch'),
    RowSpec('that batch: share of A>0 tokens with pi_old < 0.5', '14%', 0.08, 0.22,
            lambda m: m['rare'] / max(m['rewarded'], 1), '{:.1%}', 'batch'),
    RowSpec('that batch, clip_high 0.2, lr 1e-3, 8 full-batch steps: last-step clip_frac', '0.114', 0.07, 0.17,
            lambda m: m['last_clip_frac'], '{:.3f}', 'batch'),
    RowSpec('that batch: entropy after minus before (not higher)', 'falls', None, 0.0,
            lambda m: m['entropy_after'] - m['entropy_before'], '{:+.3f}', 'batch', scale=0.1),
    RowSpec('none, 40 steps: batch reward at step 5', '0.22', None, 0.32, lambda m: _at(m['run40'], 5)['reward'], '{:.3f}',
            scale=0.2),
    RowSpec('none: batch reward at step 10', '0.41', 0.30, 0.52, lambda m: _at(m['run40'], 10)['reward'], '{:.3f}'),
    RowSpec('none: batch reward at step 20', '0.72', 0.60, 0.82, lambda m: _at(m['run40'], 20)['reward'], '{:.3f}'),
    RowSpec('none: batch reward at step 39', '0.86', 0.78, 0.94, lambda m: _at(m['run40'], 39)['reward'], '{:.3f}'),
    RowSpec('none: policy-token entropy at step 10', '0.37', 0.30, 0.45, lambda m: _at(m['run40'], 10)['entropy'], '{:.3f}'),
    RowSpec('none: policy-token entropy at step 20', '0.18', 0.13, 0.25, lambda m: _at(m['run40'], 20)['entropy'], '{:.3f}'),
    RowSpec('none: policy-token entropy, mean of steps 35-39', '0.120', 0.08, 0.16,
            lambda m: _entropy_late(m['run40'], 35, 40), '{:.3f}'),
    RowSpec('none: reads per episode at step 39', '0.98', 0.90, None, lambda m: _at(m['run40'], 39)['reads'], '{:.3f}',
            scale=0.1),
    RowSpec('none: share of tokens clipped over the run', '0.13%', 0.0005, 0.0030,
            lambda m: mean([h.get('clip_frac', 0.0) for h in m['run40']]), '{:.2%}'),
    RowSpec('none, held-out (16 attempts x 10 tasks): pass@1', '0.725', 0.62, 0.82, lambda m: m['heldout']['pass1'],
            '{:.3f}'),
    RowSpec('none, held-out: pass@8', '0.800', 0.70, 0.90, lambda m: m['heldout']['pass8'], '{:.3f}'),
    RowSpec('none, held-out: distinct action sequences', '4.3', 3.0, 6.0, lambda m: m['heldout']['distinct'], '{:.2f}'),
    RowSpec('none, held-out: invalid calls per episode', '0.04', None, 0.10, lambda m: m['heldout']['invalid'],
            '{:.3f}', scale=0.1),
    RowSpec('none, held-out: KL from start', '0.237', 0.16, 0.32, lambda m: m['heldout']['kl_start'], '{:.3f}'),
    RowSpec('none, 80 steps: final entropy (mean of steps 75-79)', '0.08', 0.05, 0.11,
            lambda m: _entropy_late(m['run80'], 75, 80), '{:.3f}'),
    RowSpec('none: 80-step final entropy minus the 40-step one (below)', '-0.04', None, -1e-9,
            lambda m: _entropy_late(m['run80'], 75, 80) - _entropy_late(m['run40'], 35, 40), '{:+.3f}', scale=0.04),
]


def judge_row(spec, values):
    """The Row of `spec` on these values: their mean against the band."""
    average = mean(values)
    below = spec.low is not None and average < spec.low
    above = spec.high is not None and average > spec.high
    gap = (spec.low - average) if below else (average - spec.high) if above else 0.0
    return Row(spec, tuple(values), average, not (below or above), gap / spec.width)


def judge(seed_measurements, batch_measurements):
    """The 26 rows (in ROWS order) on one or more seeds' measurements and one or more batch seeds' pushes."""
    if not seed_measurements or not batch_measurements:
        raise ValueError('judge needs at least one seed measurement and one batch measurement')
    sources = dict(seed=seed_measurements, batch=batch_measurements)
    return [judge_row(spec, [spec.read(m) for m in sources[spec.source]]) for spec in ROWS]


def band_distance(rows):
    """Sum over rows of each row's distance to its band (0 inside), in band widths."""
    return sum(row.distance for row in rows)


def rows_held(rows):
    return sum(row.holds for row in rows)


def band_text(spec):
    low, high, fmt = spec.low, spec.high, spec.fmt
    if low is None:
        return f'<= {fmt.format(high)}' if high != -1e-9 else '< 0'
    if high is None:
        return f'>= {fmt.format(low)}'
    return f'{fmt.format(low)}-{fmt.format(high)}'


def print_table(rows, protocol):
    """The calibration table: quantity, book, band, ours (mean, then each seed), holds."""
    batch = list(protocol.batch_seeds)
    contiguous = len(batch) > 2 and batch == list(range(batch[0], batch[0] + len(batch)))
    seeds = ', '.join(map(str, protocol.seeds))
    batch_seeds = f'{batch[0]}-{batch[-1]}' if contiguous else ', '.join(map(str, batch))
    print(f'| quantity | book | band (mean over seeds {seeds}; 10.6 batch rows over batch seeds {batch_seeds}) '
          '| ours: mean (per seed) | holds |')
    print('|---|---|---|---|---|')
    for row in rows:
        fmt = row.spec.fmt
        ours = f'{fmt.format(row.mean)} ({", ".join(fmt.format(v) for v in row.values)})'
        print(f'| {row.quantity} | {row.spec.book} | {band_text(row.spec)} | {ours} | {"yes" if row.holds else "NO"} |')
    print(f'\n{rows_held(rows)} of {len(rows)} rows hold (band distance {band_distance(rows):.2f})')


def _job(args):
    kind, config, value, protocol = args
    return measure_seed(config, value, protocol) if kind == 'seed' else measure_batch(config, value)


def measure(config, protocol=SEARCH, processes=2, executor=None, scheduler=None):
    """(seed measurements, batch measurements) of `config` under `protocol`: each seed and batch seed a job, run
    through `executor` (any concurrent.futures.Executor), else on the Dask cluster at `scheduler`, else in
    `processes` local worker processes that end with this one and leave at once on SIGTERM (processes 1: here).
    Each job carries `config` itself, so a worker on another machine measures the same substrate."""
    prepare(config)  # builds the RL base once, before local workers load it from the cache
    jobs = [('seed', config, s, protocol) for s in protocol.seeds]
    jobs += [('batch', config, s, protocol) for s in protocol.batch_seeds]
    with executors.sweep_executor(processes, executor, scheduler) as pool:
        results = executors.ordered(pool, _job, [(job,) for job in jobs])
    return results[:len(protocol.seeds)], results[len(protocol.seeds):]


def chosen_config(candidate, config_json):
    """The configuration --candidate or --config names (default: the package's DEFAULT)."""
    if candidate and config_json:
        raise ValueError('give --candidate or --config, not both')
    if candidate:
        if candidate not in CANDIDATES:
            raise ValueError(f'--candidate {candidate!r} is not a named configuration; named: {sorted(CANDIDATES)}')
        return CANDIDATES[candidate]
    if config_json:
        return SubstrateConfig.from_description(json.loads(config_json))
    return DEFAULT


def chosen_protocol(name, seeds=None, batch_seeds=None):
    """The protocol named ('search' or 'confirmation'), with its seeds or batch seeds replaced where given."""
    protocol = SEARCH if name == 'search' else CONFIRMATION
    for field, values in (('seeds', seeds), ('batch_seeds', batch_seeds)):
        if values is None:
            continue
        if not values or len(set(values)) != len(values) or min(values) < 0:
            raise ValueError(f'--{field.replace("_", "-")} needs distinct seeds >= 0, got {values}')
        protocol = dataclasses.replace(protocol, **{field: tuple(values)})
    return protocol


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--candidate', help=f'a named configuration: {", ".join(sorted(CANDIDATES))}')
    parser.add_argument('--config', help='a SubstrateConfig description as JSON (SubstrateConfig.describe())')
    parser.add_argument('--substrate', help='a substrate of the calibration studies\' records: t45 (the default), '
                        'long (the long-grammar study\'s frozen trial), t74, t70, t26, t66')
    parser.add_argument('--protocol', choices=('search', 'confirmation'), default='search',
                        help='seeds 0-4 and batch seeds 0-9 (search) or seeds 5-9 and batch seeds 10-19')
    parser.add_argument('--seeds', nargs='+', type=int, help='other GRPO seeds instead of the protocol\'s (e.g. '
                        'seeds no notebook uses, 10 11 12 13 14)')
    parser.add_argument('--batch-seeds', nargs='+', type=int, help='other batch seeds of the 10.6 rows instead of '
                        'the protocol\'s')
    parser.add_argument('--processes', type=int, default=2)
    parser.add_argument('--scheduler', default=executors.scheduler_address(),
                        help=f'a Dask scheduler address (tcp://host:8786) to measure on its cluster instead of local '
                             f'processes (default: ${executors.SCHEDULER_VARIABLE})')
    parser.add_argument('--json', help='also write the raw measurements here')
    args = parser.parse_args(argv)
    try:
        if args.substrate:
            if args.candidate or args.config:
                raise ValueError('give one of --substrate, --candidate and --config')
            from agentrl.build.substrate_sweep import substrate_config
            try:
                config = substrate_config(args.substrate)[0]
            except LookupError as missing:
                raise ValueError(f'--substrate {args.substrate}: {missing}') from missing
        else:
            config = chosen_config(args.candidate, args.config)
        if args.scheduler:  # refused now, not after the RL base is built
            executors.check_scheduler_address(args.scheduler)
        protocol = chosen_protocol(args.protocol, args.seeds, args.batch_seeds)
    except ValueError as error:
        parser.error(str(error))
    try:
        with stopping.raise_on_signals():
            seeds, batches = measure(config, protocol, args.processes, scheduler=args.scheduler)
    except stopping.Stopped as stop:
        print(f'STOPPED by {stop.name}: the calibration was interrupted while measuring; nothing was printed or '
              'written (a cached RL base is whole or absent)', file=sys.stderr, flush=True)
        return stop.exit_code
    if config != DEFAULT:
        print(f'configuration: {json.dumps(config.describe(), sort_keys=True)}\n')
    rows = judge(seeds, batches)
    print_table(rows, protocol)
    if args.json:
        with atomic_output(args.json, '.json') as temporary:
            temporary.write_text(json.dumps(dict(config=config.describe(), seeds=seeds, batches=batches)))
    return 0 if all(row.holds for row in rows) else 1


if __name__ == '__main__':
    status = main()
    if status > 128:  # stopped by a signal: end by it, so make and a calling shell stop too
        stopping.die_by(status - 128)
    sys.exit(status)
