"""The mutation report: mutmut's verdicts and the hand mutants' as committed data, matched to their justifications,
scored, and written as reports/mutation.md and MAINTAINING.md's mutation paragraph.

`make mutation` (machinery/mutation.py) keeps mutmut's verdicts as data in reports/mutation-results.json (committed:
every mutant's status, the survivors' changed lines, the runs' times), since mutants/ is mutmut's working copy and is
not. The report and the paragraph are written from that file and the justifications in
reports/mutation-justifications.toml, never by hand. A surviving mutant is identified by its module, its function and
the text of the line it changes, before and after (not by mutmut's number or a line number, which shift when code is
added above it); each justification carries that identity, a kind ('equivalent': no input can tell the mutant from
the code; 'not worth a test': it changes behaviour nobody relies on) and one line of why. The score is the share of
non-equivalent mutants the suite detects (killed, or timed out: the mutant made a test run past its time limit). A
survivor without a justification, and a justification that matches no survivor (stale: its mutant is killed now or
its line changed), are listed as such.
"""
import json
import tomllib
from collections import Counter, defaultdict
from pathlib import Path

from agentrl.paths import MAINTAINING, REPO
from machinery.readme_blocks import replace_between_markers, write_text

REPORT = REPO / 'reports' / 'mutation.md'
RESULTS = REPO / 'reports' / 'mutation-results.json'  # mutmut's verdicts and the runs' times, as committed data
README_BEGIN = ('<!-- mutation: begin (written by `make mutation` from reports/mutation-results.json; do not edit by '
                'hand) -->')
README_END = '<!-- mutation: end -->'
JUSTIFICATIONS = REPO / 'reports' / 'mutation-justifications.toml'
KINDS = ('equivalent', 'not worth a test')
TARGET = 0.90
# mutmut's statuses, grouped for the report
DETECTED = ('killed', 'timeout')


def mutated_modules():
    """The source files [tool.mutmut] only_mutate selects, as paths relative to the repository."""
    import fnmatch

    with open(REPO / 'pyproject.toml', 'rb') as f:
        patterns = tomllib.load(f)['tool']['mutmut']['only_mutate']
    files = sorted(p.relative_to(REPO).as_posix() for p in (REPO / 'agentrl').rglob('*.py'))
    return [f for f in files if any(fnmatch.fnmatch(f, p) for p in patterns)]


def module_name(path):
    return path.removesuffix('.py').replace('/', '.').removesuffix('.__init__')


def function_of(mutant):
    """'agentrl.core.kl.x_kl_penalty__mutmut_3' -> 'kl_penalty'; 'xǁSandboxǁrun__mutmut_1' -> 'Sandbox.run'."""
    name = mutant.rpartition('.')[2].partition('__mutmut_')[0]
    if name.startswith('x_'):
        return name[2:]
    _, cls, method = name.split('ǁ')
    return f'{cls}.{method}'


def identity(module, function, line, mutated):
    """The stable key of a mutant: where it is and what it changes, not mutmut's number or a line number."""
    return (module, function, ' '.join(line.split()), ' '.join(mutated.split()))


def load_justifications(path=JUSTIFICATIONS):
    """{identity: dict(kind, why)} from the TOML file ([[survivor]] tables with module, function, line, mutant)."""
    if not Path(path).is_file():
        return {}
    with open(path, 'rb') as f:
        entries = tomllib.load(f).get('survivor', [])
    out = {}
    for entry in entries:
        missing = {'module', 'function', 'line', 'mutant', 'kind', 'why'} - set(entry)
        if missing:
            raise ValueError(f'{path}: a [[survivor]] entry lacks {sorted(missing)}: {entry}')
        if entry['kind'] not in KINDS:
            raise ValueError(f'{path}: kind must be one of {KINDS}, got {entry["kind"]!r}')
        key = identity(entry['module'], entry['function'], entry['line'], entry['mutant'])
        if key in out:
            raise ValueError(f'{path}: two entries for {key}')
        out[key] = dict(kind=entry['kind'], why=entry['why'].strip())
    return out


