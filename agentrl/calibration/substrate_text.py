"""Notebook 11's tables and sentences, written from the substrate sweep's record and the verdicts computed from it.

The judging is `across`'s; these functions say what it found. The one measured comparison they make (how much more
entropy the plain-k3 run keeps than the k3+ run) calls a gap below `ties.tolerance` over the five seeds tied.
"""
import dataclasses

from agentrl import chapter, prose
from agentrl.calibration import substrates
from agentrl.ch10 import across, claims, explanations, ties
from agentrl.fingerprint import code_fingerprint, made_by

LABELS = (across.ROBUST, across.SUBSTRATE_DEPENDENT, across.UNDECIDED, across.TIED_EVERYWHERE)
GAP_RUNS = ('KL k3 0.3', 'KL k3+ 0.3')  # the two runs whose final entropies 'estimators-agree' compares


@dataclasses.dataclass
class Sweep:
    """Everything notebook 11 shows, judged from the sweep record."""
    swept: list  # the substrates in the record, in substrates.SOURCES order
    facts: dict  # {substrate: substrates.substrate_facts}
    names: dict  # {substrate: its short name in tables and prose}
    verdicts: dict  # {substrate: [claims.seed_verdict dict]}
    rows: list  # across.claim_table
    readings: list  # one Markdown bullet per reading of a failing claim, set against the substrates
    checked: dict  # {claim key: across.premise_across dict}
    gaps: dict  # entropy_gap: the plain-k3 run's extra final entropy over k3+, per substrate
    compared: dict  # against_nine, or None without trial 45 in the record
    same_code: bool  # every swept substrate's runs stand for today's training code (made or certified by it)


def judge(record, nine):
    """Judge every claim and reading on every swept substrate of `record` (substrates.load_record()), and trial 45
    against notebook 09's recorded results `nine` -> Sweep. Reads the record only; trains nothing."""
    swept = [source.name for source in substrates.SOURCES if source.name in record['substrates']]
    facts = {name: substrates.substrate_facts(name) for name in swept}
    names = {name: substrates.heading(facts[name]) for name in swept}
    runs = {name: [record['substrates'][name]['runs'][str(s)] for s in record['substrates'][name]['seeds']]
            for name in swept}
    verdicts = {name: across.substrate_verdicts(runs[name], record['substrates'][name]['seeds']) for name in swept}
    rows = across.claim_table(verdicts) if swept else []
    lines, checked = readings(rows, runs, verdicts, names)
    theirs = {v['key']: v for v in nine[chapter.SEED_VERDICTS_KEY] + nine[chapter.SCALE_VERDICTS_KEY]}
    compared = against_nine(theirs, {v['key']: v for v in verdicts['t45']}) if 't45' in verdicts else None
    today = code_fingerprint()
    return Sweep(swept, facts, names, verdicts, rows, lines, checked, entropy_gap(runs) if swept else {}, compared,
                 all(made_by(record['substrates'][name], today) for name in swept))


# --- the substrates and their calibration ----------------------------------------------------------------------------

def status_lines(labels, swept, found):
    """One line per known substrate: swept, not swept yet, or not frozen yet. labels: {name: label}; found:
    substrates.available()'s {name: config or the reason it is missing}."""
    return [f'{labels[name]}: ' + ('swept' if name in swept else 'not swept yet' if not isinstance(found[name], str)
                                   else 'not frozen yet') for name in found]


