"""A stop signal ends a run cleanly: SIGINT, SIGTERM or SIGHUP to the notebook runner (or to make running it) while
runs train in worker processes ends the runner, its kernel, the training workers and their grading workers within
5 s; no temporary notebook, staging folder, connection file or half-written run stays; one line says what happened;
git status is unchanged. The building blocks of agentrl.stopping are checked on plain child processes."""
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
import uuid

import pytest

from agentrl import stopping
from agentrl.atomic import atomic_output
from agentrl.paths import REPO

pytestmark = pytest.mark.skipif(not sys.platform.startswith('linux'), reason='reads /proc')

LIMIT_SECONDS = 5.0
TRAINING = '''\
from agentrl.ch10 import experiments, live
specs = [experiments.arm(f'stop probe {i}', dict(tasks_per_step=2, eval_every=0), steps=400, seed=seed + i)
         for i in range(2)]
runs = live.run_all(specs, processes=2)
'''


def process_table():
    """{pid: (parent pid, command line)} of every live (not zombie) process."""
    table = {}
    for name in filter(str.isdigit, os.listdir('/proc')):
        try:
            with open(f'/proc/{name}/stat', 'rb') as file:
                fields = file.read().rsplit(b')', 1)[1].split()
            with open(f'/proc/{name}/cmdline', 'rb') as file:
                command = file.read().replace(b'\0', b' ').decode(errors='replace')
        except (OSError, ValueError):
            continue
        if fields[0] not in (b'Z', b'X'):
            table[int(name)] = (int(fields[1]), command)
    return table


def tree(pid):
    """{pid: command line} of pid and every live process below it."""
    table, found, frontier = process_table(), {}, [pid]
    while frontier:
        found.update({p: table[p][1] for p in frontier if p in table})
        frontier = [p for p, (parent, _) in table.items() if parent in frontier]
    return found


def marked(marker):
    """Pids of live processes whose environment carries marker (the kernel and the training workers inherit it)."""
    found = []
    for pid in process_table():
        try:
            with open(f'/proc/{pid}/environ', 'rb') as file:
                if marker.encode() in file.read():
                    found.append(pid)
        except OSError:
            pass
    return found


def git_status():
    return subprocess.run(['git', 'status', '--porcelain', '--ignored'], cwd=REPO, capture_output=True, text=True,
                          check=True).stdout


def start_training_run(tmp_path, via):
    """The runner (or make running it) on a notebook that trains two runs in worker processes, in a session of its
    own, with an empty run cache and a temporary folder of its own -> (process, marker, paths)."""
    from test_notebook_runner import write_notebook

    folder = tmp_path / 'nb'
    folder.mkdir()
    notebook = write_notebook(folder / 'train.ipynb', [('code', 'seed = 0', 'parameters'), ('code', TRAINING)])
    paths = dict(notebook=notebook, runs=tmp_path / 'runs', tmp=tmp_path / 'tmp', folder=folder)
    paths['runs'].mkdir()
    paths['tmp'].mkdir()
    marker = f'stop-test-{uuid.uuid4().hex}'
    env = dict(os.environ, AGENTRL_RUNS_DIR=str(paths['runs']), TMPDIR=str(paths['tmp']), AGENTRL_STOP_TEST=marker)
    runner = [sys.executable, '-m', 'machinery.notebook_runner', str(notebook)]
    if via == 'make':  # the Makefile's recipe for a notebook, on this one
        (tmp_path / 'Makefile').write_text(f'SHELL := /bin/bash\n.PHONY: run\nrun:\n\t{" ".join(runner)}\n')
        command = ['make', '--no-print-directory', '-C', str(tmp_path), 'run']
    else:
        command = runner
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               start_new_session=True, preexec_fn=default_stop_signals)
    return process, marker, paths


