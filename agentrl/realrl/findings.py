"""What the real-model sweep's record says: seed bands, verdicts, Cui et al.'s entropy law, pass@k against the base.

Every function takes the record machinery.real_sweep writes (results/real_sweep.json) or parts of it, and returns
numbers or sentences; nothing here trains or samples.
"""
import json
import math

from agentrl.ch10 import ties
from agentrl.ch10.claims import seed_verdict
from agentrl.realrl import claims


def load_record(path=None):
    """The sweep's committed record (agentrl.paths.REAL_SWEEP, or path) -> dict; a missing file names the command
    that writes it."""
    from agentrl.paths import REAL_SWEEP

    path = REAL_SWEEP if path is None else path
    if not path.is_file():
        raise FileNotFoundError(f'{path} is missing: the real-model sweep writes it (make real-sweep)')
    return json.loads(path.read_text())


def complete_seeds(record, names):
    """The seeds (as ints, sorted) on which every one of `names` has a run in the record."""
    return sorted(int(seed) for seed, found in record['runs'].items() if all(name in found for name in names))


def runs_by_seed(record, seeds):
    return [record['runs'][str(seed)] for seed in seeds]


def verdicts(record, claim_list=None, min_seeds=3):
    """(judged, waiting): seed_verdict dicts of the claims whose runs exist on at least `min_seeds` seeds, and the
    keys of the others with how many seeds they have."""
    judged, waiting = [], []
    for claim in claims.CLAIMS if claim_list is None else claim_list:
        seeds = complete_seeds(record, claim.needs)
        if len(seeds) >= min_seeds:
            judged.append(seed_verdict(claim, runs_by_seed(record, seeds), seeds))
        else:
            waiting.append((claim.key, len(seeds)))
    return judged, waiting


def seed_band(record, name, key='entropy_sampled'):
    """A logged quantity of one setting per step over its seeds -> (steps, means, lows, highs), or None if no seed
    has the setting."""
    histories = [found[name]['history'] for found in record['runs'].values() if name in found]
    if not histories:
        return None
    steps = min(len(h) for h in histories)
    columns = [[h[t][key] for h in histories] for t in range(steps)]
    return (list(range(steps)), [sum(c) / len(c) for c in columns], [min(c) for c in columns],
            [max(c) for c in columns])


def fit_entropy_law(entropies, rewards):
    """Least-squares fit of Cui et al.'s R = -a * exp(H) + b -> (a, b). Linear in exp(H), so solved exactly."""
    if len(entropies) != len(rewards) or len(entropies) < 2:
        raise ValueError(f'the fit needs at least two (entropy, reward) pairs of equal count, got {len(entropies)} '
                         f'entropies and {len(rewards)} rewards')
    x = [math.exp(h) for h in entropies]
    mx, my = sum(x) / len(x), sum(rewards) / len(rewards)
    sxx = sum((v - mx) ** 2 for v in x)
    if sxx == 0:
        raise ValueError('the entropies are all equal: exp(H) has no spread to fit a slope to')
    slope = sum((v - mx) * (r - my) for v, r in zip(x, rewards)) / sxx
    return -slope, my - slope * mx


def law_forecast(history, fit_steps, entropy_key='entropy_sampled', reward_key='reward'):
    """Fit the law on a run's first `fit_steps` steps and forecast the reward of the rest from their entropy -> dict(a,
    b, law_error, flat_error): mean absolute errors of the law's forecast and of carrying the fitted steps' mean
    reward forward (the forecast the law has to beat)."""
    if not 2 <= fit_steps < len(history):
        raise ValueError(f'fit_steps must leave steps to forecast: 2 <= fit_steps < {len(history)}, got {fit_steps}')
    early, late = history[:fit_steps], history[fit_steps:]
    a, b = fit_entropy_law([s[entropy_key] for s in early], [s[reward_key] for s in early])
    law = [b - a * math.exp(s[entropy_key]) for s in late]
    flat = sum(s[reward_key] for s in early) / len(early)
    actual = [s[reward_key] for s in late]
    return dict(a=a, b=b, law_error=sum(abs(p - r) for p, r in zip(law, actual)) / len(late),
                flat_error=sum(abs(flat - r) for r in actual) / len(late))


def pass_gap(record, name, k):
    """A setting's pass@k less the base model's, per seed -> [gap]."""
    base = record['base']['evaluation']['pass_at_k'][k - 1]
    return [found[name]['evaluation']['pass_at_k'][k - 1] - base for found in record['runs'].values() if name in found]


