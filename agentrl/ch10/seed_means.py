"""A tied claim read on the means over its seeds: a second look, reported beside the seed rule's verdict, never in it.

The seed rule judges each seed's draw against the one-draw tolerance, so a gap that is small against one draw's noise
is tied on every seed even when all the seeds lean the same way. Averaging n seeds shrinks the noise by sqrt(n):
`ties.tolerance(..., n_each=n)`. This look was added after the runs it reads had been seen, so it never changes a
verdict; it only says whether the seeds, taken together, settle what each seed alone could not.
"""
from agentrl.ch10 import ties
from agentrl.ch10.claims import QUANTITIES, bound_tolerance, gap_tolerance


def mean(values):
    values = list(values)
    return sum(values) / len(values)


def gap_means(claim, runs_by_seed):
    """Each gap and bound of `claim` on the means over the seeds (runs_by_seed[i]: seed i's runs) -> [dict(label, want,
    mean_a, mean_b, tolerance, word)], the tolerance being that of means of len(runs_by_seed) draws (a bound's
    threshold, mean_b, has no noise of its own)."""
    n = len(runs_by_seed)
    found = []
    for gap in claim.gaps:
        (what_a, a), (what_b, b) = gap.sides()
        mean_a = mean(QUANTITIES[what_a](runs[a]) for runs in runs_by_seed)
        mean_b = mean(QUANTITIES[what_b](runs[b]) for runs in runs_by_seed)
        tol = gap_tolerance(gap, runs_by_seed, claim.pool, n_each=n)
        found.append(dict(label=f'{gap.what} of {a} against {b}', want=gap.want, mean_a=mean_a, mean_b=mean_b,
                          tolerance=tol, word=ties.compare(mean_a, mean_b, tol)))
    for bound in claim.bounds:
        mean_a = mean(bound.read(runs) for runs in runs_by_seed)
        tol = bound_tolerance(bound, runs_by_seed, n_each=n)
        found.append(dict(label=f'{bound.what} against the threshold {bound.value:g}', want=bound.want, mean_a=mean_a,
                          mean_b=bound.value, tolerance=tol, word=ties.compare(mean_a, bound.value, tol)))
    return found


def settled(found):
    """'holds' if every gap goes the claimed way beyond its tolerance, 'does not hold' if some gap goes the other way
    beyond it, else 'tied'."""
    if any(g['word'] not in (ties.TIED, g['want']) for g in found):
        return 'does not hold'
    return 'tied' if any(g['word'] == ties.TIED for g in found) else 'holds'


def means_sentence(claim, runs_by_seed):
    """One sentence: what the means over the seeds say of a claim with gaps or bounds (None for one with neither)."""
    found = gap_means(claim, runs_by_seed)
    if not found:
        return None
    n = len(runs_by_seed)
    inside = [g for g in found if g['word'] == ties.TIED]
    wrong = [g for g in found if g['word'] not in (ties.TIED, g['want'])]
    word = settled(found)
    detail = '; '.join(f'{g["label"]}: {g["mean_a"] - g["mean_b"]:+.3f} (tolerance {g["tolerance"]:.3f})'
                       for g in (wrong or inside or found)[:3])
    more = len(wrong or inside or found) - 3
    said = {'holds': f'{_gaps(len(found), len(found))} {_verb(len(found), "goes", "go")} the claimed way beyond the '
                     f'tolerance of means of {n}',
            'tied': f'{_gaps(len(inside), len(found))} {_verb(len(inside), "stays", "stay")} inside the tolerance of '
                    f'means of {n}',
            'does not hold': f'{_gaps(len(wrong), len(found))} {_verb(len(wrong), "goes", "go")} against it beyond '
                             f'the tolerance of means of {n}'}
    return (f'On the means over the {n} seeds (a second look, added after these runs were seen, which does not change '
            f'the verdict): {said[word]}, so taken together the seeds say it {"is " if word == "tied" else ""}*{word}* ({detail}'
            + (f'; {more} more' if more > 0 else '') + ').')


def _gaps(k, n):
    """'its one gap', 'both gaps', 'all 6 gaps', '2 of its 4 gaps' (a threshold counts as a gap to it)."""
    if k == n:
        return 'its one gap' if n == 1 else 'both gaps' if n == 2 else f'all {n} gaps'
    return f'{k} of its {n} gaps'


def _verb(k, one, many):
    return one if k == 1 else many
