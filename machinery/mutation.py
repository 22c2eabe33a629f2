"""`make mutation`: mutation testing of the modules that carry the chapter's mechanisms, with the fast suite, and
the report it writes.

    python -m machinery.mutation run [--keep] [--max-children N] [--no-hand] [MUTANT ...]  # mutmut, then the report
    python -m machinery.mutation hand [--jobs N]                                # the hand-written mutants only
    python -m machinery.mutation report [--from-mutants]                        # the report from the data only

mutmut (pinned in requirements.txt, configured in pyproject.toml's [tool.mutmut]) copies agentrl/ into mutants/,
rewrites each function of the mutated modules into a trampoline over its mutants and runs, for every mutant, the fast
tests that call the function (machinery/mutation_plugin.py lets the mutants reach the sandbox's worker process).
`run` starts from an empty mutants/ unless --keep (then mutmut keeps its earlier verdicts and retests only the named
mutants, or the new and changed ones).

`run` keeps mutmut's verdicts as data in reports/mutation-results.json (committed: every mutant's status, the
survivors' changed lines, the runs' times), since mutants/ is mutmut's working copy and is not. The report
(reports/mutation.md) and the README's mutation paragraph are written from that file and the justifications in
reports/mutation-justifications.toml, never by hand; `report` rewrites both from the committed data (or, with
--from-mutants, reads mutmut's verdicts in mutants/ again first). A surviving mutant is identified by its module,
its function and the text of the line it changes, before and after (not by mutmut's number or a line number, which
shift when code is added above it); each justification carries that identity, a kind ('equivalent': no input can
tell the mutant from the code; 'not worth a test': it changes behaviour nobody relies on) and one line of why. The
score is the share of non-equivalent mutants the suite detects (killed, or timed out: the mutant made a test run past
its time limit). A survivor without a justification, and a justification that matches no survivor (stale: its mutant
is killed now or its line changed), are listed as such.

mutmut's operators change one token (an operator, a constant, an argument); they do not write the slips a reviewer
of RL code tries first: a KL taken the other way round, a temperature or a generator left out, a limit loosened.
Those are written by hand in reports/hand-mutants.toml; after a whole mutmut run (or with `hand`), each is applied to
a copy of the tree and the same fast tests run there, two copies at a time.
"""
import argparse
import ast
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

from machinery.report import between_markers, replace_between_markers, write_text
from agentrl.paths import README, REPO

REPORT = REPO / 'reports' / 'mutation.md'
RESULTS = REPO / 'reports' / 'mutation-results.json'  # mutmut's verdicts and the runs' times, as committed data
README_BEGIN = ('<!-- mutation: begin (written by `make mutation` from reports/mutation-results.json; do not edit by '
                'hand) -->')
README_END = '<!-- mutation: end -->'
HAND_MUTANTS = REPO / 'reports' / 'hand-mutants.toml'  # the slips a reviewer would try, beyond mutmut's operators
HAND_TIMEOUT = 900  # seconds for one hand mutant's test run (the unmutated run takes about 30 s here)
JUSTIFICATIONS = REPO / 'reports' / 'mutation-justifications.toml'
MUTANTS = REPO / 'mutants'
RUN_RECORD = MUTANTS / 'agentrl-mutation-runs.json'  # what each `run` measured (time, mutants tested)
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


def changed_lines(diff):
    """(original lines, mutated lines) of a unified diff, each stripped and joined by ' ⏎ '."""
    before, after = [], []
    for line in diff.splitlines():
        if line.startswith(('---', '+++', '@@')):
            continue
        if line.startswith('-'):
            before.append(line[1:].strip())
        elif line.startswith('+'):
            after.append(line[1:].strip())
    return ' ⏎ '.join(before), ' ⏎ '.join(after)


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


def source_line_number(path, function, text):
    """The line number of the first line of function `function` in the source file whose text is `text`, or None."""
    source = (REPO / path).read_text()
    want = ' '.join(text.split(' ⏎ ')[0].split())
    lines = source.splitlines()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ClassDef) and '.' in function and node.name == function.split('.')[0]:
            body = node.body
        elif isinstance(node, ast.Module):
            body = node.body
        else:
            continue
        for item in body:
            if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item.name == function.split('.')[-1]:
                for number in range(item.lineno, item.end_lineno + 1):
                    if ' '.join(lines[number - 1].split()) == want:
                        return number
    return None


