"""How a calibration record's numbers are written in words: read by the search and by `make report` alike.

Kept apart from machinery/search (which needs Optuna, a maintainers' tool), so that `make`, whose report reads the
committed records, runs with the readers' requirements alone.
"""


def duration(seconds):
    """3725 -> '1 h 02 min'."""
    minutes = round(seconds / 60)
    return f'{minutes // 60} h {minutes % 60:02d} min'


def band(row):
    """A calibration row's band: 'low-high', '<= high', '>= low' or 'any'."""
    fmt, low, high = row.get('fmt') or '{:.3g}', row.get('low'), row.get('high')
    if low is None and high is None:
        return 'any'
    if low is None:
        return f'<= {fmt.format(high)}'
    if high is None:
        return f'>= {fmt.format(low)}'
    return f'{fmt.format(low)}-{fmt.format(high)}'


def count(n, word):
    """(1, 'trial') -> '1 trial'; (2, 'trial') -> '2 trials'."""
    return f'{n} {word}' + ('' if n == 1 else 's')


def seeds(seeds):
    """0, 1, 2 -> '0-2'; other lists comma-separated."""
    seeds = list(seeds or [])
    if len(seeds) > 2 and seeds == list(range(seeds[0], seeds[0] + len(seeds))):
        return f'{seeds[0]}-{seeds[-1]}'
    return ', '.join(map(str, seeds))


def counts(recs):
    """{state: how many of the trial records are in it}."""
    states = [r['state'] for r in recs]
    return {state: states.count(state) for state in ('COMPLETE', 'PRUNED', 'FAIL', 'RUNNING', 'WAITING')}