def facts_markdown(facts, record, bands):
    """The calibration table of the swept substrates, the two bands under it and where the sweep ran.
    facts: {name: substrates.substrate_facts}; bands: {'tokens': row spec, 'entropy': row spec}."""
    lines = ['| substrate | calls | calibration rows held, seeds 0-4 | seeds 5-9 | RL base: policy tokens per episode '
             '| RL base: policy-token entropy | sweep time |', '|---|---|---|---|---|---|---|']
    for name, f in facts.items():
        confirmed = '-' if f['confirmation_rows_held'] is None else f'{f["confirmation_rows_held"]} of 26'
        minutes = record['substrates'][name]['seconds'] / 60
        lines.append(f'| {f["label"]} | {f["grammar"]} | {f["rows_held"]} of 26 | {confirmed} | {f["tokens"]:.1f} '
                     f'| {f["entropy"]:.3f} | {minutes:.0f} min |')
    band = lambda spec: f'{spec.fmt.format(spec.low)}-{spec.fmt.format(spec.high)}'  # noqa: E731
    text = (f'The bands: {band(bands["tokens"])} policy tokens per episode (the book: {bands["tokens"].book}) and an '
            f'entropy of {band(bands["entropy"])} (the book: {bands["entropy"].book}). ')
    sessions = record['sessions']
    if sessions:
        where = sorted({f'{s["scheduler"]} ({s["workers"]} workers, {s["cpus"]} CPUs)' for s in sessions})
        text += (f'The sweep ran in {len(sessions)} {"session" if len(sessions) == 1 else "sessions"} on '
                 f'{", ".join(where)}, {sum(s["seconds"] for s in sessions) / 60:.0f} minutes in all, including the '
                 'RL bases it had to build.')
    else:
        text += 'No substrate has been swept yet: `make substrate-sweep` writes the record this notebook reads.'
    return ('\n'.join(lines) + '\n\n' if facts else '') + text


# --- the claims across substrates ------------------------------------------------------------------------------------

def by_label(rows):
    """{label: [claim-table rows]} in LABELS order."""
    return {label: [row for row in rows if row['label'] == label] for label in LABELS}


def claims_markdown(rows, headers):
    """The claim table and the count of each label under it."""
    if not rows:
        return 'Nothing to judge yet.'
    counts = {label: len(found) for label, found in by_label(rows).items()}
    seeds = sorted({c['seeds'] for row in rows for c in row['cells'].values()})
    return (rule_markdown(seeds[-1]) + '\n\n' + across.claim_table_markdown(rows, headers) + '\n\n'
            + f'Of {len(rows)} claims on {on_substrates(len(headers))}, {counts[across.ROBUST]} are robust, '
            f'{counts[across.SUBSTRATE_DEPENDENT]} substrate-dependent, {counts[across.UNDECIDED]} undecided '
            f'and {counts[across.TIED_EVERYWHERE]} tied on every one.')


def on_substrates(n):
    """'these 5 substrates', or 'the one substrate swept' while only one is."""
    return 'the one substrate swept' if n == 1 else f'these {n} substrates'


def rule_markdown(n_seeds):
    """The two rules the claim table applies, in words from the code that applies them: the seed rule on each
    substrate, then the label across substrates."""
    return (f'On each substrate, notebook 09\'s seed rule ({claims.seed_rule_text(n_seeds)}). Across the substrates, '
            f'one label per claim: **{across.ROBUST}**, the same verdict, holds or does not hold, on every substrate; '
            f'**{across.SUBSTRATE_DEPENDENT}**, it holds on one substrate and does not hold on another; '
            f'**{across.TIED_EVERYWHERE}**, tied on every substrate; **{across.UNDECIDED}**, anything else (tied or '
            'seed-dependent on some substrate, with no substrate where it holds beside one where it does not). A '
            'cell gives the seeds on which the claim holds beyond the noise, then the verdict (*holds*, *no*, *tied* '
            'or *seed*).')


def where_verdicts(row, names):
    """'holds on trial 45 5/5 and trial 74 4/5; fails on trial 26 1/5': a claim's verdict on each substrate, with
    the seeds it is true on, grouped by verdict."""
    groups = {}
    for name, cell in row['cells'].items():
        groups.setdefault(cell['verdict'], []).append(f'{names[name]} {cell["held_on"]}/{cell["seeds"]}')
    word = {claims.HOLDS: 'holds on', claims.DOES_NOT_HOLD: 'fails on', claims.SEED_DEPENDENT: 'is seed-dependent on',
            claims.TIED: 'is tied on'}
    return '; '.join(f'{word[v]} {prose.and_join(groups[v])}' for v in word if v in groups)


# --- our readings, set against the substrates ------------------------------------------------------------------------

