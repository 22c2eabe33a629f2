"""Notebook 09's tables and sentences: the Clip-Cov/KL-Cov fraction sweep, the adaptive-KL targets, the seed table,
the statements' verdicts by seed, the failing mechanisms against the book's numbers, and the re-checks one step
further, the per-turn-cost ablation's section and the findings the notebook opens and closes with. Each function
takes runs or verdicts and returns lines or Markdown; the verdicts themselves are agentrl.ch10.claims', and every
comparison of two numbers in a sentence follows agentrl.ch10.ties."""
import dataclasses
import math
import textwrap

from agentrl.ch10 import across, claims, comparison, entropy_law, explanations, findings, stability, ties, turn_cost
from agentrl.ch10.claims import entropy_end, entropy_start
from agentrl.ch10.live import run_all
from agentrl.prose import and_join

FRACTIONS = (0.01, 0.05, 0.2)  # the Clip-Cov / KL-Cov fractions the sweep tries
TARGETS = (0.01, 0.03, 0.1, 0.3)  # the adaptive KL targets the sweep tries


def train_keyed(specs, processes=2):
    """{key: RunSpec} -> {key: run}, loaded or trained together."""
    runs = run_all(list(specs.values()), processes=processes)
    return {key: runs[spec.name] for key, spec in specs.items()}


def train_on_seeds(specs_of, seeds, processes=2):
    """Load or train specs_of(s) on every seed s, each run named '<name> | seed <s>' in the run cache -> {seed: {name:
    run}} under the plain names."""
    specs = [dataclasses.replace(spec, name=f'{spec.name} | seed {s}') for s in seeds for spec in specs_of(s)]
    runs = run_all(specs, processes=processes)
    return {s: across.runs_of_seed(runs, s) for s in seeds}


def final_reward(run):
    """Mean training batch reward of the last five steps."""
    return claims.late_mean(run, 'reward', 5)


def seeds_phrase(count, total, tied=0):
    """How many seeds a statement is true on beyond the noise, in words, with the tied seeds apart."""
    said = {total: f'every seed ({count} of {total})', 0: f'no seed (0 of {total})'}.get(
        count, f'{count} of {total} seeds only')
    return said + (f', {tied} tied' if tied else '')


def choose(candidates, none):
    """The sweep rule -> (the chosen key, why): the highest final entropy among the runs that keep at least 90% of
    the unregularised final reward, else the highest final reward."""
    floor = 0.9 * final_reward(none)
    ok = [r for r in candidates if final_reward(candidates[r]) >= floor]
    if len(ok) > 1:
        return max(ok, key=lambda r: entropy_end(candidates[r])), f'the highest final entropy of the {len(ok)} above the floor'
    if ok:
        return ok[0], 'the only one above the floor'
    return max(candidates, key=lambda r: final_reward(candidates[r])), 'none is above the floor: the highest final reward'


def fraction_sweep(by_variant, none):
    """({variant: {fraction: run}}, the unregularised run) -> (the printed lines, {variant: chosen fraction})."""
    sweep, chosen = [], {}
    for variant, by_fraction in by_variant.items():
        sweep.append(f'{variant}: final training reward must be >= {0.9 * final_reward(none):.3f} (90% of none; '
                     f'none ends at entropy {entropy_end(none):.3f})')
        for f, run in by_fraction.items():
            sweep.append(f'  fraction {f:<5} | entropy {entropy_start(run):.3f} -> {entropy_end(run):.3f}'
                         f' | final reward {final_reward(run):.3f}'
                         f' | held-out pass@1 {run["metrics"]["pass1"]:.3f} pass@8 {run["metrics"]["pass8"]:.3f}')
        chosen[variant], why = choose(by_fraction, none)
        sweep.append(f'  chosen fraction: {chosen[variant]} ({why})')
    return sweep, chosen


