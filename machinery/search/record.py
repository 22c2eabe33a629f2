"""The record of a study in its folder: study.db (the snapshot), trials.csv, trials.json, README.md written from the
study, search.log; committed with git on request."""
import datetime
import json
import subprocess
import time
import warnings
from pathlib import Path

import optuna
from optuna.distributions import CategoricalDistribution

from agentrl.atomic import atomic_output
from agentrl.calibration.freeze import ALL_ROWS, CONFIRM_ROWS, FALLBACK_CANDIDATES, decide, rank
from agentrl.substrate.config import SubstrateConfig
from machinery.search.space import PRUNE_BELOW, SPACE, expression, space_with
from machinery.record_words import band, count, duration, seeds
from machinery.search.storage import budget_used, copy_sqlite, counts, plain, records


MIN_IMPORTANCE_TRIALS = 20  # parameter importances are reported from this many complete trials on


RECORD_FILES = ('study.db', 'trials.csv', 'trials.json', 'README.md', 'search.log')


def _csv_value(value):
    if value is None:
        return ''
    if isinstance(value, float):
        return f'{value:.6g}'
    text = str(value)
    return f'"{text}"' if ',' in text or '"' in text else text


CSV_COLUMNS = ('number', 'state', 'start', 'seconds', 'rows_held', 'band_distance', 'objective', 'candidate')


def trials_csv(recs):
    """One line per trial: number, state, start, seconds, rows held, band distance, objective, then the params."""
    lines = [','.join(CSV_COLUMNS + tuple(name for name, _, _ in SPACE))]
    for r in recs:
        fixed = [r['number'], r['state'], r['start'], None if r['seconds'] is None else round(r['seconds']),
                 r['rows_held'], None if r['band_distance'] is None else f'{r["band_distance"]:.4f}',
                 None if r['value'] is None else f'{r["value"]:.6f}', r['candidate']]
        lines.append(','.join(_csv_value(v) for v in fixed + [r['params'].get(name) for name, _, _ in SPACE]))
    return '\n'.join(lines) + '\n'


def trials_json(study, recs):
    """The whole study as JSON (sorted keys): its attributes and every trial record with its rows."""
    return json.dumps(plain(dict(study=study.study_name, attrs=study.user_attrs, trials=recs)), sort_keys=True,
                      indent=1, allow_nan=False) + '\n'






def rows_table(rows, seed_list, batch_seed_list):
    """A trial's rows in the layout of `make calibrate`: book, band, ours (mean, then each seed), holds."""
    lines = [f'| quantity | book | band (mean over seeds {seeds(seed_list)}; 10.6 batch rows over batch seeds '
             f'{seeds(batch_seed_list)}) | ours: mean (per seed) | holds |', '|---|---|---|---|---|']
    for row in rows:
        fmt = row.get('fmt') or '{:.3g}'
        show = lambda v: 'n/a' if v is None else fmt.format(v)  # noqa: E731
        values = ', '.join(show(v) for v in row.get('values') or ())
        lines.append(f'| {row.get("quantity")} | {row.get("book", "")} | {band(row)} | {show(row.get("mean"))} '
                     f'({values}) | {"yes" if row.get("holds") else "NO"} |')
    return '\n'.join(lines)


def importance_text(study, recs):
    complete = [r for r in recs if r['state'] == 'COMPLETE']
    if len(complete) < MIN_IMPORTANCE_TRIALS:
        return (f'Not yet: Optuna\'s importances need at least {MIN_IMPORTANCE_TRIALS} complete trials here, and the '
                f'study has {len(complete)}.')
    try:
        with warnings.catch_warnings(record=True) as warned:
            warnings.simplefilter('always')
            importances = optuna.importance.get_param_importances(study)
    except (RuntimeError, ValueError) as error:
        return f'Optuna could not compute them: {error}'
    lines = [f'Optuna\'s parameter importances (PED-ANOVA, its default) over the {len(complete)} complete trials, '
             'for the objective:', '', '| parameter | importance |', '|---|---|']
    lines += [f'| {name} | {value:.3f} |' for name, value in importances.items()]
    lines += [f'\nOptuna warned: {w.message}' for w in warned]
    return '\n'.join(lines)


