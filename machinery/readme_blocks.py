"""MAINTAINING.md's blocks written by `make report`, between their marker lines: the summary of how faithful the
reproduction is (FAITHFULNESS_BEGIN ... FAITHFULNESS_END, from results/ and calibration/) and the timings read from the
long-grammar search's and the substrate sweep's records (TIMINGS_BEGIN ... TIMINGS_END); with the helpers that read
and replace such a block and write a file only when its text changes."""
import json
from pathlib import Path

from agentrl import chapter
from agentrl.atomic import atomic_output
from agentrl.calibration import differences, substrates
from agentrl.calibration.fit import below_the_rule, fit_clause
from agentrl.calibration.freeze import CONFIRM_ROWS, decision_from_export
from agentrl.calibration.rows import fitted_counts
from agentrl.ch10 import across, claims, stability
from agentrl.ch10.claims import DOES_NOT_HOLD, HOLDS, MECHANISM, SEED_DEPENDENT, seed_rule_text
from agentrl.paths import CALIBRATION, FRAMEWORK_SWEEP
from machinery import record_words as words, verdict_shift
from machinery.recorded import KIND_PLURAL, claim_counts, exact_totals, seed_phrase, seed_verdicts_by_key

FAITHFULNESS_BEGIN = ('<!-- faithfulness: begin (written by `make report` from results/ and calibration/; do not '
                      'edit by hand) -->')
FAITHFULNESS_END = '<!-- faithfulness: end -->'
TIMINGS_BEGIN = ('<!-- timings: begin (written by `make report` from calibration/long-grammar/, '
                 'results/substrate_sweep.json and results/framework_sweep.json; do not edit by hand) -->')
TIMINGS_END = '<!-- timings: end -->'


def between_markers(text, begin, end):
    """The lines of text between the marker lines begin and end, or None if either is missing or they are out of
    order. MAINTAINING.md's code-written blocks (faithfulness, test table, mutation score) sit between such
    markers."""
    start, stop = text.find(begin), text.find(end)
    if start < 0 or stop < start:
        return None
    return text[start + len(begin):stop].strip('\n').splitlines()


def replace_between_markers(text, begin, end, lines):
    """text with the block between its markers begin and end replaced by lines; None if the markers are missing."""
    if between_markers(text, begin, end) is None:
        return None
    start, stop = text.find(begin), text.find(end) + len(end)
    return text[:start] + '\n'.join([begin, *lines, end]) + text[stop:]


def write_text(path, text):
    """Replace path's content atomically (unchanged files are left alone, timestamps included)."""
    if path.is_file() and path.read_text(encoding='utf-8') == text:
        return
    with atomic_output(path, path.suffix) as tmp:
        tmp.write_text(text, encoding='utf-8')