def adaptive_report(adaptive, targets, none):
    """({'adaptive KL <t>': run}, targets, the unregularised run) -> (printed lines, the targets that answer exercise 5,
    the chosen target: the largest answering one, else the one with the best pass@8)."""
    report = [f'none: reads at the last step {none["history"][-1]["reads"]:.2f} | pass@8 {none["metrics"]["pass8"]:.3f}',
              "answers: at least 0.8 reads per episode at the last step and pass@8 at least none's"]
    answers = []
    for t in targets:
        run = adaptive[f'adaptive KL {t}']
        last = run['history'][-1]
        reads, pass8 = last['reads'], run['metrics']['pass8']
        ok = reads >= 0.8 and pass8 >= none['metrics']['pass8']
        answers += [t] if ok else []
        report.append(f'target {t:<5} | beta 0.300 -> {last["kl_coef"]:.3f} | final KL {last["kl_ref"]:.4f}'
                      f' | reads {reads:.2f} | pass@1 {run["metrics"]["pass1"]:.3f} pass@8 {pass8:.3f}'
                      f' | answers: {"yes" if ok else "no"}')
    report.append('targets that answer the exercise: '
                  + (', '.join(map(str, answers)) if answers else 'none of the swept targets'))
    chosen = max(answers) if answers else max(targets, key=lambda t: adaptive[f'adaptive KL {t}']['metrics']['pass8'])
    return report, answers, chosen


COLUMNS = [('final entropy', lambda r: entropy_end(r), '.3f'), ('reads', lambda r: r['history'][-1]['reads'], '.2f'),
           ('KL from start', lambda r: r['metrics']['kl_start'], '.3f'),
           ('pass@1', lambda r: r['metrics']['pass1'], '.3f'), ('pass@8', lambda r: r['metrics']['pass8'], '.3f'),
           ('distinct', lambda r: r['metrics']['distinct'], '.1f'), ('invalid', lambda r: r['metrics']['invalid'], '.2f')]


def seed_table(by_seed, names, seeds):
    """({seed: {setting: run}}, settings, seeds) -> (table {(setting, column): per-seed values}, the recorded summary,
    the printed lines)."""
    table, summary_rows = {}, []
    for name in names:
        cells, values = [], {}
        for column, value, fmt in COLUMNS:
            xs = [value(by_seed[s][name]) for s in seeds]
            table[name, column] = values[column] = xs
            cells.append(f'{sum(xs) / len(xs):{fmt}} [{min(xs):{fmt}}, {max(xs):{fmt}}]')
        summary_rows.append(dict(setting=name, cells=cells, values=values))
    label = f'{len(seeds)} seeds ({", ".join(map(str, seeds))})'
    summary = dict(label=label, seeds=seeds, columns=[c for c, _, _ in COLUMNS], rows=summary_rows)
    printed = [f'{label}; each cell: mean [min, max]']
    for first, stop in [(0, 4), (4, len(COLUMNS))]:  # two halves, so that no line is wider than 110 characters
        printed.append((f'{"setting":<18}| ' + ' | '.join(f'{c:<20}' for c, _, _ in COLUMNS[first:stop])).rstrip())
        printed += [(f'{row["setting"]:<18}| ' + ' | '.join(x.ljust(20) for x in row['cells'][first:stop])).rstrip()
                    for row in summary_rows]
    return table, summary, printed


KIND_HEADINGS = {claims.MECHANISM: "What the chapter's runs demonstrate (mechanisms)",
                 claims.OBSERVATION: "The chapter's readings of its one-seed table (observations)",
                 claims.AT_SCALE: 'The failing mechanisms one step further'}


def reader_lines(verdicts, width=110):
    """Per kind of statement, a heading, then one line per statement: on how many seeds it is true, then the
    statement, wrapped under itself so that no line is wider than width."""
    lines = []
    for kind in dict.fromkeys(v['kind'] for v in verdicts):
        lines.append(f'{KIND_HEADINGS[kind]}, true on:')
        for v in (v for v in verdicts if v['kind'] == kind):
            head = f'  {seeds_phrase(v["held_on"], len(v["seeds"]), v.get("tied_on", 0)):<20} | '
            lines += textwrap.wrap(v['text'], width, initial_indent=head, subsequent_indent=' ' * len(head),
                                   break_on_hyphens=False, break_long_words=False)
    return lines


