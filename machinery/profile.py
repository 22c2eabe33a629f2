"""`python -m machinery.profile`: where the time of a fresh `make` goes, measured with a sampling profiler.

It runs the steps `make` runs, in make's order (the RL base, then every notebook, then the report), each as its
own command under py-spy (pinned), which samples every Python process of the step (the notebook's kernel, its
training workers, their grading workers) 20 times a second without pausing them. Each step's wall clock is timed;
its samples are sorted into the parts a reader can act on by the functions on their stacks:

- RL base: demonstrations (the scripted episodes), grading (running a submitted function's hidden tests), SFT
  steps (the forward, backward and AdamW steps of behaviour cloning);
- training runs: sampling (episodes played by the policy), grading, update (the GRPO update), evaluation (held-out
  pass@k and the other diversity measures);
- notebook overhead: everything else (starting Python and a kernel, imports, papermill, figures, loading runs).

A sample is one process seen busy at one instant, so the shares are shares of CPU time: two training workers busy at
once give twice the samples of one. The table gives each step's wall clock beside its CPU shares.

It needs nothing from the tree it profiles (`--repo` points at any checkout with a `.venv` set up by `make setup`),
so the same command profiles an older commit for a before-and-after comparison. It executes the notebooks like
`make` does, so it rewrites their committed copies, results and figures in that checkout.
"""
import argparse
import collections
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

RATE = 20  # samples per second and process: low enough not to slow the run measurably

# (part, function names that put a sample there), tried in this order: the first part whose name is on the stack
# wins. Grading is tried first, because it happens inside demonstrations and inside sampling.
PARTS = [
    ('grading', ('hidden_test_outcome', 'grade_source', 'run_hidden_tests', '_serve')),
    ('demonstrations', ('make_demonstrations',)),
    ('SFT steps', ('sft_train',)),
    ('evaluation', ('diversity', 'heldout_pass_at_1')),
    ('sampling', ('sample_step', 'sample_groups', 'run_episodes')),
    ('update', ('rl_update', 'skipped_update')),
]
OVERHEAD = 'notebook overhead'


def steps(repo):
    """The commands of a fresh `make` after `make setup`, in its order: (name, argv)."""
    python = str(repo / '.venv' / 'bin' / 'python')
    rl_base = 'import agentrl as arl; arl.make_rl_base(arl.build_tokenizer(arl.make_tasks("all")))'
    out = [('RL base', [python, '-c', rl_base])]
    for notebook in sorted((repo / 'notebooks').glob('[0-9][0-9]_*.ipynb')):
        out.append((notebook.stem, [python, '-m', 'machinery.notebook_runner', f'notebooks/{notebook.name}']))
    out.append(('report', [python, '-m', 'machinery.report']))
    return out


def part_of(stack):
    """The part a sampled stack (frames 'function (file:line)', outermost first) belongs to."""
    functions = {frame.split(' (')[0] for frame in stack}
    for part, names in PARTS:
        if functions.intersection(names):
            return part
    return OVERHEAD


def read_samples(path):
    """Counter {part: samples} of a py-spy raw file (one 'frame;frame;... count' line per distinct stack)."""
    counts = collections.Counter()
    for line in Path(path).read_text().splitlines():
        stack, _, count = line.rpartition(' ')
        if stack and count.isdigit():
            counts[part_of([f for f in stack.split(';') if not f.startswith('process ')])] += int(count)
    return counts


def profile(repo, out, py_spy):
    """Run every step under py-spy; write out/profile.json ({step: {seconds, samples: {part: n}}}) and return it."""
    out.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    for key in ('ATEN_CPU_CAPABILITY', 'MKL_CBWR', 'ONEDNN_MAX_CPU_ISA'):  # the pins make exports (see Makefile)
        env.setdefault(key, {'ATEN_CPU_CAPABILITY': 'avx2', 'MKL_CBWR': 'AVX2', 'ONEDNN_MAX_CPU_ISA': 'AVX2'}[key])
    result = {}
    for name, argv in steps(repo):
        raw = out / f'{name}.txt'
        start = time.perf_counter()
        subprocess.run([py_spy, 'record', '--subprocesses', '--nonblocking', '--rate', str(RATE), '--format', 'raw',
                        '-o', str(raw), '--', *argv], cwd=repo, env=env, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        seconds = time.perf_counter() - start
        result[name] = dict(seconds=seconds, samples=dict(read_samples(raw)) if raw.exists() else {})
        print(f'{name}: {seconds:.0f} s', flush=True)
    (out / 'profile.json').write_text(json.dumps(result, indent=1))
    return result


def table(result):
    """Markdown: per step, its wall clock and the CPU shares of its parts; a last row for the whole run."""
    parts = [part for part, _ in PARTS] + [OVERHEAD]
    lines = ['| step | wall clock | CPU seconds sampled | ' + ' | '.join(parts) + ' |',
             '|---|---|---|' + '---|' * len(parts)]
    total = collections.Counter()

    def row(name, seconds, samples):
        n = sum(samples.values()) or 1
        shares = ' | '.join(f'{100 * samples.get(p, 0) / n:.0f}%' if samples.get(p) else '' for p in parts)
        return f'| {name} | {seconds // 60:.0f} min {seconds % 60:02.0f} s | {n / RATE:.0f} | {shares} |'

    for name, step in result.items():
        lines.append(row(name, step['seconds'], step['samples']))
        total.update(step['samples'])
    lines.append(row('**all**', sum(step['seconds'] for step in result.values()), total))
    return '\n'.join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--repo', default='.', help='the checkout to profile (with .venv set up; default: here)')
    parser.add_argument('--out', default='profile', help='folder for the raw samples and profile.json')
    parser.add_argument('--py-spy', default=None, help='the py-spy to use (default: the one in the checkout\'s .venv)')
    parser.add_argument('--table', action='store_true', help='only print the table of an earlier --out folder')
    args = parser.parse_args(argv)
    repo, out = Path(args.repo).resolve(), Path(args.out).resolve()
    if args.table:
        print(table(json.loads((out / 'profile.json').read_text())))
        return 0
    py_spy = args.py_spy or str(repo / '.venv' / 'bin' / 'py-spy')
    if not shutil.which(py_spy):
        parser.error(f'no py-spy at {py_spy}: install the pinned one (pip install -r requirements-dev.txt) or pass --py-spy')
    if not (repo / '.venv' / 'bin' / 'python').exists():
        parser.error(f'{repo} has no .venv: run make setup there first')
    print(table(profile(repo, out, py_spy)))
    return 0


if __name__ == '__main__':
    sys.exit(main())