def default_stop_signals():
    """In the child before exec: the stop signals at their default action, as in a terminal. Under `nohup` (or any
    parent that ignores SIGHUP) make would inherit SIGHUP ignored and, as GNU make does, keep ignoring it."""
    for signum in (signal.SIGHUP, signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, signal.SIG_DFL)


def wait_for_training(process, timeout=180):
    """Block until both training workers and their grading workers run -> the run's processes {pid: command}."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        procs = tree(process.pid)
        commands = list(procs.values())
        if sum('spawn_main' in c for c in commands) >= 2 and sum('substrate/sandbox.py' in c for c in commands) >= 3:
            return procs
        if process.poll() is not None:
            pytest.fail(f'the run ended before training started: {process.communicate()}')
        time.sleep(0.2)
    process.kill()
    pytest.fail('training did not start within {timeout} s')


def end(pids):
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def stop_and_watch(process, procs, marker, signum, to_group=False):
    """Send signum to the run (its process group if to_group) and watch its processes for up to 15 s ->
    (seconds until none was left, the survivors, stdout, stderr); survivors are ended before the output is read."""
    started = time.monotonic()
    if to_group:
        os.killpg(process.pid, signum)
    else:
        process.send_signal(signum)
    left = set(procs)
    while left and time.monotonic() - started < 15:
        left = {pid for pid in left if pid in process_table()} | set(marked(marker))
        time.sleep(0.05)
    took = time.monotonic() - started
    end(left | set(marked(marker)))  # survivors would hold the run's stderr open
    out, err = process.communicate(timeout=30)
    return took, left, out, err


@pytest.mark.slow
@pytest.mark.parametrize('via, name, target', [
    ('runner', 'SIGINT', 'pid'), ('runner', 'SIGTERM', 'pid'), ('runner', 'SIGHUP', 'pid'),
    ('make', 'SIGTERM', 'pid'),  # what `kill` sends: make passes SIGTERM on to its recipe
    ('make', 'SIGINT', 'group'), ('make', 'SIGHUP', 'group'),  # Ctrl-C, a closed terminal, `timeout`: the group
])
def test_a_stop_signal_during_training_ends_every_process_of_the_run_and_leaves_nothing_behind(tmp_path, via, name,
                                                                                               target):
    status_before = git_status()
    process, marker, paths = start_training_run(tmp_path, via)
    procs = wait_for_training(process)
    signum = getattr(signal, name)
    took, left, out, err = stop_and_watch(process, procs, marker, signum, to_group=target == 'group')
    print(f'{via} {name} to the {target}: every process gone after {took:.2f} s')
    assert not left, f'still running {took:.0f} s after {name}: {[procs.get(pid, pid) for pid in left]}'
    assert took < LIMIT_SECONDS, f'the run took {took:.1f} s to stop'
    assert process.returncode == -signum, (process.returncode, err)
    lines = [line for line in err.splitlines() if 'running over TCP without encryption' not in line]
    ours = [line for line in lines if not re.match(r'make(\[\d+\])?: \*\*\*', line)]  # make's own (make[1] under make test)
    assert 'Traceback' not in err and len(ours) == 1, err
    assert ours[0].startswith(f'STOPPED by {name}: {paths["notebook"]} was interrupted in cell 2 '), ours[0]
    assert 'are as they were' in ours[0]
    time.sleep(1.0)  # nothing of the run may write after it stopped
    assert sorted(p.name for p in paths['folder'].iterdir()) == ['train.ipynb'], 'a temporary notebook stayed'
    assert [p.name for p in paths['tmp'].iterdir() if not p.name.startswith('torchinductor_')] == [], \
        'a staging folder or connection file stayed'  # (torchinductor_*: torch's own compile cache)
    assert all(p.name.startswith('run-') and p.name.endswith('.pt') for p in paths['runs'].iterdir()), \
        f'a half-written run stayed: {sorted(p.name for p in paths["runs"].iterdir())}'
    assert git_status() == status_before


# --- the building blocks --------------------------------------------------------------------------------------------

def python(code, **kwargs):
    return subprocess.Popen([sys.executable, '-c', textwrap.dedent(code)], stdout=subprocess.PIPE, text=True,
                            **kwargs)


def test_stop_processes_ends_a_tree_and_the_orphans_of_its_group():
    """A child that starts a grandchild in a session of its own and an orphan in its own group: all end."""
    parent = python('''
        import subprocess, sys, time
        sleeper = [sys.executable, '-c', 'import time; time.sleep(60)']
        own = subprocess.Popen(sleeper, start_new_session=True)
        maker = 'import subprocess, sys; subprocess.Popen(%r)' % sleeper
        orphan_maker = subprocess.Popen([sys.executable, '-c', maker])
        orphan_maker.wait()
        print(own.pid, flush=True)
        time.sleep(60)
    ''', start_new_session=True)
    own = int(parent.stdout.readline())
    group = [pid for pid in process_table() if _group(pid) == parent.pid]  # the parent and the orphan
    started = time.monotonic()
    stopped = stopping.stop_processes([parent.pid], grace=1.0)
    parent.wait(timeout=5)
    assert time.monotonic() - started < 4
    assert len(group) == 2 and own in stopped and set(group) <= set(stopped), (stopped, group)
    assert not [pid for pid in stopped if pid in process_table()]


def _group(pid):
    try:
        return os.getpgid(pid)
    except OSError:
        return None


def test_stop_processes_kills_what_refuses_sigterm_after_the_grace():
    child = python('''
        import signal, time
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        print('ready', flush=True)
        time.sleep(60)
    ''', start_new_session=True)
    assert child.stdout.readline() == 'ready\n'
    started = time.monotonic()
    stopping.stop_processes([child.pid], grace=0.5)
    assert child.wait(timeout=5) == -signal.SIGKILL and 0.4 < time.monotonic() - started < 3


def test_a_worker_finishes_an_atomic_write_before_it_leaves_on_sigterm(tmp_path):
    """SIGTERM in the middle of an atomic write: the file is written whole, no temporary file stays, then it leaves."""
    dest = tmp_path / 'run.pt'
    child = python(f'''
        import time
        from agentrl import stopping
        from agentrl.atomic import atomic_output
        stopping.exit_on_signal()
        with atomic_output({str(dest)!r}) as tmp:
            print('writing', flush=True)
            time.sleep(1.0)
            tmp.write_text('whole')
        print('not reached', flush=True)
    ''')
    assert child.stdout.readline() == 'writing\n'
    child.send_signal(signal.SIGTERM)
    assert child.wait(timeout=10) == 128 + signal.SIGTERM
    assert child.stdout.read() == '' and dest.read_text() == 'whole'
    assert [p.name for p in tmp_path.iterdir()] == ['run.pt']


def test_a_worker_set_up_with_start_worker_ends_when_its_parent_is_killed():
    parent = python('''
        import subprocess, sys, time
        child = subprocess.Popen([sys.executable, '-c',
                                  'from agentrl import stopping; stopping.start_worker(); print(1, flush=True); '
                                  'import time; time.sleep(60)'], stdout=subprocess.PIPE, text=True)
        child.stdout.readline()
        print(child.pid, flush=True)
        time.sleep(60)
    ''')
    worker = int(parent.stdout.readline())
    parent.kill()
    parent.wait()
    deadline = time.monotonic() + 5
    while worker in process_table() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert worker not in process_table(), 'the worker outlived its parent'


def test_hold_defers_a_stop_until_the_block_ends():
    with stopping.raise_on_signals((signal.SIGUSR1,)):
        done = []
        with pytest.raises(stopping.Stopped) as raised:
            with stopping.hold():
                os.kill(os.getpid(), signal.SIGUSR1)
                time.sleep(0.05)
                done.append('published')
        assert done == ['published'] and raised.value.name == 'SIGUSR1'


def test_atomic_output_still_replaces_and_cleans_up(tmp_path):
    dest = tmp_path / 'x.json'
    with atomic_output(dest, '.json') as tmp:
        tmp.write_text('1')
    with pytest.raises(RuntimeError), atomic_output(dest, '.json') as tmp:
        tmp.write_text('2')
        raise RuntimeError
    assert dest.read_text() == '1' and [p.name for p in tmp_path.iterdir()] == ['x.json']


@pytest.mark.slow
@pytest.mark.parametrize('name', ['SIGINT', 'SIGTERM', 'SIGHUP'])
def test_a_stop_signal_ends_make_calibrate_and_its_measuring_workers(tmp_path, name):
    """`make calibrate`'s command, stopped while its two workers train: every process ends within 5 s, one line."""
    from agentrl.paths import cache_dir

    def cache_files():
        return sorted(p.name for p in cache_dir().rglob('*')) if cache_dir().exists() else []

    status_before, cache_before = git_status(), cache_files()
    marker = f'stop-test-{uuid.uuid4().hex}'
    process = subprocess.Popen([sys.executable, '-m', 'machinery.calibrate'], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, start_new_session=True, cwd=tmp_path,
                               env=dict(os.environ, TMPDIR=str(tmp_path), AGENTRL_STOP_TEST=marker))
    procs = wait_for_training(process)
    signum = getattr(signal, name)
    took, left, out, err = stop_and_watch(process, procs, marker, signum)
    print(f'calibrate {name}: every process gone after {took:.2f} s')
    assert not left, f'still running {took:.0f} s after {name}: {[procs.get(pid, pid) for pid in left]}'
    assert took < LIMIT_SECONDS and process.returncode == -signum, (took, process.returncode, err)
    assert out == '' and 'Traceback' not in err and err.splitlines() == [
        f'STOPPED by {name}: the calibration was interrupted while measuring; nothing was printed or written '
        '(a cached RL base is whole or absent)'], err
    assert cache_files() == cache_before and git_status() == status_before