def collect(mutants_dir=MUTANTS):
    """[dict(module, path, mutant, function, status)] of every mutant mutmut recorded, with the survivors' changes."""
    from mutmut.mutation.data import SourceFileMutationData
    from mutmut.mutation.diff_apply import get_diff_for_mutant
    from mutmut.stats import status_by_exit_code

    rows = []
    cwd = os.getcwd()
    os.chdir(mutants_dir.parent)  # mutmut reads mutants/ relative to the project root
    try:
        for path in mutated_modules():
            data = SourceFileMutationData(path=Path(path))
            data.load()
            for mutant, code in sorted(data.exit_code_by_key.items(), key=lambda kv: _number_order(kv[0])):
                row = dict(module=module_name(path), path=path, mutant=mutant, function=function_of(mutant),
                           status=status_by_exit_code[code])
                if row['status'] == 'survived':
                    row['line'], row['mutated'] = changed_lines(get_diff_for_mutant(mutant, path=path))
                    row['lineno'] = source_line_number(path, row['function'], row['line'])
                rows.append(row)
    finally:
        os.chdir(cwd)
    return rows


def _number_order(mutant):
    stem, _, number = mutant.rpartition('__mutmut_')
    return stem, int(number) if number.isdigit() else 0


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
            lines.append(f'- In all: {seconds / 60:.1f} min for {tested} mutants tested ({seconds / tested:.2f} s per mutant, '
                         'retests included).')
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


def _read_data(path):
    path = Path(path)
    return json.loads(path.read_text(encoding='utf-8')) if path.is_file() else {}


def _write_data(path, data):
    write_text(Path(path), json.dumps(data, indent=1, ensure_ascii=False) + '\n')


def save_results(rows, runs, path=RESULTS):
    """Keep mutmut's verdicts as committed data: {runs, status: {path: {mutant: status}}, survivors: {mutant: ...}}
    (the hand mutants' verdicts in the same file are kept)."""
    status, survivors = defaultdict(dict), {}
    for row in rows:
        status[row['path']][row['mutant']] = row['status']
        if row['status'] == 'survived':
            survivors[row['mutant']] = dict(line=row['line'], mutated=row['mutated'], lineno=row['lineno'])
    data = _read_data(path)
    data.update(mutmut_runs=runs, status=status, survivors=survivors)
    _write_data(path, data)


def load_results(path=RESULTS):
    """(rows, runs) as collect() and the run record gave them, from the committed data file."""
    data = _read_data(path)
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
    """The README's paragraph on the measured score, from the same data as the report."""
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
                 f'{hand_detected(hand)} are detected ({hand["seconds"] / 60:.0f} min, {hand["jobs"]} at a time).')
    return [text]


def readme_with_score(readme_text, lines):
    """readme_text with its mutation paragraph replaced; missing markers raise."""
    updated = replace_between_markers(readme_text, README_BEGIN, README_END, lines)
    if updated is None:
        raise ValueError(f'README.md lacks the markers {README_BEGIN!r} ... {README_END!r} around the mutation score')
    return updated


def write_report(path=REPORT, readme=README):
    """The report and the README's paragraph, from the committed data and the justifications."""
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


def results_from_mutants():
    """Read mutmut's verdicts in mutants/ (and the times of the runs that made them) into the committed data file."""
    runs = json.loads(RUN_RECORD.read_text()) if RUN_RECORD.is_file() else []
    save_results(collect(), runs)


def load_hand_mutants(path=HAND_MUTANTS):
    """[dict(path, find, replace, slip)] from the TOML file; each `find` must occur exactly once in its file."""
    with open(path, 'rb') as f:
        entries = tomllib.load(f).get('mutant', [])
    for number, entry in enumerate(entries, 1):
        missing = {'path', 'find', 'replace', 'slip'} - set(entry)
        if missing:
            raise ValueError(f'{path}: [[mutant]] number {number} lacks {sorted(missing)}')
        source = REPO / entry['path']
        if not source.is_file():
            raise ValueError(f'{path}: [[mutant]] number {number} names {entry["path"]}, which is not a file')
        count = source.read_text(encoding='utf-8').count(entry['find'])
        if count != 1:
            raise ValueError(f'{path}: [[mutant]] number {number} ({entry["slip"]}): its find text occurs {count} '
                             f'times in {entry["path"]}, it must occur exactly once')
    return entries