SHOWN = {'collapse': ['entropy'], 'kl-ordering': ['entropy', 'KL from start', 'distinct'],
         'kl-1.0-holds-entropy': ['entropy'], 'reward-placement-stronger': ['entropy', 'KL from start'],
         'bonus-breaks-format': ['entropy', 'invalid', 'pass@1'], 'bonus-and-temperature-move-away': ['KL from start'],
         'pass8-ge-pass1': ['pass@1', 'pass@8']}  # the book table's columns each mechanism is about


def mechanism_gaps(seed_verdicts, book_columns, book_rows, runs_by_seed, table, seeds):
    """Markdown: each failing mechanism's columns, the book's one seed against our mean [min, max] over seeds, and the
    unregularised run's scores for scale."""
    book = {row['setting']: row for row in book_rows}
    book_entropy = book_columns[1]  # 'entropy 0-4 -> 35-39'

    def ours(name, column):
        if column == 'entropy':
            runs = [r[name] for r in runs_by_seed]
            ends = [entropy_end(r) for r in runs]
            return (f'{sum(map(entropy_start, runs)) / len(runs):.3f} -> {sum(ends) / len(ends):.3f}'
                    f' [{min(ends):.3f}, {max(ends):.3f}]')
        fmt = next(f for c, _, f in COLUMNS if c == column)
        xs = table[name, column]
        return f'{sum(xs) / len(xs):{fmt}} [{min(xs):{fmt}}, {max(xs):{fmt}}]'

    failing = [v for v in seed_verdicts if v['kind'] == claims.MECHANISM and v['verdict'] != claims.HOLDS]
    if not failing:
        return 'Every mechanism of the chapter holds across the seeds here; the re-check below is kept for comparison.'
    rows = ['| mechanism, and on how many seeds it is true here | setting | column | book (one seed) '
            '| ours: mean [min, max] over seeds |', '|---|---|---|---|---|']
    for v in failing:
        needs = [n for n in claims.by_key(v['key']).needs if n in book]
        for i, (name, column) in enumerate((n, c) for n in needs for c in SHOWN.get(v['key'], ['entropy'])):
            head = (f'{v["text"]} — **{seeds_phrase(v["held_on"], len(v["seeds"]), v.get("tied_on", 0))}**'
                    if i == 0 else '')
            rows.append(f'| {head} | {name} | {column} | {book[name][book_entropy if column == "entropy" else column]} '
                        f'| {ours(name, column)} |')

    def mean(name, column):
        return sum(table[name, column]) / len(seeds)

    return '\n'.join(rows) + '\n\n' + book_gap(mean('none', 'pass@1'), mean('none', 'pass@8'), book['none'],
                                                 comparison.tolerances(runs_by_seed)['pass1'], len(seeds))


def book_gap(pass1, pass8, book_none, tol, n_seeds):
    """Markdown: the unregularised run's held-out scores, ours (means over seeds) against the book's, compared on
    pass@1 by the tie rule, and what that says about the re-check."""
    word = ties.compare(pass1, float(book_none['pass@1']), tol)
    head = (f'For scale: without regularisation our runs reach held-out pass@1 {pass1:.3f} and pass@8 {pass8:.3f} '
            f'(means over seeds), the book\'s {book_none["pass@1"]} and {book_none["pass@8"]}. '
            + ties.rule_sentence(tol, 'pass@1', 'seeds', n_seeds) + ' ')
    if word == ties.HIGHER:
        return head + ('Our pass@1 is above the book\'s by more than that: our runs get further in the same 40 steps, '
                       'so the reward pulls harder against the same coefficient; the re-check below asks whether that '
                       'is enough to explain the gap.')
    if word == ties.TIED:
        return head + ('Ours and the book\'s pass@1 are tied by it: the unregularised runs get about as far in 40 '
                       'steps on both substrates, so a stronger pull of the reward is not shown to separate the two '
                       'tables, and the re-check below bears on that.')
    return head + ('Our pass@1 is below the book\'s by more than that: our runs do not get as far in 40 steps, so a '
                   'stronger pull of the reward does not separate the two tables, and the re-check below bears on '
                   'that.')


