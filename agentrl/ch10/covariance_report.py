"""The covariance mechanism during training, as notebook 09 tabulates and reads it: each batch's covariance term
against the entropy change its update caused, per seed."""
import math


def number(x, spec):
    """x formatted by spec, with a negative zero printed as zero."""
    text = f'{x:{spec}}'
    return text if float(text) != 0 or not text.startswith('-') else f'{0.0:{spec}}'


def correlation(xs, ys):
    """Pearson correlation of two equal-length lists (plain floats)."""
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / math.sqrt(sum((x - mx) ** 2 for x in xs)
                                                                       * sum((y - my) ** 2 for y in ys))


def series(probed, key):
    """{seed: the logged `key` of every step of that seed's probed run}."""
    return {s: [step[key] for step in run['history']] for s, run in probed.items()}


def summaries(cov, change):
    """{seed: steps, mean covariance, steps with a positive one, mean entropy change, steps where the entropy moved
    against the covariance's sign, their correlation}."""
    found = {}
    for s in cov:
        c, d = cov[s], change[s]
        found[s] = dict(steps=len(c), mean_covariance=sum(c) / len(c), positive_steps=sum(x > 0 for x in c),
                        mean_entropy_change=sum(d) / len(d),
                        opposite_steps=sum((x > 0) != (y > 0) for x, y in zip(c, d)),
                        correlation=correlation(c, d))
    return found


def table_lines(found):
    """The printed block: one line per seed."""
    lines = ['seed | steps | mean covariance | positive on | mean entropy change | entropy moved against it'
             ' | correlation']
    for s, m in found.items():
        lines.append(f'{s:>4} | {m["steps"]:5} | {number(m["mean_covariance"], "+15.4f")} | {m["positive_steps"]:>5} '
                     f'steps | {number(m["mean_entropy_change"], "+19.5f")} | {m["opposite_steps"]:>18} steps'
                     f' | {number(m["correlation"], "+11.3f")}')
    return lines


def reading(found):
    """Markdown: whether the sign and the size of the entropy change follow the covariance, over every seed."""
    total = sum(m['steps'] for m in found.values())
    against = sum(m['opposite_steps'] for m in found.values())
    positive = sum(m['positive_steps'] for m in found.values())
    corrs = [m['correlation'] for m in found.values()]
    size_reading = (f'the correlation is negative on every seed ({number(min(corrs), "+.3f")} to '
                    f'{number(max(corrs), "+.3f")}), so a larger covariance also goes with a larger fall'
                    if max(corrs) < 0 else
                    f'the correlation between the two ranges from {number(min(corrs), "+.3f")} to '
                    f'{number(max(corrs), "+.3f")}'
                    ' across seeds, not reliably negative: step to step, the size of the covariance does not predict '
                    'the size of the fall')
    return (f'**Sign: {"as predicted" if against > total / 2 else "not as predicted"}.** '
            f'Over {len(found)} seeds the covariance '
            f'term is positive on {positive} of {total} steps (Cui et al. report it staying mostly positive too), and '
            f'the entropy moves against it on {against} of {total}. **Size: '
            f'{"as predicted" if max(corrs) < 0 else "not seen"}.** '
            f'{size_reading[0].upper() + size_reading[1:]}. The identity is first order in the logit change of one '
            'plain gradient step; our updates go through Adam and the PPO clip over several minibatches, which keeps '
            'the direction of the push but need not keep its size.')


def legend(found, cov_scale, change_scale):
    """The figure's legend entries: the two scaled series of the left panel, and each seed's correlation."""
    names = {s: f'seed {s} (correlation {number(m["correlation"], "+.2f")})' for s, m in found.items()}
    return {**names, 'covariance': f'covariance term before the update (/ {cov_scale:.3f})',
            'change': f'entropy change of the update (/ {change_scale:.3f} nats)'}
