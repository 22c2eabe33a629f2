"""Which of the chapter's verdicts a change of the engine moved: a recorded snapshot of every verdict, set beside
the verdicts the notebooks record now.

Usage: python -m machinery.verdict_shift --snapshot FILE --label TEXT [--results DIR]
writes FILE from the results as they stand (a verdict list, nothing else); `make report` then sets it beside the
current results in REPRODUCTION.md and in the README's faithfulness summary.

A change that only moves the rounding (another MKL branch, an exactly rounded square root in Adam) changes the last
digits of every TinyAgent run, and so possibly a verdict. The snapshot keeps the verdicts from before such a change,
so that the report can say which moved and by how much.
"""
import argparse
import json
import sys
from pathlib import Path

from agentrl import chapter
from agentrl.ch10 import claims
from agentrl.atomic import atomic_output
from agentrl.paths import REPO

SNAPSHOT = REPO / 'reports' / 'verdicts-at-1a00ea7.json'  # the verdicts committed before the arithmetic changed
ENTROPY_LAW_KEY = 'entropy_law_judgement'  # notebook 09's judgement of the entropy-performance law


def verdict_records(recorded):
    """Every verdict the results hold, as flat dicts (group, key, text, verdict, held_on, seeds) in report order:
    the seed-0 claims of notebooks 07 and 08, notebook 09's checks on every seed, its re-checks at twice the scale
    and its judgement of the entropy law. held_on and seeds are None where a verdict is not counted over seeds."""
    records = []
    for stem in chapter.VERDICT_NOTEBOOKS:
        for v in recorded.get(stem, chapter.VERDICTS_KEY, []):
            records.append(dict(group=f'seed 0 (notebook {stem[:2]})', key=v['key'], text=v['text'],
                                verdict=claims.outcome_of(v), held_on=None, seeds=None))
    for group, key in (('every seed (notebook 09)', chapter.SEED_VERDICTS_KEY),
                       ('twice the scale (notebook 09)', chapter.SCALE_VERDICTS_KEY)):
        for v in recorded.get(chapter.SEED_NOTEBOOK, key, []):
            records.append(dict(group=group, key=v['key'], text=v['text'], verdict=v['verdict'],
                                held_on=v['held_on'], seeds=list(v['seeds'])))
    law = recorded.get(chapter.SEED_NOTEBOOK, ENTROPY_LAW_KEY)
    if law:
        records.append(dict(group='entropy law (notebook 09)', key='entropy-law', text=law['rule'],
                            verdict=law['verdict'], held_on=None, seeds=list(law['seeds'])))
    return records


def outcome(record):
    """'holds, 5/5 seeds' or 'holds' for a verdict record."""
    if record['held_on'] is None:
        return record['verdict']
    return f'{record["verdict"]}, {record["held_on"]}/{len(record["seeds"])} seeds'


def paired(snapshot, recorded):
    """({(group, key): record} before, the same now, the keys whose outcome moved, in snapshot order)."""
    before = {(r['group'], r['key']): r for r in snapshot['verdicts']}
    after = {(r['group'], r['key']): r for r in verdict_records(recorded)}
    moved = [k for k in before if k in after and outcome(before[k]) != outcome(after[k])]
    return before, after, moved


def shift_lines(snapshot, recorded):
    """Markdown lines: how many verdicts stayed, then a table of every verdict before and after (moved ones in
    bold). snapshot: what write_snapshot wrote; recorded: the current results (report.Recorded)."""
    before, after, moved = paired(snapshot, recorded)
    keys = list(before) + [k for k in after if k not in before]
    verdict_moved = [k for k in moved if before[k]['verdict'] != after[k]['verdict']]
    missing = [k for k in keys if k not in before or k not in after]
    lines = [f'{len(keys) - len(moved) - len(missing)} of {len(keys)} verdicts are unchanged since '
             f'{snapshot["label"]}; {len(moved)} moved in the seeds they hold on'
             + (f', {len(verdict_moved)} of them in their verdict' if moved else '')
             + (f'; {len(missing)} are on one side only' if missing else '') + '.', '',
             '| where | claim | before | after | |', '|---|---|---|---|---|']
    for key in keys:
        old, new = before.get(key), after.get(key)
        text = (old or new)['text'].replace('|', '\\|')
        cells = [outcome(old) if old else 'not recorded', outcome(new) if new else 'not recorded']
        mark = '**moved**' if key in moved else ('' if key not in missing else '**one side only**')
        if key in moved:
            cells = [f'**{c}**' for c in cells]
        lines.append(f'| {key[0]} | {text} | {cells[0]} | {cells[1]} | {mark} |')
    return lines


def moved_summary(snapshot, recorded):
    """One sentence for the README: which verdicts moved since the snapshot, or that none did."""
    before, after, keys = paired(snapshot, recorded)
    moved = [(before[k], after[k]) for k in keys]
    head = f'- **Since {snapshot["label"]}**: {len(before) - len(moved)} of {len(before)} verdicts unchanged'
    if not moved:
        return [head + '.']
    return [head + '; moved (see `REPRODUCTION.md`):'] + [
        f'  - {old["group"]}: {old["text"]} — {outcome(old)} before, {outcome(new)} now' for old, new in moved]


def load_snapshot(path=SNAPSHOT):
    """The recorded snapshot (dict with label and verdicts), or None if there is none."""
    path = Path(path)
    if not path.is_file():
        return None
    data = json.loads(path.read_text(encoding='utf-8'))
    if not isinstance(data, dict) or not {'label', 'verdicts'} <= set(data):
        raise ValueError(f'{path}: a verdict snapshot needs "label" and "verdicts"; found {sorted(data)}')
    return data


def write_snapshot(recorded, path, label):
    """Record every verdict of the current results, with a label saying what they are from."""
    records = verdict_records(recorded)
    if not records:
        raise ValueError('no verdicts recorded: execute notebooks 07-09 first')
    with atomic_output(Path(path), '.json') as tmp:
        tmp.write_text(json.dumps(dict(label=label, verdicts=records), indent=1, ensure_ascii=False) + '\n',
                       encoding='utf-8')


def main(argv=None):
    from machinery.report import Recorded  # the report imports this module
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--snapshot', type=Path, required=True, help='the file to write')
    parser.add_argument('--label', required=True, help='what the verdicts are from, as the report will name it')
    parser.add_argument('--results', type=Path, default=None, help='results folder (default: results_dir())')
    args = parser.parse_args(argv)
    write_snapshot(Recorded(args.results), args.snapshot, args.label)
    print(f'wrote {args.snapshot}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
