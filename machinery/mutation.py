"""`make mutation`: mutation testing of the modules that carry the chapter's mechanisms, with the fast suite, and
the report it writes.

    python -m machinery.mutation run [--keep] [--max-children N] [--no-hand] [MUTANT ...]  # mutmut, then the report
    python -m machinery.mutation hand [--jobs N]                                # the hand-written mutants only
    python -m machinery.mutation report [--from-mutants]                        # the report from the data only

mutmut (pinned in requirements-dev.txt, configured in pyproject.toml's [tool.mutmut]) copies agentrl/ into mutants/,
rewrites each function of the mutated modules into a trampoline over its mutants and runs, for every mutant, the fast
tests that call the function (machinery/mutation_plugin.py lets the mutants reach the sandbox's worker process).
`run` starts from an empty mutants/ unless --keep (then mutmut keeps its earlier verdicts and retests only the named
mutants, or the new and changed ones).

`run` keeps mutmut's verdicts as data in reports/mutation-results.json, since mutants/ is mutmut's working copy and is
not; the report (reports/mutation.md) and MAINTAINING.md's mutation paragraph are written from that file and the
justifications by machinery/mutation_report.py, which says how a survivor is matched to its justification and what the
score counts. `report` rewrites both from the committed data (or, with --from-mutants, reads mutmut's verdicts in
mutants/ again first).

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
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

from agentrl.paths import REPO
from machinery.mutation_report import (RESULTS, function_of, module_name, mutated_modules, read_data, save_results,
                                       write_data, write_report)

HAND_MUTANTS = REPO / 'reports' / 'hand-mutants.toml'  # the slips a reviewer would try, beyond mutmut's operators
HAND_TIMEOUT = 900  # seconds for one hand mutant's test run (the unmutated run takes about 30 s here)
MUTANTS = REPO / 'mutants'
RUN_RECORD = MUTANTS / 'agentrl-mutation-runs.json'  # what each `run` measured (time, mutants tested)


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
    data = read_data(RESULTS)
    data['hand'] = dict(commit=commit, jobs=jobs, seconds=round(time.monotonic() - start, 1),
                        clean_seconds=clean['seconds'],
                        mutants=[dict(path=m['path'], slip=m['slip'], **v) for m, v in zip(mutants, verdicts)])
    write_data(RESULTS, data)
    return data['hand']


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
    p = sub.add_parser('report', help='write reports/mutation.md and the MAINTAINING.md paragraph from the committed '
                                      'data and the justifications')
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