def summarise(rows, justifications):
    """Counts per module and overall, the survivors with their justification, and the stale justifications."""
    per_module = defaultdict(Counter)
    survivors, used = [], set()
    for row in rows:
        status = row['status']
        if status == 'survived':
            key = identity(row['module'], row['function'], row['line'], row['mutated'])
            justification = justifications.get(key)
            if justification:
                used.add(key)
                status = 'equivalent' if justification['kind'] == 'equivalent' else 'survived'
            survivors.append(dict(row, key=key, justification=justification))
        per_module[row['module']][status] += 1
        per_module[row['module']]['total'] += 1
    stale = [dict(key=key, **value) for key, value in justifications.items() if key not in used]
    return per_module, survivors, stale


def score(counts):
    """(detected, non-equivalent): killed + timeout over every mutant but the equivalent ones."""
    detected = sum(counts[s] for s in DETECTED)
    return detected, counts['total'] - counts['equivalent']


def checked_score(counts):
    """score() over the checked mutants only (a partial run leaves some 'not checked')."""
    checked = Counter(counts)
    checked['total'] -= counts['not checked']
    return score(checked)


def overall(per_module):
    """(the counts summed over modules, detected, relevant) for the checked mutants."""
    total = Counter()
    for counts in per_module.values():
        total.update(counts)
    return (total, *checked_score(total))


def hand_detected(hand):
    """How many of the recorded hand mutants the tests detected."""
    return sum(m['status'] in DETECTED for m in hand['mutants'])


def _percent(detected, relevant):
    return f'{100 * detected / relevant:.1f}%' if relevant else 'n/a'


def render(rows, justifications, runs=None, hand=None):
    """The report's Markdown text (hand: the hand mutants' recorded verdicts)."""
    per_module, survivors, stale = summarise(rows, justifications)
    total, detected, relevant = overall(per_module)
    unchecked = total['not checked']
    modules = [m for m in (module_name(p) for p in mutated_modules()) if per_module[m]['total']]  # with mutants
    lines = ['# Mutation score', '',
             '<!-- written by `make mutation` (machinery/mutation.py) from reports/mutation-results.json '
             '(mutmut\'s verdicts and the hand mutants\') and the justifications in '
             'reports/mutation-justifications.toml; do not edit by hand -->', '']
    if unchecked:
        lines += [f'**PARTIAL RUN**: {unchecked} of {total["total"]} mutants were not checked; the score below counts '
                  'only the checked ones. Modules with every mutant checked: '
                  + ', '.join(f'`{m}`' for m in modules if per_module[m]['not checked'] == 0)
                  + '; modules not (or not fully) checked: '
                  + ', '.join(f'`{m}`' for m in modules if per_module[m]['not checked'])
                  + '.', '']
    verdict = 'meets' if relevant and detected / relevant >= TARGET else 'does not meet'
    lines += [f'**Score: {_percent(detected, relevant)}** of the non-equivalent mutants detected ({detected} of '
              f'{relevant}: killed or timed out), which {verdict} the target of {TARGET:.0%}. '
              f'{total["equivalent"]} mutants are equivalent (justified below).', '']
    for r in runs or []:
        per = f' ({r["seconds"] / r["tested"]:.2f} s per mutant)' if r.get('tested') else ''
        lines.append(f'- Run: `{r["command"]}` at commit `{r.get("commit", "?")}`, mutmut {r["mutmut"]}, '
                     f'{r["children"]} worker processes: {r["seconds"] / 60:.1f} min wall time, {r["tested"]} mutants '
                     f'tested for the first time{per}' + (f'; {r["note"]}' if r.get('note') else '') + '.')
    if runs:
        seconds, tested = sum(r['seconds'] for r in runs), sum(r['tested'] for r in runs)
        if len(runs) > 1 and tested:
            lines.append(f'- In all: {seconds / 60:.1f} min for {tested} mutants tested ({seconds / tested:.2f} s per '
                         'mutant, retests included).')
        lines.append('')
    lines += ['Mutated with the fast tests of these modules only (pyproject.toml, `[tool.mutmut]`); a mutant is '
              '*killed* when a test fails, *timeout* when the tests run past mutmut\'s limit (15 times their clean '
              'duration), *survived* when every test passes; *no tests* means no selected test calls the function.', '',
              '| module | mutants | killed | timeout | survived | equivalent | no tests | not checked | other '
              '| score |',
              '|---|---|---|---|---|---|---|---|---|---|']
    known = {'total', 'killed', 'timeout', 'survived', 'equivalent', 'no tests', 'not checked'}
    for m in modules + ['**all**']:
        c = total if m == '**all**' else per_module[m]
        other = sum(v for k, v in c.items() if k not in known)
        name = m if m == '**all**' else f'`{m}`'
        lines.append(f'| {name} | {c["total"]} | {c["killed"]} | {c["timeout"]} | {c["survived"]} | '
                     f'{c["equivalent"]} | {c["no tests"]} | {c["not checked"]} | {other} | '
                     f'{_percent(*checked_score(c))} |')
    lines += ['', '## Surviving mutants', '',
              'Each with its justification from reports/mutation-justifications.toml (keyed by module, function and '
              'the changed line before and after). Equivalent ones are left out of the score; the others count as '
              'not detected.', '']
    unjustified = [s for s in survivors if not s['justification']]
    if unjustified:
        lines += [f'**{len(unjustified)} survivors have no justification yet** (marked *unjustified*).', '']
    by_module = defaultdict(list)
    for s in survivors:
        by_module[s['module']].append(s)
    for m in modules:
        if not by_module[m]:
            continue
        lines += [f'### `{m}`', '']
        for s in by_module[m]:
            where = f'{s["path"]}:{s["lineno"]}' if s.get('lineno') else s['path']
            j = s['justification']
            label = f'**{j["kind"]}**: {j["why"]}' if j else '**unjustified**'
            change = f'`{s["line"]}` → `{s["mutated"] or "(deleted)"}`'
            lines.append(f'- `{s["function"]}` ({where}): {change} — {label}')
        lines.append('')
    if not survivors:
        lines += ['None.', '']
    lines += hand_lines(hand)
    lines += ['## Stale justifications', '']
    if stale:
        lines += ['These entries of reports/mutation-justifications.toml match no surviving mutant (the mutant is '
                  'killed now, was not checked in this run, or its line changed): review and remove them.', '']
        lines += [f'- `{module}` `{function}`: `{line}` → `{mutated}` ({s["kind"]})'
                  for s in stale for module, function, line, mutated in [s['key']]]
    else:
        lines += ['None: every justification matches a surviving mutant.']
    return '\n'.join(lines) + '\n'