def entropy_gap(runs_by_substrate):
    """Per substrate, how much more entropy the plain-k3 run ends with than the k3+ run (claims.entropy_end), as a
    mean over seeds judged by the tie rule -> {name: dict(gap, tolerance, comparison, seeds)}."""
    out = {}
    for name, runs_by_seed in runs_by_substrate.items():
        values = {run: [claims.entropy_end(runs[run]) for runs in runs_by_seed] for run in GAP_RUNS}
        n = len(runs_by_seed)
        means = {run: sum(v) / n for run, v in values.items()}
        tol = ties.tolerance(values, n_each=n)
        out[name] = dict(gap=means[GAP_RUNS[0]] - means[GAP_RUNS[1]], tolerance=tol, seeds=n,
                         comparison=ties.compare(means[GAP_RUNS[0]], means[GAP_RUNS[1]], tol))
    return out


def premise_counts(checked, names):
    """'trial 45 5/5, trial 74 4/5': on how many seeds of each substrate the premise is true."""
    return ', '.join(f'{names[n]} {sum(c["premise_held"])}/{len(c["premise_held"])}'
                     for n, c in checked['cells'].items())


def what_it_shows(row, checked, names):
    """What the substrates show about one reading: contradicted, borne out, consistent but untested, or silent."""
    def named(keys):
        return f'all {len(keys)} substrates' if len(keys) == len(names) else prose.and_join([names[k] for k in keys])

    if checked['contradict']:
        wrong = checked['contradict']
        both = {checked['cells'][k]['claim'] for k in wrong}
        how = ('the claim holds there although the premise holds too' if both == {claims.HOLDS} else
               'the claim fails there although the premise fails too' if both == {claims.DOES_NOT_HOLD} else
               'the claim and the premise disagree with it there')
        return (f'**Contradicted** on {named(wrong)}: {how}, so the premise does not decide the claim on this evidence'
                + (f' (it predicts the right verdict on {named(checked["agree"])})' if checked['agree'] else '')
                + '.')
    if not checked['agree']:
        return 'The substrates cannot say: on every one the claim or the premise depends on the seed.'
    if row['label'] == across.SUBSTRATE_DEPENDENT:
        return (f'**Borne out**: on every substrate where both are settled ({named(checked["agree"])}) the premise '
                'holds where the claim fails and fails where it holds.')
    if all(checked['cells'][k]['claim'] == claims.HOLDS for k in checked['agree']):
        return (f'**Consistent, not tested**: the claim holds on every substrate where both are settled '
                f'({named(checked["agree"])}) and the premise fails on every one; no substrate has the premise, so none '
                'can show the claim failing with it.')
    return (f'**Consistent, not tested**: the claim fails on every substrate and the premise holds on every one where '
            f'both are settled ({named(checked["agree"])}); no substrate lacks the premise, so none can show the '
            'claim holding without it.')


def gap_sentence(gaps, names):
    """The plain-k3 run's extra final entropy over k3+ on each substrate, by the tie rule."""
    higher = [n for n, g in gaps.items() if g['comparison'] == ties.HIGHER]
    values = ', '.join(f'{names[n]} {g["gap"]:+.3f} (tolerance {g["tolerance"]:.3f})' for n, g in gaps.items())
    head = (f'The plain-k3 run ends with more entropy than k3+ on {len(higher)} of {len(gaps)} substrates, the mean '
            f'gap over {next(iter(gaps.values()))["seeds"]} seeds being above its tie tolerance there: {values}')
    return head + ('. The direction is the mathematics\'; whether the gap passes the claim\'s 0.05 nats is the '
                   'substrate\'s.')


def reading_line(row, reading, checked, names, gaps=None):
    """One reading of a failing claim set against every substrate."""
    head = (f'- *{row["text"]}* ({row["label"]}: {where_verdicts(row, names)}). Premise: *{reading.premise}*, true on '
            f'seeds: {premise_counts(checked, names)}. ')
    if not reading.about_substrate:
        return head + ('Its reading rests on the losses\' mathematics, not on the substrate, so it predicts the '
                       'premise everywhere. ' + (gap_sentence(gaps, names) if gaps else ''))
    return head + what_it_shows(row, checked, names)


