"""How long `make` takes, measured rather than typed: run `make` under a clock and keep what it took in a record
that `make report` turns into the README's sentence.

    python -m machinery.make_clock second      time a second `make` (every run already in the run cache)
    python -m machinery.make_clock fresh       time a `make` from whatever caches there are (empty ones for a fresh one)

The notebook runner adds one line per notebook to the file named by $AGENTRL_NOTEBOOK_TIMES (its seconds and the runs
it loaded and trained); this command sets that variable, runs `make`, and writes results/make_times.json with the
total, each notebook, the CPU, the core count, the date, the commit, and whether `git status` was clean before and
after. A `make` that fails writes nothing. The README's second-make paragraph is rendered from the record.
"""
import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from agentrl.atomic import atomic_output
from agentrl.paths import REPO, RESULTS
from machinery import record_words as words

TIMES_VARIABLE = 'AGENTRL_NOTEBOOK_TIMES'  # where the notebook runner appends one JSON line per notebook it executed
RECORD = RESULTS / 'make_times.json'
KINDS = ('fresh', 'second')  # a `make` from empty caches, and one that finds every run and base already cached
BEGIN = '<!-- second make: begin (written by make report from results/make_times.json; do not edit by hand) -->'
END = '<!-- second make: end -->'


def note_notebook(notebook, seconds, runs, environ=os.environ):
    """The runner's side: add one notebook's line to $AGENTRL_NOTEBOOK_TIMES, if it is set (else do nothing).
    runs: the run events the kernel reported (agentrl.progress.beat), a trained one carrying its seconds."""
    path = environ.get(TIMES_VARIABLE)
    if not path:
        return
    trained = {event['run'] for event in runs if event.get('seconds') is not None}
    loaded = {event['run'] for event in runs} - trained
    line = dict(notebook=Path(notebook).stem, seconds=round(float(seconds), 1), trained=len(trained),
                loaded=len(loaded))
    with open(path, 'a', encoding='utf-8') as handle:
        handle.write(json.dumps(line, sort_keys=True) + '\n')


def read_lines(path):
    """The notebook lines the runner appended, in the order it ran them."""
    text = Path(path).read_text(encoding='utf-8') if Path(path).exists() else ''
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def git(*args, repo=REPO):
    return subprocess.run(['git', *args], cwd=repo, capture_output=True, text=True, check=True).stdout


def measure(kind, make_args=(), repo=REPO, run=subprocess.run, clock=time.monotonic):
    """Run `make` in repo with the notebook times switched on -> the record's entry for `kind`; raises
    RuntimeError (and records nothing) when `make` fails."""
    if kind not in KINDS:
        raise ValueError(f'unknown kind of make {kind!r}: expected one of {", ".join(KINDS)}')
    from machinery.substrate_sweep import cpu_name  # here, so that the notebook runner never imports torch for it
    before = git('status', '--porcelain', repo=repo).splitlines()
    commit = git('rev-parse', '--short', 'HEAD', repo=repo).strip()
    with tempfile.TemporaryDirectory(prefix='agentrl-clock-') as folder:
        times = Path(folder) / 'notebooks.jsonl'
        env = dict(os.environ, **{TIMES_VARIABLE: str(times)})
        started = clock()
        done = run(['make', *make_args], cwd=repo, env=env)
        seconds = clock() - started
        if done.returncode != 0:
            raise RuntimeError(f'make exited with status {done.returncode}: nothing recorded')
        notebooks = read_lines(times)
    after = git('status', '--porcelain', repo=repo).splitlines()
    return dict(kind=kind, seconds=round(seconds, 1), notebooks=notebooks, cpu=cpu_name(), cores=os.cpu_count(),
                date=datetime.date.today().isoformat(), commit=commit, clean_before=not before,
                changed_after=sorted(set(after) - set(before)))


def load(path=RECORD):
    """The committed record: {kind: entry}; {} if there is none yet."""
    path = Path(path)
    return json.loads(path.read_text(encoding='utf-8')) if path.exists() else {}


def save(entry, path=RECORD):
    """Put entry into the record under its kind, leaving the other kind as it was (written atomically)."""
    record = dict(load(path), **{entry['kind']: entry})
    with atomic_output(Path(path), '.json') as tmp:
        tmp.write_text(json.dumps(record, sort_keys=True, indent=1) + '\n', encoding='utf-8')
    return record


def spoken(seconds):
    """A wall-clock time as the README writes it: 42.3 -> '42 s', 120.4 -> '2 min 00 s', 3725 -> '1 h 02 min'."""
    whole = round(seconds)
    if whole < 60:
        return f'{whole} s'
    if whole < 3600:
        return f'{whole // 60} min {whole % 60:02d} s'
    hours, minutes = divmod(round(whole / 60), 60)
    return f'{hours} h {minutes:02d} min'


def second_make_lines(record):
    """The README's paragraph on a second `make`, from the record's 'second' entry."""
    entry = record.get('second')
    if entry is None:
        return ['A second `make` has not been timed yet (`make clock KIND=second`).']
    trained = sum(n['trained'] for n in entry['notebooks'])
    loaded = sum(n['loaded'] for n in entry['notebooks'])
    longest = max(entry['notebooks'], key=lambda n: n['seconds']) if entry['notebooks'] else None
    # notebooks share runs (08 and 09 read 07's), so the loads are counted per notebook, not as distinct runs
    runs = (f'{words.count(loaded, "run load")} from the run cache over the notebooks, '
            + ('no run trained' if trained == 0 else f'{words.count(trained, "run")} trained'))
    status = ('left `git status` clean' if entry['clean_before'] and not entry['changed_after'] else
              f'changed {words.count(len(entry["changed_after"]), "path")} in `git status`')
    most = (f'; notebook {longest["notebook"][:2]}, the longest, took {spoken(longest["seconds"])}' if longest else '')
    return [f'A second `make` ({runs}) took {spoken(entry["seconds"])} on the same kind of machine '
            f'({entry["cpu"] or "CPU unknown"}, {entry["cores"]} cores, {entry["date"]}, at `{entry["commit"]}`) and '
            f'{status}{most}.']


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('kind', choices=KINDS)
    parser.add_argument('make_args', nargs='*', help='passed on to make (for example -j2)')
    args = parser.parse_args(argv)
    entry = save(measure(args.kind, args.make_args))[args.kind]
    print(f'{args.kind} make: {spoken(entry["seconds"])}; wrote {RECORD.relative_to(REPO)}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