def readme(study, search, recs, decision):
    """calibration/README.md, written from the study."""
    n = counts(recs)
    attrs = study.user_attrs
    protocol, confirmation = attrs.get('protocol') or {}, attrs.get('confirmation_protocol') or {}
    complete = sorted((r for r in recs if r['state'] == 'COMPLETE' and r['rows_held'] is not None),
                      key=lambda r: r['number'])
    out = [f'# {search.title}', '',
           f'Written by `python -m machinery.search` from the Optuna study `{study.study_name}` in `study.db` '
           '(do not edit by hand). `trials.csv` has one line per trial, `trials.json` everything (every row of '
           'every trial on every seed), `search.log` what each session did.', '',
           '## Where it stands', '',
           f'{len(recs)} trials: {n["COMPLETE"]} complete, {n["PRUNED"]} pruned, {n["FAIL"]} failed'
           + (f', {n["RUNNING"]} running' if n['RUNNING'] else '')
           + (f', {n["WAITING"]} queued' if n['WAITING'] else '')
           + f'. Search time {duration(attrs.get("search_seconds", 0.0))} in '
           f'{count(len(attrs.get("sessions", [])), "session")}'
           f'. Budget: {search.budget_trials} complete trials or {duration(search.budget_seconds)}, whichever '
           'comes first.', '',
           f'**The freeze rule says:** {decision.reason}.', '']
    if decision.action == 'freeze':
        frozen = next(r for r in recs if r['number'] == decision.frozen)
        config = SubstrateConfig.from_description(frozen['config'])
        role = '`config.DEFAULT`' if not search.default_rule else (
            'it becomes `config.DEFAULT` by the default rule below' if decision.confirmed else
            'by the default rule below it is a named candidate, not `config.DEFAULT`')
        out += [f'The frozen configuration ({role}), trial {frozen["number"]}:', '', '```python',
                expression(config), '```', '',
                'On the search seeds (what `make calibrate` prints for it):', '',
                rows_table(frozen['rows'], frozen['seeds'], (frozen['protocol'] or {}).get('batch_seeds')), '',
                'On the confirmation seeds:', '',
                rows_table(frozen['confirmation']['rows'], frozen['confirmation']['seeds'],
                           frozen['confirmation']['batch_seeds']), '']
    out += ['## Best rows held over time', '',
            'Complete trials only (a pruned trial was judged on its first seed). A line for each trial that improved '
            'on the best so far, and the last trial:', '',
            '| trial | rows held | band distance | best so far: rows held | band distance | trial |',
            '|---|---|---|---|---|---|']
    best = None
    for r in complete:
        improved = best is None or rank(r) < rank(best)
        best = r if improved else best
        if improved or r is complete[-1]:
            out.append(f'| {r["number"]} | {r["rows_held"]} | {r["band_distance"]:.3f} | {best["rows_held"]} | '
                       f'{best["band_distance"]:.3f} | {best["number"]} |')
    if not complete:
        out.append('| - | - | - | - | - | - |')
    out += ['', '## The best trials', '',
            '| trial | rows held (search seeds) | band distance | confirmation: rows held | band distance | '
            'candidate |', '|---|---|---|---|---|---|']
    for r in sorted(complete, key=rank)[:10]:
        c = r.get('confirmation')
        confirmed = f'{c["rows_held"]} | {c["band_distance"]:.3f}' if c else '- | -'
        origin = r['candidate'] or (f'trial {r["seeded_from"]} there' if r.get('seeded_from') is not None else '')
        out.append(f'| {r["number"]} | {r["rows_held"]} | {r["band_distance"]:.3f} | {confirmed} | {origin} |')
    if not complete:
        out.append('| - | - | - | - | - | - |')
    if complete:
        top = min(complete, key=rank)
        out += ['', f'Trial {top["number"]}, the best so far:', '',
                rows_table(top['rows'], top['seeds'], (top['protocol'] or {}).get('batch_seeds')), '',
                'Its configuration:', '', '```python',
                expression(SubstrateConfig.from_description(top['config'])), '```']
    out += ['', '## Which parameters mattered', '', importance_text(study, recs), '',
            '## The protocol (fixed before the search started)', '',
            f'- A trial builds the candidate\'s RL base, then measures GRPO seeds {seeds(protocol.get("seeds"))} '
            f'({protocol.get("short_steps")} and {protocol.get("long_steps")} steps, {protocol.get("attempts")} '
            'held-out attempts per task) and the single-batch pushes of section 10.6 on batch seeds '
            f'{seeds(protocol.get("batch_seeds"))}. A row is judged on the mean over the seeds.',
            '- Band distance: per row 0 inside the band, else the distance to the nearest edge divided by the band\'s '
            'width; summed over the rows. The objective is rows held + 1 / (1 + band distance): rows held first, band '
            'distance second.',
            f'- Pruning: a trial whose first seed alone holds fewer than {PRUNE_BELOW} of the {ALL_ROWS} rows is '
            'pruned; its other seeds are not measured.',
            f'- Freeze rule: a candidate holding all {ALL_ROWS} rows is measured again on seeds '
            f'{seeds(confirmation.get("seeds"))} (batch seeds {seeds(confirmation.get("batch_seeds"))}); if it holds '
            'at least '
            f'{CONFIRM_ROWS} there, it is frozen. If none is confirmed after {search.budget_trials} complete trials or '
            f'{duration(search.budget_seconds)} of search, whichever comes first, the {FALLBACK_CANDIDATES} with the '
            'most rows held on the search seeds (ties: the smaller band distance) are measured on the confirmation '
            'seeds, and the one holding the most rows there (same tie rule) is frozen.',
            '- The search space: ' + ', '.join(f'`{name}` {_space_text(distribution)}'
                                               for name, _, distribution in space_with(search.fixed))
            + '.' + first_trials_text(search, attrs)]
    if search.default_rule:
        out += [f'- The default rule: {search.default_rule}']
    out += ['',
            '## Running it', '',
            '- `make calibrate-search` continues the study in 2 processes until the budget is used or the freeze rule '
            'has something to confirm (`make calibrate-search SEARCH_ARGS="--minutes 50"` stops after 50 minutes; '
            'the trials it cuts run again, before any new sample, next time). Ctrl-C stops it within seconds and keeps '
            'every finished '
            'trial. `SEARCH_ARGS=--commit` commits the record after every trial.',
            '- `make calibrate-confirm` applies the freeze rule: it measures what the rule asks for on the '
            'confirmation seeds, says what it decided and why, and prints the chosen configuration to paste as '
            '`config.DEFAULT` (the freeze commit is made by hand).',
            '- A fresh clone resumes the study: the workers write a git-ignored copy of `study.db` '
            '(`.cache/calibration/live.db`), made from the committed one when missing or behind it, and `study.db` '
            'is rewritten from it (a consistent snapshot) after every finished trial.', '',
            '## A larger search on several machines', '',
            'Point the study at a database server Optuna supports (PostgreSQL or MySQL; install its driver, e.g. '
            '`pip install psycopg2-binary`), and run the same command on every machine; each runs 2 workers, and the '
            'server hands each trial to one worker. The first session copies this `study.db` onto the server:', '',
            '```bash', 'python -m machinery.search search --storage postgresql://user@host/db', '```', '',
            'Search time is then summed over the machines. When it is done, bring the study back into this folder '
            '(study.db, the exports, this README) and commit it:', '',
            '```bash', 'python -m machinery.search record --storage postgresql://user@host/db',
            'python -m machinery.search confirm --storage postgresql://user@host/db', '```', '']
    return '\n'.join(out)