def _fast_test_command():
    """The pytest command of [tool.mutmut]'s test selection, without mutmut's plug-in; stops at the first failure."""
    with open(REPO / 'pyproject.toml', 'rb') as f:
        selection = tomllib.load(f)['tool']['mutmut']['pytest_add_cli_args_test_selection']
    return [sys.executable, '-m', 'pytest', '-x', '-q', '-p', 'no:cacheprovider', '-p', 'no:randomly', *selection]


def _copy_tree(dest):
    """Copy the working tree's files (tracked, and untracked but not ignored) to dest: the snapshot every hand
    mutant starts from, so that editing the tree during a run changes none of its verdicts."""
    listed = subprocess.run(['git', 'ls-files', '-z', '--cached', '--others', '--exclude-standard'], cwd=REPO,
                            capture_output=True, check=True).stdout.decode().split('\0')
    for name in filter(None, listed):
        source = REPO / name
        if source.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)


def _first_failure(output):
    for line in output.splitlines():
        if line.startswith(('FAILED ', 'ERROR ')):
            return line.split(' ', 1)[1].split(' - ')[0]
    return None


def try_in_copy(snapshot, mutant=None):
    """Run the fast tests of the mutation run on a copy of the folder `snapshot` (a copy of the tree), with `mutant`
    applied (None: unmutated) -> dict(status 'killed' | 'survived' | 'timeout', test: the first failing one,
    seconds)."""
    with tempfile.TemporaryDirectory(prefix='agentrl-hand-mutant-') as folder:
        tree = Path(folder) / 'tree'
        shutil.copytree(snapshot, tree, symlinks=True)
        if mutant is not None:
            target = tree / mutant['path']
            target.write_text(target.read_text(encoding='utf-8').replace(mutant['find'], mutant['replace'], 1),
                              encoding='utf-8')
        env = dict(os.environ, PYTHONPATH=str(tree), PYTHONDONTWRITEBYTECODE='1')
        start = time.monotonic()
        try:
            done = subprocess.run(_fast_test_command(), cwd=tree, env=env, capture_output=True, text=True,
                                  timeout=HAND_TIMEOUT, start_new_session=True)
        except subprocess.TimeoutExpired:
            return dict(status='timeout', test=None, seconds=round(time.monotonic() - start, 1))
        seconds = round(time.monotonic() - start, 1)
        if done.returncode == 0:
            return dict(status='survived', test=None, seconds=seconds)
        if done.returncode != 1:  # 1: tests failed; anything else: pytest itself could not run them
            raise RuntimeError(f'pytest exited with {done.returncode} on a copy of the tree'
                               + (f' with the hand mutant {mutant["slip"]!r}' if mutant else '')
                               + f':\n{done.stdout[-3000:]}{done.stderr[-3000:]}')
        return dict(status='killed', test=_first_failure(done.stdout), seconds=seconds)


def run_hand(jobs=2, commit=None):
    """Every hand mutant, `jobs` at a time, after an unmutated run that must pass; the verdicts go into RESULTS.
    commit: the tree's commit to record (default: now; `run` passes the one it started from, since by then it has
    rewritten the report files)."""
    mutants = load_hand_mutants()
    start = time.monotonic()
    commit = commit or _git_commit()
    with tempfile.TemporaryDirectory(prefix='agentrl-hand-snapshot-') as snapshot:
        _copy_tree(Path(snapshot))
        clean = try_in_copy(snapshot)
        if clean['status'] != 'survived':
            raise RuntimeError(f'the fast tests fail on an unmutated copy of the tree ({clean}): fix them first')
        print(f'unmutated copy: the fast tests pass in {clean["seconds"]:.0f} s; {len(mutants)} hand mutants, '
              f'{jobs} at a time', flush=True)
        with ThreadPoolExecutor(jobs) as pool:
            futures = {pool.submit(try_in_copy, snapshot, mutant): number for number, mutant in enumerate(mutants)}
            verdicts = [None] * len(mutants)
            for done, future in enumerate(as_completed(futures), 1):
                number = futures[future]
                verdicts[number] = verdict = future.result()
                print(f'[{done}/{len(mutants)}] {verdict["status"]:>8} in {verdict["seconds"]:.0f} s  '
                      f'{mutants[number]["path"]}: {mutants[number]["slip"]}'
                      + (f'  ({verdict["test"]})' if verdict['test'] else ''), flush=True)
    data = _read_data(RESULTS)
    data['hand'] = dict(commit=commit, jobs=jobs, seconds=round(time.monotonic() - start, 1),
                        clean_seconds=clean['seconds'],
                        mutants=[dict(path=m['path'], slip=m['slip'], **v) for m, v in zip(mutants, verdicts)])
    _write_data(RESULTS, data)
    return data['hand']


