"""Notebook 15's sentences and tables, written from the real-model sweep's record (results/real_sweep.json) and the
verdicts TinyAgent's notebooks recorded. Nothing here trains; every number printed is read or computed here.

Two values of a quantity are compared by the project's tie rule (agentrl.ch10.ties) once each side has at least two
seeds; with one seed there is no noise to judge a gap against, and the sentence says it is one seed.
"""
import html

from agentrl import prose
from agentrl.ch10 import ties
from agentrl.ch10.claims import count_phrase
from agentrl.realrl import claims, findings

ORDER = claims.ARMS + tuple(name for name in claims.SETTINGS if name not in claims.ARMS)
MIN_SEEDS = 3  # a claim is judged once every run it reads exists on this many seeds (the seed rule)


def swept(record):
    """The settings with at least one run in the record, in claims.SETTINGS' order."""
    found = {name for runs in record['runs'].values() for name in runs}
    return [name for name in ORDER if name in found]


def unswept(record, claim):
    """The settings `claim` reads that the sweep runs only when asked (outside claims.ARMS) and the record has no run
    of: such a claim is not waiting for seeds, it was not run."""
    present = set(swept(record))
    return [name for name in claim.needs if name not in claims.ARMS and name not in present]


def waiting_phrase(record, waiting):
    """'2 wait for seeds; 1 was not run (needing entropy 0.1, which the sweep runs only when asked).', or '' when
    nothing waits."""
    by_key = {claim.key: claim for claim in claims.CLAIMS}
    not_run = {key: names for key, _ in waiting if (names := unswept(record, by_key[key]))}
    parts = []
    if len(waiting) > len(not_run):
        parts.append(f'{len(waiting) - len(not_run)} wait for seeds')
    if not_run:
        names = ', '.join(dict.fromkeys(name for needs in not_run.values() for name in needs))
        verb = 'was' if len(not_run) == 1 else 'were'
        parts.append(f'{len(not_run)} {verb} not run (needing {names}, which the sweep runs only when asked)')
    return '; '.join(parts) + '.' if parts else ''


def values(record, name, quantity):
    """A claims.QUANTITIES quantity of one setting, one value per seed that has it (seeds in increasing order)."""
    seeds = sorted(int(seed) for seed, runs in record['runs'].items() if name in runs)
    return [claims.QUANTITIES[quantity](record['runs'][str(seed)][name]) for seed in seeds]


def mean(xs):
    return sum(xs) / len(xs)


def spread(xs, digits=3):
    """'0.470' for one seed, '0.470 (0.41-0.52)' for several: the mean and the range over seeds."""
    if len(xs) == 1:
        return f'{xs[0]:.{digits}f}'
    return f'{mean(xs):.{digits}f} ({min(xs):.{digits - 1}f}-{max(xs):.{digits - 1}f})'


def compare_words(a_values, b_values):
    """'higher', 'lower' or 'tied' (the tie rule, on the means of the seeds), or None when a side has one seed."""
    if len(a_values) < 2 or len(b_values) < 2:
        return None
    n_each = min(len(a_values), len(b_values))
    tol = ties.tolerance({'a': a_values, 'b': b_values}, n_each=n_each)
    return ties.compare(mean(a_values), mean(b_values), tol)


def gap_phrase(record, quantity, a, b):
    """'{a} ended higher than {b} in {quantity} (0.40 against 0.09, beyond the seeds' noise)', a tie said as one, or
    the one-seed reading said as such."""
    va, vb = values(record, a, quantity), values(record, b, quantity)
    word = compare_words(va, vb)
    numbers = f'{mean(va):.3f} against {mean(vb):.3f}'
    if word is None:
        seeds = min(len(va), len(vb))
        side = 'higher' if mean(va) > mean(vb) else 'lower' if mean(va) < mean(vb) else 'equal'
        return f'{a}: {quantity} {side} than {b} ({numbers}; {seeds} seed, not yet judged against noise)'
    if word == ties.TIED:
        return f'{a} and {b} are tied in {quantity} ({numbers}: the gap is inside the seeds\' noise)'
    return f'{a}: {quantity} {word} than {b} ({numbers}, beyond the seeds\' noise)'