def first_trials_text(search, attrs):
    """The protocol's sentence on the study's first trials (and on the parameters it holds fixed)."""
    text = ''
    if search.fixed:
        text += (' This study holds ' + ', '.join(f'`{name}` at {value!r}' for name, value in search.fixed)
                 + ' and searches the rest.')
    seeded = attrs.get('seeded_from')
    if seeded:
        return text + (f' Its first trials are the {seeded["count"]} best complete trials of the study in '
                       f'`{seeded["folder"]}` (in the freeze rule\'s order) with only those parameters changed, '
                       'queued with `enqueue_trial`; then TPE goes on from them.')
    return text + ' The first two trials are the named candidates `main` and `c18` (`agentrl/substrate/config.py`).'






def _space_text(distribution):
    if isinstance(distribution, CategoricalDistribution):
        return '{' + ', '.join(map(str, distribution.choices)) + '}'
    return f'{distribution.low:g}-{distribution.high:g}' + (' (log)' if distribution.log else '')


def write_text(path, text):
    with atomic_output(path, suffix=Path(path).suffix) as tmp:
        tmp.write_text(text)


def write_record(study, search, commit_it=True):
    """The record under the folder: the snapshot study.db (SQLite only), trials.csv, trials.json, README.md; with
    search.commit and `commit_it`, committed."""
    folder = Path(search.folder)
    if not search.storage:
        copy_sqlite(search.live_path(), folder / 'study.db')
    recs = records(study)
    write_text(folder / 'trials.csv', trials_csv(recs))
    write_text(folder / 'trials.json', trials_json(study, recs))
    write_text(folder / 'README.md', readme(study, search, recs, decide(recs, budget_used(study, search))))
    if search.commit and commit_it:
        n = counts(recs)
        best = max((r['rows_held'] for r in recs if r['state'] == 'COMPLETE' and r['rows_held'] is not None),
                   default=None)
        commit(folder, f'Calibration study: {len(recs)} trials ({n["COMPLETE"]} complete, {n["PRUNED"]} pruned, '
                       f'{n["FAIL"]} failed), best {best} of {ALL_ROWS} rows held')
    return recs