def load_hand_results(path=RESULTS):
    """The committed verdicts on the hand mutants, or None if none were recorded."""
    return _read_data(path).get('hand')


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
        test = f'`{m["test"]}`' if m['test'] else ''
        lines.append(f'| `{m["path"]}` | {m["slip"]} | {verdict} | {test} |')
    return lines + ['']


def _git_commit():
    done = subprocess.run(['git', 'describe', '--always', '--dirty'], cwd=REPO, capture_output=True, text=True)
    return done.stdout.strip() or '?'


def run(mutants=(), keep=False, max_children=2, note=None, hand=True):
    """mutmut run over the configured modules (or only the named mutants, globs allowed), timed; then, after a
    whole run, the hand mutants (unless hand=False); then the report."""
    import importlib.metadata

    if not keep and MUTANTS.exists():
        shutil.rmtree(MUTANTS)
    mutmut = Path(sys.executable).with_name('mutmut')
    command = [str(mutmut), 'run', '--max-children', str(max_children), *mutants]
    before = _checked_count() if keep else 0
    commit = _git_commit()  # before this run rewrites the report files
    start = time.monotonic()
    done = subprocess.run(command, cwd=REPO)
    seconds = time.monotonic() - start
    record = dict(command='make mutation' if not mutants and not keep else ' '.join(['mutmut', *command[1:]]),
                  seconds=round(seconds, 1), tested=_checked_count() - before, children=max_children,
                  mutmut=importlib.metadata.version('mutmut'), commit=commit, note=note)
    if RUN_RECORD.parent.is_dir():
        runs = json.loads(RUN_RECORD.read_text()) if keep and RUN_RECORD.is_file() else []
        RUN_RECORD.write_text(json.dumps(runs + [record], indent=1))
    print(f'mutmut finished (exit code {done.returncode}) in {seconds / 60:.1f} min')
    results_from_mutants()
    if hand and not mutants and done.returncode == 0:
        run_hand(max_children, commit)
    text = write_report()
    print(next(line for line in text.splitlines() if line.startswith('**Score')))
    return done.returncode


def _checked_count():
    if not MUTANTS.is_dir():
        return 0
    count = 0
    for meta in MUTANTS.rglob('*.py.meta'):
        count += sum(code is not None for code in json.loads(meta.read_text())['exit_code_by_key'].values())
    return count


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    sub = parser.add_subparsers(dest='what', required=True)
    r = sub.add_parser('run', help='run mutmut (from an empty mutants/ unless --keep), then write the report')
    r.add_argument('mutants', nargs='*', help='only these mutants (mutmut names, globs allowed)')
    r.add_argument('--keep', action='store_true', help="keep mutants/ and mutmut's earlier verdicts")
    r.add_argument('--max-children', type=int, default=2)
    r.add_argument('--note', help='a remark recorded with the run time (e.g. the machine was busy)')
    r.add_argument('--no-hand', action='store_true', help='skip the hand-written mutants after a whole run')
    h = sub.add_parser('hand', help='only the hand-written mutants of reports/hand-mutants.toml, then the report')
    h.add_argument('--jobs', type=int, default=2)
    p = sub.add_parser('report', help='write reports/mutation.md and the README paragraph from the committed data '
                                      'and the justifications')
    p.add_argument('--from-mutants', action='store_true',
                   help="first read mutmut's verdicts in mutants/ into reports/mutation-results.json")
    args = parser.parse_args(argv)
    if args.what == 'run':
        return run(args.mutants, keep=args.keep, max_children=args.max_children, note=args.note,
                   hand=not args.no_hand)
    if args.what == 'hand':
        run_hand(args.jobs)
        print(write_report())
        return 0
    if args.from_mutants:
        if not MUTANTS.is_dir():
            parser.error(f'--from-mutants: {MUTANTS} does not exist (run `make mutation` first)')
        results_from_mutants()
    print(write_report())
    return 0


if __name__ == '__main__':
    sys.exit(main())
