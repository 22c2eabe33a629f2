"""`make calibrate`: a substrate against its 26 calibration rows, on seeds 0-4 (push rows: batch seeds 0-9).

The rows (agentrl/calibration/rows.py) are numbers chapter 10 shows (most printed, some stated in its prose or derived)
of the RL base, the unregularised default GRPO run and the single 10.6 batch, nothing else; no regularised setting of chapter 10 is run here. For each seed this trains the default run for 80
steps, keeps the policy it had after 40, and evaluates that one on the held-out tasks (16 attempts on each of
the 10). For each batch seed it pushes one RL-base batch (the one section 10.6 uses, drawn with that seed)
through 8 full-batch clipped-surrogate steps at clip_high 0.2. It prints one row per quantity: the book's
value, the band the mean must fall in, ours (mean, then each seed), and whether it holds. Exit status 1 if a
row does not hold.

`--candidate c18` measures a named configuration (agentrl.substrate.config.CANDIDATES) and `--config JSON` any
SubstrateConfig description, beside the default and without changing it. `--protocol confirmation` uses the
confirmation seeds 5-9 (batch seeds 10-19; the search's fallback chose trial 45 on
them). `--scheduler tcp://host:8786` (default: $AGENTRL_DASK_SCHEDULER) measures on
that Dask cluster's workers instead of local processes.
"""
import argparse
import dataclasses
import json
import sys

from agentrl import executors, stopping
from agentrl.atomic import atomic_output
from agentrl.calibration.measure import CONFIRMATION, SEARCH, measure
from agentrl.calibration.rows import band_distance, band_text, judge, rows_held
from agentrl.calibration.substrates import substrate_config
from agentrl.substrate.config import CANDIDATES, DEFAULT, SubstrateConfig


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