def read_data(path):
    path = Path(path)
    return json.loads(path.read_text(encoding='utf-8')) if path.is_file() else {}


def write_data(path, data):
    write_text(Path(path), json.dumps(data, indent=1, ensure_ascii=False) + '\n')


def save_results(rows, runs, path=RESULTS):
    """Keep mutmut's verdicts as committed data: {runs, status: {path: {mutant: status}}, survivors: {mutant: ...}}
    (the hand mutants' verdicts in the same file are kept)."""
    status, survivors = defaultdict(dict), {}
    for row in rows:
        status[row['path']][row['mutant']] = row['status']
        if row['status'] == 'survived':
            survivors[row['mutant']] = dict(line=row['line'], mutated=row['mutated'], lineno=row['lineno'])
    data = read_data(path)
    data.update(mutmut_runs=runs, status=status, survivors=survivors)
    write_data(path, data)


def load_results(path=RESULTS):
    """(rows, runs) as collect() and the run record gave them, from the committed data file."""
    data = read_data(path)
    if 'status' not in data:
        raise FileNotFoundError(f'{path} holds no mutmut verdicts: run `make mutation` to record them')
    rows = []
    for source, statuses in data['status'].items():
        for mutant, status in statuses.items():
            row = dict(module=module_name(source), path=source, mutant=mutant, function=function_of(mutant),
                       status=status)
            if status == 'survived':
                row.update(data['survivors'][mutant])
            rows.append(row)
    return rows, data['mutmut_runs']