def commit(folder, message, attempts=10):
    """git add + commit of the record files only (other files of the tree are left alone); True if committed."""
    folder = Path(folder).resolve()
    files = [str(folder / name) for name in RECORD_FILES if (folder / name).exists()]
    for _ in range(attempts):
        add = subprocess.run(['git', 'add', '--', *files], cwd=folder, capture_output=True, text=True)
        done = add.returncode == 0 and subprocess.run(['git', 'commit', '-q', '-m', message, '--', *files], cwd=folder,
                                                      capture_output=True, text=True)
        if done and done.returncode == 0:
            return True
        error = (add.stderr if add.returncode else done.stderr + done.stdout)
        if 'index.lock' not in error:
            if 'nothing to commit' not in error and 'no changes added' not in error:
                print(f'git commit of the record failed: {error.strip()}', flush=True)
            return False
        time.sleep(3)
    print('git commit of the record failed: index.lock stayed', flush=True)
    return False


def log(search, line):
    """One line on stdout and in search.log."""
    stamped = f'{datetime.datetime.now().isoformat(sep=" ", timespec="seconds")} {line}'
    print(stamped, flush=True)
    Path(search.folder).mkdir(parents=True, exist_ok=True)
    with open(Path(search.folder) / 'search.log', 'a') as file:
        file.write(stamped + '\n')


STATE_WORDS = dict(COMPLETE='complete', PRUNED='pruned', FAIL='failed', RUNNING='running', WAITING='queued')


def trial_line(record):
    if record['state'] in ('COMPLETE', 'PRUNED') and record['rows_held'] is not None:
        seeds = 'seeds ' + ', '.join(map(str, record['seeds'] or []))
        text = (f'{record["rows_held"]} of {ALL_ROWS} rows on {seeds}, band distance {record["band_distance"]:.3f}')
    else:
        text = (record['error'] or 'interrupted').strip().splitlines()[-1]
    return f'trial {record["number"]} {STATE_WORDS[record["state"]]} in {record["seconds"] or 0:.0f} s: {text}'