def readings_markdown(lines):
    return '\n'.join(lines) if lines else 'No reading to check yet.'


def readings(rows, runs_by_substrate, verdicts, names):
    """Every reading of explanations.EXPLANATIONS whose claim is in the table -> (lines, {key: premise_across dict})."""
    lines, checked_all = [], {}
    for key, reading in explanations.EXPLANATIONS.items():
        row = next((r for r in rows if r['key'] == key), None)
        if row is None:
            continue
        checked = checked_all[key] = across.premise_across(key, runs_by_substrate, verdicts)
        gaps = entropy_gap(runs_by_substrate) if key == 'estimators-agree' else None
        lines.append(reading_line(row, reading, checked, names, gaps))
    return lines, checked_all


# --- trial 45 here and in notebook 09 --------------------------------------------------------------------------------

def against_nine(theirs, ours):
    """Notebook 09's seed verdicts against the sweep's on trial 45 -> dict: claims, differ (per-seed outcomes
    differ), verdict_differ [(key, theirs, ours)]."""
    differ = sorted(key for key in theirs if ours.get(key, {}).get('held') != theirs[key]['held'])
    moved = [(key, theirs[key]['verdict'], ours[key]['verdict']) for key in differ
             if key in ours and ours[key]['verdict'] != theirs[key]['verdict']]
    return dict(claims=len(theirs), differ=differ, verdict_differ=moved)


def nine_markdown(compared, same_code):
    """The comparison with notebook 09 in words. same_code: whether the sweep's record carries today's code
    fingerprint."""
    if compared is None:
        return 'Trial 45 is not in the sweep record yet.'
    if not compared['differ']:
        return f'All {compared["claims"]} claims of notebook 09 come out the same on every seed.'
    text = (f'{len(compared["differ"])} of {compared["claims"]} claims differ from notebook 09 on some seed: '
            f'{", ".join(compared["differ"])}. ')
    moved = compared['verdict_differ']
    text += (f'{len(moved)} of them change their verdict: '
             + prose.and_join([f'{key} ({a} in notebook 09, {b} here)' for key, a, b in moved]) + '. ' if moved else
             'None of them changes its verdict. ')
    return text + ('The sweep\'s record carries another training-code fingerprint than the code notebook 09 runs '
                   'today, so on trial 45 the two are different draws of one substrate.'
                   if not same_code else 'The sweep stands for today\'s training code (made by it, or rerun by it '
                   'bit for bit), so these runs should agree.')


# --- what we found ---------------------------------------------------------------------------------------------------

def found_markdown(sweep):
    """The opening bullets (3-6), from the claim table, the readings set against it and the check against 09."""
    if not sweep.rows:
        return '- No substrate has been swept yet: there is nothing to report.'
    groups, names, rows = by_label(sweep.rows), sweep.names, sweep.rows
    robust = groups[across.ROBUST]
    always = sum(all(c['verdict'] == claims.HOLDS for c in row['cells'].values()) for row in robust)
    seeds = sorted({c['seeds'] for row in rows for c in row['cells'].values()})
    bullets = [f'**{len(robust)} of {len(rows)} claims are robust** on {on_substrates(len(names))}, of '
               f'{prose.and_join([str(s) for s in seeds])} seeds each: {always} hold on every substrate and '
               f'{len(robust) - always} fail on every one'
               + (', so those verdicts belong to GRPO and its regularisers at this scale, not to trial 45.'
                  if len(names) > 1 else '; with one substrate, that says nothing yet about the substrate.')]
    if groups[across.TIED_EVERYWHERE]:
        bullets.append(f'**{len(groups[across.TIED_EVERYWHERE])} are tied on every substrate**: on each, too few seeds '
                       'settle the claim beyond the noise for either verdict: '
                       + ', '.join(row['key'] for row in groups[across.TIED_EVERYWHERE]) + '.')
    if groups[across.SUBSTRATE_DEPENDENT]:
        bullets.append(f'**{len(groups[across.SUBSTRATE_DEPENDENT])} depend on the substrate**: '
                       + '; '.join(f'*{row["text"]}* {where_verdicts(row, names)}'
                                   for row in groups[across.SUBSTRATE_DEPENDENT]) + '.')
    if groups[across.UNDECIDED]:
        bullets.append(f'**{len(groups[across.UNDECIDED])} are undecided**: tied or seed-dependent on some substrate, '
                       'with no substrate where the claim holds beside one where it does not: '
                       + ', '.join(row['key'] for row in groups[across.UNDECIDED]) + '.')
    bullets.append(readings_bullet(sweep))
    if 'estimators-agree' in sweep.checked:
        bullets.append(gap_bullet(sweep))
    if sweep.compared:
        bullets.append(nine_bullet(sweep.compared, sweep.same_code))
    return '\n'.join(f'- {b}' for b in bullets[:6])


