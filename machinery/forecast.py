"""How long a fresh `make` would take with more worker processes, worked out from one measured on this machine.

A fresh `make` run with AGENTRL_RUN_TIMES=FILE writes one line per trained run (agentrl/run_times.py): its seconds,
and the batch of runs it was trained with. Each run trains single-threaded in its own worker, so with W workers a
batch takes as long as the W workers need to share its runs out in the order they came (list scheduling, each run to
the first worker free). The forecast keeps everything else of the measured `make` (the RL base, the notebooks' own
work) as it was and replaces each batch's time on the measured worker count by its time on W:

    forecast(W) = measured total - sum over batches of span(batch, measured W) + sum over batches of span(batch, W)

It assumes that a run takes as long beside W - 1 others as beside one, which holds while the machine has a core per
worker; it is a forecast, not a measurement.

Usage: python -m machinery.forecast --times FILE --total SECONDS [--workers 2 4 8]
"""
import argparse
import heapq
import json
from collections import defaultdict


def span(seconds, workers):
    """Wall-clock seconds for runs of the given lengths, in that order, on `workers` workers (list scheduling)."""
    if workers < 1:
        raise ValueError(f'workers must be >= 1, got {workers}')
    free = [0.0] * min(workers, max(len(seconds), 1))
    for length in seconds:
        heapq.heappush(free, heapq.heappop(free) + length)
    return max(free) if seconds else 0.0


def batches(lines):
    """{batch: (workers it had, [seconds of each run, in the order they were written])}."""
    found = defaultdict(lambda: [0, []])
    for line in lines:
        entry = found[line['batch']]
        entry[0] = line['workers']
        entry[1].append(line['seconds'])
    return {batch: (workers, runs) for batch, (workers, runs) in found.items()}


def forecast(lines, total, workers):
    """The measured total with each batch's span on its own worker count replaced by its span on `workers`."""
    found = batches(lines)
    measured = sum(span(runs, had) for had, runs in found.values())
    return total - measured + sum(span(runs, workers) for _, runs in found.values())


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--times', required=True, help='the JSON lines a make run wrote to $AGENTRL_RUN_TIMES')
    parser.add_argument('--total', type=float, required=True, help="that make's wall-clock seconds")
    parser.add_argument('--workers', type=int, nargs='+', default=[2, 4, 8])
    args = parser.parse_args(argv)
    with open(args.times, encoding='utf-8') as f:
        lines = [json.loads(line) for line in f if line.strip()]
    found = batches(lines)
    print(f'{len(lines)} trained runs in {len(found)} batches, {sum(line["seconds"] for line in lines) / 60:.1f} '
          f'run-minutes; measured make {args.total / 60:.1f} min')
    for workers in args.workers:
        print(f'{workers} workers: {forecast(lines, args.total, workers) / 60:.1f} min')
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