def faithfulness_summary(recorded, calibration=None, snapshot=None):
    """MAINTAINING.md's summary of how faithful the reproduction is, as Markdown lines computed from the results (and
    from the calibration record, calibration/trials.json unless another path is given, and the verdict snapshot of
    machinery.verdict_shift, its recorded one unless another is given)."""
    total, match = exact_totals(recorded)
    verdict = ' — all.' if match == total else ' — **not all**: see `REPRODUCTION.md`.'
    lines = [f'- **Exact lines**: {match} of the {total} lines the book prints as exact arithmetic (sections '
             '10.1–10.5, the covariance check and the 3-step identity of 10.6, the model-size rows of the memory table '
             f'in 10.8) match it character for character{verdict}']
    export = Path(calibration or CALIBRATION / 'trials.json')
    if export.exists():
        report = export.parent.parent / differences.ARITHMETIC_REPORT
        today = differences.arithmetic_counts(report.read_text(encoding='utf-8')) if report.is_file() else None
        lines += substrate_lines(json.loads(export.read_text()), today)
    long_export = export.parent / 'long-grammar' / 'trials.json'
    if long_export.exists():
        lines += long_study_lines(json.loads(long_export.read_text()))
    found = [v for stem in chapter.VERDICT_NOTEBOOKS for v in recorded.get(stem, chapter.VERDICTS_KEY, [])]
    seed0 = {v['key']: v for v in found}
    across = seed_verdicts_by_key(recorded)
    readings = {e['key']: e for e in recorded.get(chapter.SEED_NOTEBOOK, chapter.EXPLANATIONS_KEY, [])}
    stable_rows = recorded.get(chapter.SEED_NOTEBOOK, chapter.STABILITY_KEY, [])
    if across:
        seeds = next(iter(across.values()))['seeds']
        lines.append('- **The chapter\'s claims on our TinyAgent runs on trial 45, seeds '
                     f'{", ".join(map(str, seeds))}** (notebook 09; {seed_rule_text(len(seeds))}): '
                     f'{seed_counts(list(across.values()))}.')
        for v in (v for v in across.values() if v['kind'] == MECHANISM and v['verdict'] != HOLDS):
            measured = f'; seed 0 measured: {seed0[v["key"]]["evidence"]}' if v['key'] in seed0 else ''
            lines.append(f'  - {v["verdict"]}: {v["text"]} — {seed_phrase(v)}{fragile_note(v, stable_rows)}'
                         f'{measured}')
            lines.append('    - ' + reading_phrase(readings.get(v['key'])))
    if stable_rows:
        lines.append('- **Do the verdicts hang on the last bit?** (notebook 09, `data/streams/`) '
                     + stability.stability_summary(stable_rows))
    if found and across:
        judged = [k for k in seed0 if k in across]
        tied = [k for k in judged if claims.outcome_of(seed0[k]) == claims.TIED]
        same = [k for k in judged if claims.outcome_of(seed0[k]) == across[k]['verdict']]
        lines.append('- **Seed 0 alone** (notebooks 07 and 08, the chapter\'s single seed) is one draw of these five, '
                     f'not a verdict of its own: its outcome agrees with the five-seed word on {len(same)} of '
                     f'{len(judged)} claims' + (f', and is tied (inside the one-draw tolerance) on {len(tied)}'
                                                if tied else '') + '.')
    scaled = recorded.get(chapter.SEED_NOTEBOOK, chapter.SCALE_VERDICTS_KEY, [])
    if scaled:
        lines.append('- **Re-checked at twice the coefficient or the steps, on trial 45** (notebook 09):')
        for v in scaled:
            lines.append(f'  - {v["text"]}: {seed_phrase(v)}{fragile_note(v, stable_rows)}')
            if v['verdict'] != HOLDS:
                lines.append('    - ' + reading_phrase(readings.get(v['key'])))
    if recorded.get(chapter.ACROSS_NOTEBOOK, chapter.SUBSTRATES_KEY) is not None:
        lines += across_lines(recorded)
    snapshot = snapshot or verdict_shift.load_snapshot()
    if snapshot and (found or across):
        lines += verdict_shift.moved_summary(snapshot, recorded)
    return lines


def with_faithfulness(readme_text, recorded):
    """readme_text with the block between the faithfulness markers replaced by the computed summary; None if the
    markers are missing or out of order."""
    return replace_between_markers(readme_text, FAITHFULNESS_BEGIN, FAITHFULNESS_END, faithfulness_summary(recorded))


def seed_counts(summaries):
    """'mechanisms: 6 of 8 hold, 2 do not' (', 1 tied' where a tie occurs) from seed-verdict dicts, kinds in order."""
    parts = []
    for kind in dict.fromkeys(v['kind'] for v in summaries):
        found = [v['verdict'] for v in summaries if v['kind'] == kind]
        tied, split = found.count(claims.TIED), found.count(SEED_DEPENDENT)
        parts.append(f'{KIND_PLURAL.get(kind, kind)}: {found.count(HOLDS)} of {len(found)} hold, '
                     f'{found.count(DOES_NOT_HOLD)} do not' + (f', {tied} tied' if tied else '')
                     + (f', {split} seed-dependent' if split else ''))
    return '; '.join(parts)