def scale_lines(scale_runs, specs, seeds, vocab_size):
    """The printed lines of the re-checks one step further ({seed: {setting: run}}), a line per setting and seed."""
    recheck = [f'log V = log {vocab_size} = {math.log(vocab_size):.3f} nats',
               f'{"setting":<22}| seed | entropy 0-4 -> last 5 | no signal from step | invalid | pass@1 | KL from start']
    for spec in specs:
        for s in seeds:
            run = scale_runs[s][spec.name]
            lost = next((step['step'] for step in run['history'] if not step['signal']), None)
            m = run['metrics']
            recheck.append(f'{spec.name:<22}| {s:>4} | {entropy_start(run):.3f} -> {entropy_end(run):<11.3f} |'
                           f' {"never" if lost is None else lost:>19} | {m["invalid"]:7.2f} | {m["pass1"]:6.3f}'
                           f' | {m["kl_start"]:.3f}')
    return recheck


def scale_reading(scale_verdicts):
    """One paragraph: what the re-checks one step further say of the weaker-regulariser reading."""
    holding = sum(v['verdict'] == claims.HOLDS for v in scale_verdicts)
    if holding == len(scale_verdicts):
        return ('Every re-checked mechanism holds one step further: consistent with a substrate on which the '
                'regularisers are relatively weaker, though one step up does not prove that is the only difference.')
    if holding:
        others = [v['verdict'] for v in scale_verdicts if v['verdict'] != claims.HOLDS]
        said = and_join([f'{others.count(w)} {w}' for w in (claims.DOES_NOT_HOLD, claims.TIED, claims.SEED_DEPENDENT)
                         if others.count(w)])
        return (f'{holding} of the {len(scale_verdicts)} re-checks {"holds" if holding == 1 else "hold"}; of the others '
                f'one step further, {said}, so for them the weaker-regulariser reading is not confirmed.')
    return ('None of the re-checks holds: one step further is not enough to make these mechanisms appear here, '
            'and the weaker-regulariser reading is not confirmed.')


def controller_check(adaptive, targets):
    """Each adaptive run's beta rebuilt step by step from the controller's formula -> (the largest gap to the logged
    beta, {target: steps at the 2% rate limit}, steps per run)."""
    worst, clipped = 0.0, {}
    for t in targets:
        history = adaptive[f'adaptive KL {t}']['history']
        for before, after in zip(history, history[1:]):
            expected = before['kl_coef'] * (1 + min(max(before['kl_ref'] / t - 1, -0.2), 0.2) / 10)
            worst = max(worst, abs(after['kl_coef'] - expected))
        clipped[t] = sum(abs(h['kl_ref'] / t - 1) >= 0.2 for h in history)
    return worst, clipped, len(adaptive[f'adaptive KL {targets[0]}']['history'])


def controller_reading(worst, clipped, steps):
    """Markdown: whether the logged beta is the controller's, and how often it sat at its rate limit."""
    from agentrl.prose import and_join

    return (('Rebuilt from the formula, every logged $\\beta$ matches the controller exactly. ' if worst == 0 else
             f'Rebuilt from the formula, every logged $\\beta$ matches the controller to within {worst:.1e}. ')
            + 'The KL was off its target by 20% or more, so that $\\beta$ moved by the full 2%, on '
            + and_join(f'{clipped[t]} of {steps} steps at target {t}' for t in clipped) + '. '
            + ('For most of the run the controller sits at its rate limit, so 40 steps are too few for it to settle, '
               'and the $\\beta$ it ends with is set as much by the 2% cap as by the target.'
               if sum(clipped.values()) > len(clipped) * steps / 2 else
               'For most of the run the KL stayed within 20% of its target, so the controller was not rate-limited.'))