def run_table(record):
    """Markdown lines: each swept setting's seeds, entropy at the start and the end, KL from the base, format,
    held-out pass@1 and pass@32, the wall time of its fastest seed (a run that shared the machine took longer) and
    the peak memory of any; the base model first."""
    lines = ['| setting | seeds | entropy, first 5 steps | entropy, last 5 steps | KL to the base, last 5 | '
             'in format, last 5 | held-out pass@1 | held-out pass@32 | minutes, fastest seed | peak GB |',
             '|---|---|---|---|---|---|---|---|---|---|']
    base = record.get('base')
    if base is not None:
        curve = base['evaluation']['pass_at_k']
        lines.append(f'| base model (no training) | – | – | – | – | – | {curve[0]:.3f} | {curve[-1]:.3f} | '
                     f'{base["seconds"] / 60:.1f} | {base["peak_rss_mb"] / 1024:.2f} |')
    for name in swept(record):
        found = [runs[name] for _, runs in sorted(record['runs'].items(), key=lambda kv: int(kv[0])) if name in runs]
        fmt = [1 - v for v in values(record, name, 'out of format')]
        lines.append(
            f'| {name} | {len(found)} | {spread(values(record, name, "start entropy"))} | '
            f'{spread(values(record, name, "final entropy"))} | {spread(values(record, name, "KL from start"))} | '
            f'{spread(fmt, 2)} | {spread(values(record, name, "pass@1"))} | '
            f'{spread([run["evaluation"]["pass_at_k"][-1] for run in found])} | '
            f'{min(run["seconds"] for run in found) / 60:.1f} | '
            f'{max(run["peak_rss_mb"] for run in found) / 1024:.2f} |')
    return lines


def tiny_verdicts(seed_verdicts, claim_table):
    """{claim key: (TinyAgent's verdict word, that verdict with its seed counts, the label across the six substrates)}
    from the records of notebooks 09 ('seed_verdicts') and 11 ('claim_table')."""
    labels = {row['key']: row['label'] for row in claim_table}
    return {v['key']: (v['verdict'], count_phrase(v), labels.get(v['key'], '–')) for v in seed_verdicts}


def verdict_rows(record, tiny, min_seeds=MIN_SEEDS):
    """Markdown lines: each real-model claim's verdict (or how many seeds it waits for) beside TinyAgent's, and
    whether the two verdict words agree."""
    judged, waiting = findings.verdicts(record, min_seeds=min_seeds)
    by_key = {v['key']: v for v in judged}
    waits = dict(waiting)
    lines = ['| claim | kind | SmolLM2-135M | TinyAgent (t45, 5 seeds) | across six substrates | same verdict? |',
             '|---|---|---|---|---|---|']
    for claim in claims.CLAIMS:
        tiny_word, tiny_phrase, label = tiny.get(claim.key, (None, 'not a TinyAgent claim', '–'))
        if claim.key in by_key:
            real = count_phrase(by_key[claim.key])
            same = '–' if tiny_word is None else 'yes' if tiny_word == by_key[claim.key]['verdict'] else 'no'
        elif unswept(record, claim):
            real, same = f'not run: needs {", ".join(unswept(record, claim))}, which the sweep runs only when asked', '–'
        else:
            real, same = f'waiting: runs on {waits[claim.key]} of {min_seeds} seeds', '–'
        lines.append(f'| {claim.text} | {claim.kind} | {real} | {tiny_phrase} | {label} | {same} |')
    return lines


def law_rows(record, fit_steps):
    """Markdown lines: Cui et al.'s law fitted on each run's first fit_steps steps (sampled-token entropy against the
    batch reward), its forecast error on the remaining steps against carrying the fitted mean forward."""
    lines = ['| setting | seed | a | b | law\'s error | flat forecast\'s error | better forecast |',
             '|---|---|---|---|---|---|---|']
    better = total = 0
    for name in swept(record):
        for seed in sorted(int(s) for s, runs in record['runs'].items() if name in runs):
            try:
                fit = findings.law_forecast(record['runs'][str(seed)][name]['history'], fit_steps)
            except ValueError as error:  # every fitted step at one entropy: no slope to fit
                lines.append(f'| {name} | {seed} | – | – | – | – | not fitted: {error} |')
                continue
            wins = fit['law_error'] < fit['flat_error']
            better += wins
            total += 1
            lines.append(f'| {name} | {seed} | {fit["a"]:.3f} | {fit["b"]:.3f} | {fit["law_error"]:.3f} | '
                         f'{fit["flat_error"]:.3f} | {"the law" if wins else "flat"} |')
    return lines, better, total


def law_sentence(better, total, fit_steps, steps):
    if not total:
        return 'No run could be fitted.'
    return (f'Fitted on the first {fit_steps} of {steps} steps, the law forecast the later batch reward better than '
            f'the flat forecast on {better} of {total} runs.')


def replies_table(record, name, seed, steps, shown=2):
    """Markdown lines: the first `shown` logged replies of one run at the given steps, one row each."""
    history = record['runs'][str(seed)][name]['history']
    lines = ['| step | reward of the batch | reply |', '|---|---|---|']
    for step in steps:
        row = history[step]
        for reply in row['replies'][:shown]:
            text = html.escape(reply, quote=False).replace('|', '\\|').replace('\n', '<br>')
            lines.append(f'| {step} | {row["reward"]:.2f} | <code>{text}</code> |')
    return lines