def fragile_note(summary, stable_rows):
    """' (**fragile**: holds, 3/5 here; does not hold, 1/5 on ...)' for a seed verdict whose word moves between
    arithmetic streams, '' otherwise."""
    row = next((r for r in stable_rows if r['key'] == summary['key']), None)
    return f' (**{stability.fragile_phrase(row)}**)' if row and row['label'] == stability.FRAGILE else ''


def _row_value(row):
    return 'n/a' if row.get('mean') is None else (row.get('fmt') or '{:.3g}').format(row['mean'])


def substrate_lines(export, today=None):
    """The README's lines on the TinyAgent substrate, from calibration/trials.json (parsed): the trial the freeze
    rule chose, how many of `make calibrate`'s rows it held on the search and on the confirmation seeds at search
    time (and, given `today` as differences.arithmetic_counts reads it, how many it holds regenerated with today's
    arithmetic), and the rows it missed (ours, the band, the book)."""
    decision, recs = decision_from_export(export)
    if decision.action != 'freeze':
        return [f'- **The TinyAgent substrate** is not frozen yet (`calibration/README.md`): {decision.reason}.']
    frozen = next(r for r in recs if r['number'] == decision.frozen)
    measured = [('seeds ' + words.seeds(frozen['seeds']), frozen['rows'])]
    if frozen.get('confirmation'):
        measured.append(('the confirmation seeds ' + words.seeds(frozen['confirmation']['seeds']),
                         frozen['confirmation']['rows']))
    held = ' and '.join(f'{sum(bool(r.get("holds")) for r in rows)} on {where}' for where, rows in measured)
    if frozen.get('confirmation') and not decision.confirmed:
        held += below_the_rule(CONFIRM_ROWS, decision.compared)
    fitted = fit_clause(len(frozen['rows']), fitted_counts())
    lines = [f'- **The TinyAgent substrate** (`config.DEFAULT`) is trial {frozen["number"]} of the calibration '
             f'search (`calibration/README.md`), {fitted}. Of the {len(frozen["rows"])} rows of `make calibrate`, at '
             f'search time it held {held}'
             + (f'; regenerated with today\'s arithmetic (`{differences.ARITHMETIC_REPORT}`) it holds '
                f'{today["search"]} and {today["confirmation"]}' if today else '')
             + ' (`TINYAGENT.md` says what the confirmation seeds can and cannot show).']
    for where, rows in measured:
        missed = [r for r in rows if not r.get('holds')]
        if missed:
            lines.append(f'  - missed on {where}: ' + '; '.join(
                f'{r["quantity"]} {_row_value(r)} (band {words.band(r)}, book {r.get("book", "")})' for r in missed))
    return lines


def long_study_lines(export):
    """MAINTAINING.md's line on the long-grammar calibration study, from its trials.json (parsed): not frozen yet, or
    the trial it froze, the rows it holds, and what the default rule fixed before that search decided."""
    decision, recs = decision_from_export(export)
    where = '`calibration/long-grammar/README.md`'
    if decision.action != 'freeze':
        return [f'- **The long-grammar substrate** (the book\'s longer calls, searched by the same protocol in a '
                f'second study, {where}) is not frozen yet: {decision.reason}.']
    frozen = next(r for r in recs if r['number'] == decision.frozen)
    confirmed = frozen.get('confirmation') or {}
    role = ('by the default rule fixed before its search, it replaces trial 45 as `config.DEFAULT`'
            if decision.confirmed else
            'by the default rule fixed before its search (all 26 rows on seeds 0-4 and at least 24 on seeds '
            '5-9), it stays a named candidate and trial 45 stays the default')
    return [f'- **The long-grammar substrate** is trial {frozen["number"]} of the second study ({where}): it holds '
            f'{frozen["rows_held"]} of {len(frozen["rows"])} rows on seeds {words.seeds(frozen["seeds"])}'
            + (f' and {confirmed["rows_held"]} on the confirmation seeds {words.seeds(confirmed["seeds"])}'
               if confirmed else '') + f'; {role}.']