def explained_count(explained, n_seeds):
    """One sentence: how many statements fail and for how many a reading is offered."""
    if not explained:
        return ''
    offered = sum(e['explanation'] is not None for e in explained)
    words = [e['verdict'] for e in explained]
    kinds = and_join([f'{words.count(w)} {w}' for w in (claims.DOES_NOT_HOLD, claims.TIED, claims.SEED_DEPENDENT)
                      if words.count(w)])
    return (f'{len(explained)} statements are not found to hold on {n_seeds} seeds ({kinds}); we offer a reading for '
            f'{offered} of them, each only because the measured fact it rests on holds on more than half the seeds.')


def explanations_markdown(explained, ablation=()):
    """Markdown: every failing statement with our reading and the ablation's outcome, or that none fails."""
    if not explained:
        return 'Every claim holds across the seeds: there is nothing to explain.'
    return '\n'.join(explanations.explanation_lines(explained, ablation))


def check_same_verdicts(found, verdicts):
    """Refuse findings.evidence's verdicts unless they are the notebook's own (verdicts: seed_verdict dicts), claim by
    claim: the same claims, each true on the same seeds."""
    def table(vs):
        return {v['key']: (v['verdict'], v['held_on'], list(v['seeds'])) for v in vs}
    ours, theirs = table(verdicts), table(found.verdicts)
    differ = sorted(key for key in ours.keys() | theirs.keys() if ours.get(key) != theirs.get(key))
    if differ:
        raise ValueError(f'the notebook\'s runs and findings.evidence disagree on {differ}')


def readings_markdown(explained, ablation, n_seeds):
    """Markdown: every failing statement with our reading and the ablation's outcome, then how many readings are
    offered."""
    return explanations_markdown(explained, ablation) + '\n\n' + explained_count(explained, n_seeds)


def ablation_markdown(found):
    """Markdown: the per-turn-cost ablation's table, one row per judged claim, and its one-sentence summary."""
    return turn_cost.ablation_table(found.ablation) + '\n\n' + findings.ablation_summary(found)


def law_ties(judged):
    """The law's forecast against the better simple one on each seed, by the tie rule -> {window: dict(tol, words)}:
    the tolerance from the spread of every forecast's RMSE over the seeds, and per seed 'higher', 'lower' or 'tied'
    (the law's RMSE against the better baseline's). judged: {seed: entropy_law.judge(...)}."""
    out = {}
    for window in entropy_law.WINDOWS:
        rmse = {s: j['rmse'][window] for s, j in judged.items()}
        tol = ties.tolerance({p: [r[p] for r in rmse.values()] for p in entropy_law.PREDICTORS})
        out[window] = dict(tol=tol, words={s: ties.compare(r['law'], min(r[p] for p in entropy_law.PREDICTORS[1:]), tol)
                                           for s, r in rmse.items()})
    return out


def law_tie_sentence(judged):
    """How often the law's forecast error and the better simple forecast's are tied, by the tie rule, and what that
    says."""
    n = len(judged)
    tied = law_ties(judged)
    counts = {w: sum(word == ties.TIED for word in tied[w]['words'].values()) for w in entropy_law.WINDOWS}
    return ('By the tie rule (two RMSEs differing by less than 2 standard errors of a difference, from their spread '
            'over the seeds, are tied), the law\'s error and the better simple forecast\'s are tied on '
            f'{counts["second half"]} of {n} seeds over the second half (tolerance {tied["second half"]["tol"]:.3f}) '
            f'and {counts["late"]} of {n} over the late steps (tolerance {tied["late"]["tol"]:.3f})'
            + (': these runs cannot tell the law from a constant or a straight line.'
               if all(c == n for c in counts.values()) else '.'))


