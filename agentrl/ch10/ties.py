"""When two measured numbers count as the same: the one tolerance every comparison sentence of the notebooks uses.

A number read off a run or a batch is one draw. Its spread over replicates (the five training seeds, or the ten
batch seeds of section 10.6) says how far two settings can sit apart by chance alone. The rule, stated once:

    two settings are tied when their difference is smaller than Z standard errors of that difference,

the standard error coming from the replicates' spread pooled over the settings compared. With a per-replicate
standard deviation s and means of n replicates on each side, the standard error of a difference is s * sqrt(2 / n);
a single draw (n = 1, the chapter's seed 0) has the widest tolerance.
"""
import math

Z = 2.0  # two standard errors: a gap a fair coin of noise reaches about one time in twenty

HIGHER, LOWER, TIED = 'higher', 'lower', 'tied'


def pooled_sd(replicates):
    """The spread of one replicate, pooled over settings: sqrt of the mean sample variance.

    replicates: {setting: [value on each seed or batch]}; settings with fewer than two values add nothing."""
    variances = []
    for name, values in replicates.items():
        values = [float(v) for v in values]
        if any(not math.isfinite(v) for v in values):
            raise ValueError(f'replicates of {name!r} hold a value that is not a finite number: {values}')
        if len(values) >= 2:
            mean = sum(values) / len(values)
            variances.append(sum((v - mean) ** 2 for v in values) / (len(values) - 1))
    if not variances:
        raise ValueError('a tolerance needs at least one setting with two or more replicates, got '
                         f'{ {name: len(values) for name, values in replicates.items()} }')
    return math.sqrt(sum(variances) / len(variances))


def tolerance(replicates, n_each=1):
    """Below this gap two settings are tied: Z * pooled_sd * sqrt(2 / n_each).

    n_each: how many replicates each compared number averages (1 for one seed's or one batch's value)."""
    if isinstance(n_each, bool) or not isinstance(n_each, int) or n_each < 1:
        raise ValueError(f'n_each must be a whole number of replicates >= 1, got {n_each!r}')
    return Z * pooled_sd(replicates) * math.sqrt(2.0 / n_each)


def compare(value, other, tol):
    """'higher', 'lower' or 'tied': value against other, a gap below tol being no gap."""
    if not (math.isfinite(value) and math.isfinite(other) and math.isfinite(tol) and tol >= 0):
        raise ValueError(f'compare needs finite numbers and a tolerance >= 0, got {value!r}, {other!r}, {tol!r}')
    if abs(value - other) < tol or value == other:  # equal values tie even where the spread is zero
        return TIED
    return HIGHER if value > other else LOWER


def leaders(values, tol):
    """The settings tied with the highest value -> [names], highest first (one name when a setting leads clearly)."""
    if not values:
        raise ValueError('leaders needs at least one value')
    best = max(values.values())
    return sorted((name for name, v in values.items() if compare(v, best, tol) == TIED),
                  key=lambda name: -values[name])


def rule_sentence(tol, what, replicates_word, n_replicates, n_each=1, fmt='.3f'):
    """The rule as a reader meets it, with the tolerance it gives for one quantity."""
    each = 'one draw' if n_each == 1 else f'means of {n_each}'
    return (f'Two {what} values are called tied when they differ by less than {tol:{fmt}}: {Z:g} standard errors of '
            f'a difference between {each}, from the spread over {n_replicates} {replicates_word}.')