def across_lines(recorded):
    """MAINTAINING.md's lines on the claims across substrates (notebook 11): trial 45 and the long-grammar substrate
    side by side where both are swept, and the labels over every swept substrate."""
    rows = recorded.get(chapter.ACROSS_NOTEBOOK, chapter.CLAIM_TABLE_KEY, [])
    if not rows:
        return ['- **The same claims on other substrates** (notebook 11): not swept yet (`make substrate-sweep`).']
    names = substrates.in_order(rows[0]['cells'])
    facts = {f['name']: f for f in recorded.get(chapter.ACROSS_NOTEBOOK, chapter.SUBSTRATE_FACTS_KEY, [])}
    labels = [row['label'] for row in rows]
    lines = [f'- **The same claims on {len(names)} substrates** (notebook 11; '
             + ', '.join(substrates.heading(facts[n]) for n in names)
             + f'; seeds 0-4 each): of {len(rows)} claims, {labels.count(across.ROBUST)} are robust (the same verdict, '
             f'holds or does not hold, on every substrate), {labels.count(across.SUBSTRATE_DEPENDENT)} '
             f'substrate-dependent, {labels.count(across.TIED_EVERYWHERE)} tied on every substrate and '
             f'{labels.count(across.UNDECIDED)} undecided (tied or seed-dependent on some substrate).']
    if 't45' in names and 'long' in names:
        differ = [row for row in rows if row['cells']['t45']['verdict'] != row['cells']['long']['verdict']]
        long_trial = facts['long']['trial']
        lines.append(f'  - trial 45 and the long-grammar substrate (trial {long_trial}) side by side: '
                     f'{len(rows) - len(differ)} of {len(rows)} claims get the same verdict on both'
                     + ('.' if not differ else '; they differ on ' + '; '.join(
                         f'{row["text"]} ({row["cells"]["t45"]["verdict"]} on trial 45, '
                         f'{row["cells"]["long"]["verdict"]} on trial {long_trial})' for row in differ) + '.'))
    return lines


def reading_phrase(found):
    """One line on our reading of a claim that does not hold (an agentrl.ch10.explanations.explain dict, or None)."""
    if found is None or found['premise'] is None:
        return 'our reading: none offered (notebook 09)'
    on = f'true on {sum(found["premise_held"])} of {len(found["seeds"])} seeds'
    if found['explanation'] is None:
        return f'our reading is withheld: the fact it rests on ({found["premise"]}) is {on} only (notebook 09)'
    return f'our reading (notebook 09): {found["explanation"]} It rests on this: {found["premise"]}, {on}.'


def timing_lines(long_export=None, sweep=None, options_sweep=None):
    """MAINTAINING.md's generated Timings lines (the long-grammar search, the substrate sweep, the framework options'
    sweep), from their records."""
    path = Path(long_export or CALIBRATION / 'long-grammar' / 'trials.json')
    lines = [long_search_timing(json.loads(path.read_text()))] if path.exists() else []
    options = Path(options_sweep or FRAMEWORK_SWEEP)
    options_line = (options_timing(json.loads(options.read_text())) if options.exists() else
                    '- `make framework-sweep`: not run yet.')
    return lines + [sweep_timing(substrates.load_record(sweep)), options_line]


def with_timings(readme_text, lines=None):
    """readme_text with the block between the timings markers replaced by timing_lines(); None without markers."""
    return replace_between_markers(readme_text, TIMINGS_BEGIN, TIMINGS_END, timing_lines() if lines is None else lines)


def _minutes(seconds):
    return f'{seconds / 60:.0f} min'