def law_sentence(law_verdict, judged):
    """The law's verdict by its rule, and how often its forecast and the better simple one are tied."""
    n = len(judged)
    wins = {w: sum(j['law_beats_baselines'][w] for j in judged.values()) for w in entropy_law.WINDOWS}
    return (f'{law_verdict} by the rule fixed in advance: the law forecasts better than both simple forecasts '
            f'on {wins["second half"]} of {n} seeds over the second half and {wins["late"]} of {n} over the late '
            'steps. ' + law_tie_sentence(judged))


def law_reading(law):
    """Markdown: the law's reading (entropy_law_report's), then its forecasts set against the tie rule."""
    return law['text'] + '\n\n' + law_tie_sentence(law['judged'])


def failing_bullet(e, ablation_row):
    """A sub-bullet: a failing statement, on how many seeds, the fact our reading rests on, and the ablation."""
    n = len(e['seeds'])
    parts = [f'*{e["text"]}* (true on {e["held_on"]} of {n}).']
    if e['premise'] is None:
        parts.append('We offer no reading.')
    else:
        on = f'{sum(e["premise_held"])} of {n}'
        parts.append(f'Our reading (in full under *Where a statement does not hold*) rests on this fact, true on '
                     f'{on}: {e["premise"]}.' if e['explanation'] else
                     f'The reading we would offer rests on this fact, true on only {on}, so we withhold it: '
                     f'{e["premise"]}.')
    if ablation_row is not None:
        parts.append(explanations.ablation_sentence(ablation_row))
    return ' '.join(parts)


def what_we_found(found, explained, scale_verdicts, law, stable_rows, chosen_fraction, chosen_target, answered):
    """Markdown bullets: what notebook 09 found, from this execution's verdicts (it opens and closes with them).
    found: findings.Evidence; explained: explanations.explain of every failing verdict; law: entropy_law_report's
    report."""
    n = len(found.seeds)
    judged = [v for v in found.verdicts if v['kind'] != claims.AT_SCALE]
    kinds = [f'{findings.count_words([v for v in judged if v["kind"] == kind])} of the {label}'
             for kind, label in ((claims.MECHANISM, 'mechanisms'), (claims.OBSERVATION, 'observations'))]
    rechecked = sum(v['verdict'] == claims.HOLDS for v in scale_verdicts)
    moved = [e['key'] for e in explained if found.verdict(e['key'])['held_on'] != e['held_on']]
    if moved:
        raise ValueError(f'the notebook\'s runs and findings.evidence disagree on {moved}')
    bullets = [
        f'**The chapter\'s statements on {n} seeds** ({claims.seed_rule_text(n)}): {and_join(kinds)}; one step '
        f'further (twice the coefficient or the steps), {rechecked} of {len(scale_verdicts)} re-checks of the failing '
        f'mechanisms {"holds" if rechecked == 1 else "hold"}.',
        f'**Not holding or tied ({len(explained)}), with our reading and the per-turn-cost ablation:**' + ''.join(
            f'\n  - {failing_bullet(e, found.ablation_row(e["key"]))}' for e in explained),
        f'**Against other arithmetic streams:** {stability.stability_summary(stable_rows)}',
        f'**The per-turn cost:** {findings.ablation_summary(found)}',
        f'**The entropy–performance law** is {law_sentence(law["verdict"], law["judged"])}',
        f'**Clip-Cov, KL-Cov and the adaptive KL:** the training-only sweeps chose Clip-Cov '
        f'{chosen_fraction["clip_cov"]}, KL-Cov {chosen_fraction["kl_cov"]} and the adaptive KL target '
        f'{chosen_target} (exercise 5 {"answered" if answered else "not answered"} by a swept target).']
    return '\n'.join(f'- {bullet}' for bullet in bullets)