def crossing_sentence(record, name, ks=(1, 32)):
    """Whether the trained setting's pass@k lead over the base model turns at large k, in words. With two seeds or
    more each gap is judged against its seeds' noise (ties.compare against zero, with Z standard errors of the
    mean); with one seed the gaps are given as measured, and the sentence says they are not judged."""
    parts, words = [], []
    for k in ks:
        gaps = pass_gap(record, name, k)
        mean = sum(gaps) / len(gaps)
        if len(gaps) < 2:
            words.append(ties.HIGHER if mean > 0 else ties.LOWER if mean < 0 else ties.TIED)
            parts.append(f'at k={k} {mean:+.3f} against the base')
            continue
        tol = ties.Z * ties.pooled_sd({name: gaps}) / math.sqrt(len(gaps))
        word = ties.compare(mean, 0.0, tol)
        words.append(word)
        shown = 'above' if word == ties.HIGHER else 'below' if word == ties.LOWER else 'tied with'
        parts.append(f'at k={k} {shown} the base by {mean:+.3f} (seed noise {tol:.3f})')
    crossed = words[0] == ties.HIGHER and words[-1] == ties.LOWER
    seeds = len(pass_gap(record, name, ks[0]))
    if seeds < 2:
        verdict = '; one seed, so not judged against noise' + ('; as measured the curves cross' if crossed else '')
    else:
        verdict = '; the curves cross' if crossed else '; no crossing beyond the noise'
    return f'{name}: ' + '; '.join(parts) + verdict


def pass_at_k_figure(record, names):
    """pass@k for k = 1..32 on the held-out prompts: the base model (black) and each setting's mean over its seeds,
    with the band from the lowest to the highest seed; k on a log scale."""
    from agentrl.plotting import COLORS, new_figure

    fig, axes = new_figure(1, 1, width=5.6, height=3.4)
    ax = axes[0][0]
    # one colour for every setting but 'none', which keeps its own: the figure can show the whole sweep
    palette = ['#4575b4', '#1a9850', '#984ea3', '#d73027', '#66c2a5', '#8c510a', '#fdae61', '#542788', '#b2182b',
               '#e7298a']
    base = record['base']['evaluation']['pass_at_k']
    ks = list(range(1, len(base) + 1))
    ax.plot(ks, base, color='black', lw=2, label='base model')
    colors = iter(palette)
    for name in names:
        curves = [runs[name]['evaluation']['pass_at_k'] for runs in record['runs'].values() if name in runs]
        if not curves:
            continue
        color = COLORS['none'] if name == 'none' else next(colors)
        columns = list(zip(*curves))
        ax.plot(ks, [sum(c) / len(c) for c in columns], color=color, lw=1.3,
                label=f'{name} ({len(curves)} seed{"s" * (len(curves) != 1)})')
        ax.fill_between(ks, [min(c) for c in columns], [max(c) for c in columns], color=color, alpha=0.12, lw=0)
    ax.set(xscale='log', xlabel='k (replies per held-out prompt)', ylabel='pass@k')
    ax.set_xticks([1, 2, 4, 8, 16, 32], labels=['1', '2', '4', '8', '16', '32'])
    ax.legend(fontsize=7, loc='lower right')
    return fig


# Figure 10.3's columns: the KL penalty at its strengths and its reset; the other on-policy regularisers; the three
# that act off-policy. 'none' (orange) is drawn in every panel as the chapter draws it.
FIGURE_COLUMNS = (('KL k3 0.3', 'KL k3 1.0', 'KL k3 0.3, reset at half'),
                  ('KL reward 0.3', 'entropy 0.03', 'temperature 1.3'),
                  ('clip-higher 0.28', 'Clip-Cov', 'KL-Cov'))
COLUMN_TITLES = ('KL k3 in the loss, and a reset', 'KL in the reward, bonus, temperature',
                 'off-policy: clip-higher, Clip-Cov, KL-Cov')
ENTROPY_TICKS = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5)
FIGURE_ROWS = (('entropy_sampled', 'entropy of the sampled tokens (nats, log)'), ('reward', 'training-batch reward'))


def entropy_curves_figure(record, columns=FIGURE_COLUMNS):
    """Figure 10.3 on SmolLM2: the sampling policy's entropy (top, log scale) and the training batch's reward
    (bottom) per step, each setting's mean over its seeds with the band from the lowest to the highest seed."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter

    from agentrl.plotting import COLORS, new_figure

    fig, axes = new_figure(len(columns), len(FIGURE_ROWS), width=4.2, height=2.8, sharex=True)
    palette = ['#4575b4', '#1a9850', '#984ea3', '#d73027', '#66c2a5', '#8c510a']
    for col, names in enumerate(columns):
        for row, (key, label) in enumerate(FIGURE_ROWS):
            ax = axes[row][col]
            for name, color in [('none', COLORS['none'])] + list(zip(names, palette)):
                band = seed_band(record, name, key)
                if band is None:
                    continue
                steps, means, lows, highs = band
                seeds = sum(name in found for found in record['runs'].values())
                ax.plot(steps, means, color=color, lw=1.4, label=f'{name} ({seeds} seed{"s" * (seeds != 1)})')
                ax.fill_between(steps, lows, highs, color=color, alpha=0.15, lw=0)
            ax.set(ylabel=label, xlabel='GRPO step' if row == len(FIGURE_ROWS) - 1 else None)
            if key.startswith('entropy'):  # a collapse is a ratio, and temperature 1.3 starts ten times higher
                ax.set_yscale('log')
                ax.yaxis.set_major_locator(FixedLocator(ENTROPY_TICKS))
                ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f'{value:g}'))
                ax.yaxis.set_minor_formatter(NullFormatter())
            if row == 0:
                ax.legend(fontsize=7)
                ax.set_title(COLUMN_TITLES[col] if col < len(COLUMN_TITLES) else None)
    return fig