def readme_lines(rows, justifications, runs, hand=None):
    """MAINTAINING.md's paragraph on the measured score, from the same data as the report."""
    per_module, survivors, _ = summarise(rows, justifications)
    total, detected, relevant = overall(per_module)
    unjustified = sum(not s['justification'] for s in survivors)
    not_worth = sum(bool(s['justification']) and s['justification']['kind'] != 'equivalent' for s in survivors)
    full = [r for r in runs if r['command'] == 'make mutation']
    partial = f'a **partial** run, {total["not checked"]} of {total["total"]} mutants not checked' \
        if total['not checked'] else f'all {total["total"]} mutants checked'
    commits = sorted({r.get('commit', '?') for r in runs})
    text = (f'Measured ({partial}, at commit{"s" if len(commits) > 1 else ""} '
            + ', '.join(f'`{c}`' for c in commits) + f'): **{_percent(detected, relevant)}** of the {relevant} '
            f'non-equivalent mutants are detected ({detected} killed or timed out), against a target of '
            f'{TARGET:.0%}; {total["equivalent"]} mutants are equivalent, {not_worth} survivors are judged not worth a '
            f'test and {unjustified} have no justification yet.')
    if full:
        r = full[-1]
        text += (f' A whole run from an empty `mutants/` took {r["seconds"] / 60:.0f} min on this project\'s machine '
                 f'({r["children"]} worker processes, {r["tested"]} mutants'
                 + (f'; {r["note"]}' if r.get('note') else '') + ').')
    if hand:
        text += (f' Of the {len(hand["mutants"])} hand-written mutants (`reports/hand-mutants.toml`: a KL taken the '
                 f'wrong way round, a temperature or a generator forgotten, a sandbox limit loosened), '
                 f'{hand_detected(hand)} are detected ({hand["seconds"] / 60:.0f} min, {hand["jobs"]} at a time'
                 + (f'; last run at `{hand["commit"]}`' if hand.get('commit') and hand['commit'] not in commits
                    else '') + ').')
    return [text]


def readme_with_score(readme_text, lines):
    """readme_text with its mutation paragraph replaced; missing markers raise."""
    updated = replace_between_markers(readme_text, README_BEGIN, README_END, lines)
    if updated is None:
        raise ValueError(f'MAINTAINING.md lacks the markers {README_BEGIN!r} ... {README_END!r} around the '
                         'mutation score')
    return updated


def write_report(path=REPORT, readme=MAINTAINING):
    """The report and MAINTAINING.md's paragraph, from the committed data and the justifications."""
    rows, runs = load_results()
    hand = load_hand_results()
    justifications = load_justifications()
    text = render(rows, justifications, runs=runs, hand=hand)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text(path, text)
    if readme is not None:
        paragraph = readme_lines(rows, justifications, runs, hand)
        write_text(readme, readme_with_score(readme.read_text(encoding='utf-8'), paragraph))
    return text

def load_hand_results(path=RESULTS):
    """The committed verdicts on the hand mutants, or None if none were recorded."""
    return read_data(path).get('hand')


def _cell(text):
    """text as one Markdown table cell: a bare pipe (a slip may say KL(ref || pi)) would end the cell early."""
    return text.replace('|', '\\|')


def hand_lines(hand):
    """The report's section on the hand mutants."""
    lines = ['## Hand-written mutants', '',
             'The slips a reviewer would try that mutmut\'s operators do not write (reports/hand-mutants.toml), each '
             'applied to a copy of the tree and tested with the same fast tests.', '']
    if not hand:
        return lines + ['*Not run yet: `make mutation` runs them.*', '']
    lines += [f'**{hand_detected(hand)} of {len(hand["mutants"])} detected** at commit `{hand["commit"]}`, '
              f'{hand["jobs"]} at a time: {hand["seconds"] / 60:.1f} min (the unmutated run: '
              f'{hand["clean_seconds"]:.0f} s).', '',
              '| file | the slip | verdict | first test that fails |', '|---|---|---|---|']
    for m in hand['mutants']:
        verdict = m['status'] if m['status'] in DETECTED else '**survived**'
        test = f'`{_cell(m["test"])}`' if m['test'] else ''
        lines.append(f'| `{_cell(m["path"])}` | {_cell(m["slip"])} | {verdict} | {test} |')
    return lines + ['']