def readings_bullet(sweep):
    about = {key: c for key, c in sweep.checked.items() if explanations.EXPLANATIONS[key].about_substrate}
    label = {row['key']: row['label'] for row in sweep.rows}
    contradicted = [key for key, c in about.items() if c['contradict']]
    settled = [key for key, c in about.items() if not c['contradict'] and c['agree']]
    borne = [key for key in settled if label[key] == across.SUBSTRATE_DEPENDENT]
    untested = [key for key in settled if key not in borne]
    left_open = [key for key, c in about.items() if not c['contradict'] and not c['agree']]
    text = {row['key']: row['text'] for row in sweep.rows}
    are = lambda keys: 'is' if len(keys) == 1 else 'are'  # noqa: E731
    bullet = (f'**Our readings of failing claims, set against the substrates**: of {len(about)} that rest on the '
              f'substrate, {len(contradicted)} {are(contradicted)} contradicted')
    if contradicted:
        bullet += ' (' + '; '.join(f'*{text[k]}* comes out against its premise on {len(about[k]["contradict"])} of '
                                   f'{len(sweep.names)} substrates' for k in contradicted) + ')'
    parts = [bullet]
    if borne:
        parts.append(f'{len(borne)} {are(borne)} borne out (the premise holds where the claim fails and fails where '
                     'it holds)')
    if untested:
        parts.append(f'{len(untested)} {are(untested)} consistent but untested (claim and premise come out the same '
                     'way on every substrate where both are settled, so no substrate shows the other case)')
    if left_open:
        parts.append(f'{len(left_open)} cannot be judged (on every substrate '
                     f'{"its claim is" if len(left_open) == 1 else "their claims are"} tied or seed-dependent, or the '
                     'premise depends on the seed)')
    return '; '.join(parts) + '.'


def gap_bullet(sweep):
    gaps, names = sweep.gaps, sweep.names
    higher = sum(g['comparison'] == ties.HIGHER for g in gaps.values())
    agree = next(row for row in sweep.rows if row['key'] == 'estimators-agree')
    return (f'**The k3 and k3+ losses**: the plain-k3 run ends with more entropy than k3+ on {higher} of {len(gaps)} '
            f'substrates (mean gaps {min(g["gap"] for g in gaps.values()):+.3f} to '
            f'{max(g["gap"] for g in gaps.values()):+.3f} nats over {next(iter(gaps.values()))["seeds"]} seeds, '
            'each against its tie tolerance), as the forward-KL reading predicts; the claim that they end within '
            f'0.05 nats {where_verdicts(agree, names)}.')


def nine_bullet(compared, same_code):
    moved = compared['verdict_differ']
    return (f'**Trial 45 here against notebook 09**: {len(compared["differ"])} of {compared["claims"]} claims differ '
            f'on some seed and {len(moved)} change verdict'
            + (f' ({prose.and_join([k for k, _, _ in moved])})' if moved else '')
            + ('; the sweep\'s record carries another training-code fingerprint than today\'s code, so these are '
               'two draws of one substrate.'
               if not same_code and compared['differ'] else '.'))