def _ending(session, last):
    """How a search session ended, in words: a session killed outside the search never wrote its end."""
    if session.get('ended') != 'running':
        return session.get('ended', '')
    return ('still running when this was written' if last else
            'killed: no end recorded, its time counted up to its last record')


def long_search_timing(export):
    """The Timings line of the long-grammar search, from its trials.json (parsed): once its budget is used, its
    trials, search time and sessions, and how long a complete and a pruned trial took."""
    decision, recs = decision_from_export(export)
    if decision.action == 'search':  # the study grows with every commit the search makes: no line to go stale
        return ('- `make calibrate-search SEARCH_ARGS="--study long-grammar"` (the second study): still searching; '
                'its record, `calibration/long-grammar/README.md`, has the search time so far.')
    attrs, n = export['attrs'], words.counts(recs)
    rerun = len({r['requeued_from'] for r in recs if r.get('requeued_from') is not None})
    sessions = attrs.get('sessions', [])
    each = '; '.join(f'{session["start"][:10]}, {_minutes(session["seconds"])}, '
                     f'{words.count(session["finished"], "trial")} finished, '
                     f'{_ending(session, i == len(sessions) - 1)}'
                     for i, session in enumerate(sessions))
    spans = []
    for state, word in (('COMPLETE', 'a complete trial'), ('PRUNED', 'a pruned one')):
        took = sorted(r['seconds'] for r in recs if r['state'] == state and r.get('seconds'))
        if took:
            spans.append(f'{word} {took[0] / 60:.0f}-{took[-1] / 60:.0f} min (median {took[len(took) // 2] / 60:.0f})')
    return (f'- `make calibrate-search SEARCH_ARGS="--study long-grammar"` (the second study, 2 trials at a time, '
            f'from its record): {len(recs)} trials ({n["COMPLETE"]} complete, {n["PRUNED"]} pruned, {n["FAIL"]} '
            f'failed, of them {rerun} cut by a stop and run again) in '
            f'{words.duration(attrs.get("search_seconds", 0.0))} of search time, of a budget of '
            f'{words.duration(attrs["budget"]["seconds"])}; ' + (', '.join(spans) + '. ' if spans else '')
            + f'Its sessions: {each}.')


def options_timing(record):
    """The Timings line of the framework options' sweep (notebook 12), from its record."""
    session = record['session']
    n_runs = sum(len(runs) for runs in record['runs'].values())
    return (f'- `make framework-sweep` (every run of notebook 12, from its record): {session["date"]}, {n_runs} runs '
            f'({n_runs // len(record["seeds"])} settings on seeds {words.seeds(record["seeds"])}, {record["steps"]} '
            f'steps each), {_minutes(record["seconds"])} on {session["scheduler"]} ({session["workers"]} workers, '
            f'{session["cpus"]} CPUs), runs already in the run cache loaded, not trained again.')


def sweep_timing(record):
    """The Timings line of the substrate sweep, from its record: each invocation, and each substrate's runs."""
    if not record['sessions']:
        return '- `make substrate-sweep`: not run yet.'
    entries = record['substrates']
    label = lambda name: (f'trial {entries[name]["trial"]}' + (' (long calls)' if name == 'long' else '')  # noqa: E731
                          if name in entries else name)
    each = '; '.join(f'{session["date"]}, ' + ', '.join(map(label, session['substrates'])) + f' on seeds '
                     f'{words.seeds(session["seeds"])}, {_minutes(session["seconds"])} on {session["scheduler"]} '
                     f'({session["workers"]} workers, {session["cpus"]} CPUs), the RL bases it built included'
                     for session in record['sessions'])
    runs = ', '.join(f'{label(name)} {_minutes(entries[name]["seconds"])}' for name in substrates.in_order(entries))
    return (f'- `make substrate-sweep` (every claim run of notebook 11, from its record): {each}. The runs of one '
            f'substrate, its RL base apart: {runs}.')