@pytest.mark.slow
@pytest.mark.parametrize('name', ['SIGINT', 'SIGTERM'])
def test_a_stop_signal_ends_the_substrate_sweep_and_its_cluster(tmp_path, name):
    """`make substrate-sweep`'s command, stopped while its LocalCluster's two workers build an RL base: every process
    ends within 5 s, the command ends by the signal with one line and no traceback, and nothing is written."""
    marker = f'stop-test-{uuid.uuid4().hex}'
    status_before = git_status()
    process = subprocess.Popen([sys.executable, '-m', 'machinery.substrate_sweep', '--substrates', 't45', 't74'],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                               cwd=tmp_path, env=dict(os.environ, TMPDIR=str(tmp_path), AGENTRL_STOP_TEST=marker,
                                                      AGENTRL_CACHE_DIR=str(tmp_path / 'cache')))
    deadline = time.monotonic() + 120
    while sum('spawn_main' in c for c in tree(process.pid).values()) < 2:  # the cluster's two worker processes
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            pytest.fail(f'the sweep did not start its workers: {process.communicate()}')
        time.sleep(0.2)
    time.sleep(3.0)  # into the RL bases' training
    procs = tree(process.pid)
    signum = getattr(signal, name)
    took, left, out, err = stop_and_watch(process, procs, marker, signum)
    print(f'substrate sweep {name}: every process gone after {took:.2f} s')
    assert not left, f'still running {took:.0f} s after {name}: {[procs.get(pid, pid) for pid in left]}'
    assert took < LIMIT_SECONDS and process.returncode == -signum, (took, process.returncode, err)
    assert 'Traceback' not in err and err.splitlines()[-1] == (
        f'STOPPED by {name}: the substrates swept before the stop are in the record; the runs finished before it '
        'are in the run cache'), err
    assert not list((tmp_path / 'cache').rglob('*.tmp*')) and git_status() == status_before
