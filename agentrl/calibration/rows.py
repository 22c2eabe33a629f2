"""The calibration rows: the 26 numbers of the book the substrate was fitted to, each with the band a substrate's
measurement must fall in, where chapter 10 shows it, and how a set of measurements is judged against them.

Every row is a number of the RL base, of the unregularised run (the row 'none' of the 10.7 table, the trajectory of
10.8, chapter 9's 80-step run) or of the single 10.6 batch at clip_high 0.2, which is pushed at 10.6's own learning
rate for its 8 steps. Most are printed in the chapter's output blocks (fitted_counts: the others are stated in its
prose or derived from its numbers), so a reader comparing those outputs with ours is comparing numbers the substrate
was fitted to. No regularised setting is a row: only the regularised settings of the chapter were held out.
"""
import dataclasses


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
    shown: str = ''  # where chapter 10 shows the book's value (SHOWN_KINDS names the first word)

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


# The calibration rows: each a number chapter 10 shows (printed, stated or derived) of the RL base, the unregularised
# run or the 10.6 batch, with its
# band (a step with no learning signal makes no update, so it clips nothing). The one-sided bands' widths (scale) were
# fixed with the search's rules, before it ran.
ROWS = [
    RowSpec('vocabulary', '316', 280, 350, lambda m: m['vocab'], '{:.0f}',
            shown='prose 10.6 and 10.7 (the vocabulary of log V)'),
    RowSpec('TinyAgent parameters', '157,244', 140_000, 175_000, lambda m: m['params'], '{:,.0f}',
            shown='output 10.8 (the memory table)'),
    RowSpec('policy tokens per episode (RL base)', '12-14', 10, 16, lambda m: _at(m['run40'], 0)['policy_tokens'], '{:.1f}',
            shown='prose 10.7 (the reward placement)'),
    RowSpec('RL base: reads per episode', '0.21-0.24', 0.15, 0.30, lambda m: _at(m['run40'], 0)['reads'], '{:.3f}',
            shown="prose 10.8 (chapter 9's measurement)"),
    RowSpec('RL base: batch reward', '0.17', 0.12, 0.24, lambda m: _at(m['run40'], 0)['reward'], '{:.3f}',
            shown='output 10.8 (the trajectory of none, step 0)'),
    RowSpec('RL base: policy-token entropy', '0.52-0.57', 0.47, 0.62, lambda m: _at(m['run40'], 0)['entropy'], '{:.3f}',
            shown='output 10.7 and 10.8 (the start of every run)'),
    RowSpec('RL base batch of 10.6: A>0 policy tokens', '121', 90, 150, lambda m: m['rewarded'], '{:.1f}', 'batch',
            shown='output 10.6 (the single batch)'),
    RowSpec('that batch: share of A>0 tokens with pi_old < 0.5', '14%', 0.08, 0.22,
            lambda m: m['rare'] / max(m['rewarded'], 1), '{:.1%}', 'batch',
            shown='derived from 17 of 121 in the output of 10.6'),
    RowSpec('that batch, clip_high 0.2, lr 1e-3, 8 full-batch steps: last-step clip_frac', '0.114', 0.07, 0.17,
            lambda m: m['last_clip_frac'], '{:.3f}', 'batch',
            shown='output 10.6 (the single batch)'),
    RowSpec('that batch: entropy after minus before (not higher)', 'falls', None, 0.0,
            lambda m: m['entropy_after'] - m['entropy_before'], '{:+.3f}', 'batch', scale=0.1,
            shown='output 10.6 (the single batch, 0.547 -> 0.538)'),
    RowSpec('none, 40 steps: batch reward at step 5', '0.22', None, 0.32, lambda m: _at(m['run40'], 5)['reward'], '{:.3f}',
            scale=0.2,
            shown='output 10.8 (the trajectory of none)'),
    RowSpec('none: batch reward at step 10', '0.41', 0.30, 0.52, lambda m: _at(m['run40'], 10)['reward'], '{:.3f}',
            shown='output 10.8 (the trajectory of none)'),
    RowSpec('none: batch reward at step 20', '0.72', 0.60, 0.82, lambda m: _at(m['run40'], 20)['reward'], '{:.3f}',
            shown='output 10.8 (the trajectory of none)'),
    RowSpec('none: batch reward at step 39', '0.86', 0.78, 0.94, lambda m: _at(m['run40'], 39)['reward'], '{:.3f}',
            shown='output 10.8 (the trajectory of none)'),
    RowSpec('none: policy-token entropy at step 10', '0.37', 0.30, 0.45, lambda m: _at(m['run40'], 10)['entropy'], '{:.3f}',
            shown='output 10.8 (the trajectory of none)'),
    RowSpec('none: policy-token entropy at step 20', '0.18', 0.13, 0.25, lambda m: _at(m['run40'], 20)['entropy'], '{:.3f}',
            shown='output 10.8 (the trajectory of none)'),
    RowSpec('none: policy-token entropy, mean of steps 35-39', '0.120', 0.08, 0.16,
            lambda m: _entropy_late(m['run40'], 35, 40), '{:.3f}',
            shown='output 10.7 (row none)'),
    RowSpec('none: reads per episode at step 39', '0.98', 0.90, None, lambda m: _at(m['run40'], 39)['reads'], '{:.3f}',
            scale=0.1,
            shown='output 10.7 (row none)'),
    RowSpec('none: share of tokens clipped over the run', '0.13%', 0.0005, 0.0030,
            lambda m: mean([h.get('clip_frac', 0.0) for h in m['run40']]), '{:.2%}',
            shown="prose 10.6 (chapter 9's defaults)"),
    RowSpec('none, held-out (16 attempts x 10 tasks): pass@1', '0.725', 0.62, 0.82, lambda m: m['heldout']['pass1'],
            '{:.3f}',
            shown='output 10.7 (row none)'),
    RowSpec('none, held-out: pass@8', '0.800', 0.70, 0.90, lambda m: m['heldout']['pass8'], '{:.3f}',
            shown='output 10.7 (row none)'),
    RowSpec('none, held-out: distinct action sequences', '4.3', 3.0, 6.0, lambda m: m['heldout']['distinct'], '{:.2f}',
            shown='output 10.7 (row none)'),
    RowSpec('none, held-out: invalid calls per episode', '0.04', None, 0.10, lambda m: m['heldout']['invalid'],
            '{:.3f}', scale=0.1,
            shown='output 10.7 (row none)'),
    RowSpec('none, held-out: KL from start', '0.237', 0.16, 0.32, lambda m: m['heldout']['kl_start'], '{:.3f}',
            shown='output 10.7 (row none)'),
    RowSpec('none, 80 steps: final entropy (mean of steps 75-79)', '0.08', 0.05, 0.11,
            lambda m: _entropy_late(m['run80'], 75, 80), '{:.3f}',
            shown="prose at the chapter's opening (chapter 9's 80-step run)"),
    RowSpec('none: 80-step final entropy minus the 40-step one (below)', '-0.04', None, -1e-9,
            lambda m: _entropy_late(m['run80'], 75, 80) - _entropy_late(m['run40'], 35, 40), '{:+.3f}', scale=0.04,
            shown='derived from 0.08 in the prose and 0.12 in the output of 10.7'),
]


SHOWN_KINDS = ('output', 'prose', 'derived')  # printed in an output block of the chapter, stated in its prose, or
#                                              computed from numbers it shows


def fitted_counts(rows=None):
    """{kind: how many rows} for SHOWN_KINDS: how many of the numbers the substrate was fitted to the chapter prints in
    its output blocks, states in its prose, or lets a reader compute from them."""
    rows = ROWS if rows is None else rows
    kinds = [spec.shown.split()[0] for spec in rows]
    unknown = sorted(set(kinds) - set(SHOWN_KINDS))
    if unknown:
        raise ValueError(f'calibration rows shown as {unknown}; a row is shown as one of {SHOWN_KINDS}')
    return {kind: kinds.count(kind) for kind in SHOWN_KINDS}


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