def found_bullets(record, tiny, min_seeds=MIN_SEEDS):
    """The notebook's opening bullets, each read off the record."""
    names = swept(record)
    seeds = {name: len(values(record, name, 'pass@1')) for name in names}
    complete = findings.complete_seeds(record, claims.ARMS)
    hours = (sum(run['seconds'] for runs in record['runs'].values() for run in runs.values())
             + (record['base']['seconds'] if record.get('base') else 0)) / 3600
    cpus = sorted({f'{s["cpu"]} ({s["cpus"]} cores)' for s in record['sessions'] if s.get('runs')})
    out = [f'The record holds {sum(seeds.values())} runs of {record["steps"]} GRPO steps on the level '
           f'`{record["level"]}`: {len(names)} settings, the ten judged settings complete on '
           f'{len(complete)} seed{"s" * (len(complete) != 1)} ({", ".join(map(str, complete)) or "none yet"}); '
           f'{hours:.1f} hours of training on {", ".join(cpus)}.']
    if 'none' in names:
        start, end = values(record, 'none', 'start entropy'), values(record, 'none', 'final entropy')
        ratio = [e / s for s, e in zip(start, end)]
        out.append(f'Without regularisation the entropy of the policy fell from {spread(start)} nats in the first '
                   f'{claims.WINDOW} steps to {spread(end)} in the last {claims.WINDOW}: {mean(ratio):.2f} of its '
                   f'start ({seeds["none"]} seed{"s" * (seeds["none"] != 1)}).')
    for a, b, quantity in (('KL k3 1.0', 'none', 'final entropy'), ('KL k3 1.0', 'none', 'KL from start'),
                           ('entropy 0.03', 'none', 'final entropy'), ('none', 'KL k3 1.0', 'pass@1')):
        if a in names and b in names:
            out.append(gap_phrase(record, quantity, a, b) + '.')
    if 'none' in names and record.get('base'):
        out.append(findings.crossing_sentence(record, 'none') + '.')
    judged, waiting = findings.verdicts(record, min_seeds=min_seeds)
    words = [v['verdict'] for v in judged]
    counts = prose.counts_phrase(words) or 'none yet'
    agree = sum(1 for v in judged if v['key'] in tiny and tiny[v['key']][0] == v['verdict'])
    out.append(f'Of the {len(claims.CLAIMS)} claims, {len(judged)} have their runs on {min_seeds} seeds and are judged '
               f'({counts}); {agree} of them get the verdict TinyAgent got. {waiting_phrase(record, waiting)}'.rstrip())
    return ['- ' + line for line in out]


def crossing_lines(record, names):
    """One crossing_sentence per swept setting of `names`, as bullets."""
    return ['- ' + findings.crossing_sentence(record, name) for name in names if name in swept(record)]



def session_lines(record):
    """Markdown lines: each sweep session that trained runs, with its date, machine, where the runs went and which."""
    lines = ['| session | machine | trained on | runs | hours |', '|---|---|---|---|---|']
    by_label = {f'{name} | seed {seed}': run for seed, named in record['runs'].items() for name, run in named.items()}
    for number, session in enumerate(record['sessions'], 1):
        if not session.get('runs'):
            continue
        where = session.get('scheduler', 'this process')
        workers = session.get('workers')
        where += f', {workers} worker{"s" * (workers != 1)}' if workers else ''
        hours = sum(by_label[label]['seconds'] for label in session['runs'] if label in by_label) / 3600
        seeds = {}
        for label in session['runs']:  # 'KL k3 0.3 | seed 1'
            name, seed = label.rsplit(' | seed ', 1)
            seeds.setdefault(seed, []).append(name)
        trained = '; '.join(f'seed {seed}: {", ".join(names)}' for seed, names in seeds.items())
        lines.append(f'| {number} ({session["date"]}) | {session["cpu"]}, {session["cpus"]} cores | {where} | '
                     f'{trained} | {hours:.1f} |')
    return lines


def summary(record, tiny, min_seeds=MIN_SEEDS):
    """The closing paragraph: where the real model's verdicts agree with TinyAgent's and where they do not, by claim."""
    judged, waiting = findings.verdicts(record, min_seeds=min_seeds)
    if not judged:
        seeds = findings.complete_seeds(record, claims.ARMS)
        return (f'No claim is judged yet: every setting a claim reads must have runs on {min_seeds} seeds, and the ten '
                f'settings are complete on {len(seeds)}. The bullets at the top are readings of the runs so far, '
                f'each saying on how many seeds it rests.')
    same, other, alone = [], [], []
    for verdict in judged:
        if verdict['key'] not in tiny:
            alone.append(f'{verdict["text"]} ({verdict["verdict"]})')
            continue
        theirs = tiny[verdict['key']][0]
        (same if theirs == verdict['verdict'] else other).append(
            f'{verdict["text"]} ({verdict["verdict"]} here, {theirs} on TinyAgent)')
    parts = [f'{len(judged)} of the {len(claims.CLAIMS)} claims are judged on SmolLM2-135M.']
    if same:
        parts.append('The real model and TinyAgent agree on: ' + '; '.join(same) + '.')
    if other:
        parts.append('They disagree on: ' + '; '.join(other) + '.')
    if alone:
        parts.append('Judged here only (TinyAgent has no such claim): ' + '; '.join(alone) + '.')
    if waiting:
        parts.append(waiting_phrase(record, waiting))
    return ' '.join(parts)
