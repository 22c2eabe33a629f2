"""Grading agent-written code: screened, in a limited worker process, verdicts decided by the parent.

Each test fails on the in-process grader this replaced (restricted builtins plus a line-count trace), and each
limit's test fails without that limit: a job sized against it, or a probe run inside the worker's own loop.
"""
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

import pytest

import agentrl as arl
from agentrl.substrate import gym, sandbox
from agentrl.substrate.sandbox import Sandbox

ESCAPES = [  # each reached the interpreter's modules (or the grader) through the old restricted builtins
    'return ().__class__.__base__.__subclasses__()',
    'return [ x for x in ( 1 , ) ].__class__',
    'return ( x for x in a0 ).gi_frame.f_back.f_globals',
    'return "{0.__class__}".format ( a0 )',
    'return __builtins__',
    'return __import__ ( "os" )',
]


@pytest.fixture
def quick():
    """A sandbox with a short wall-clock limit, so a time-out costs a second."""
    box = Sandbox(wall_seconds=1.0)
    yield box
    box.close()


def source(*body):
    return 'def f ( a0 ) :\n' + ''.join(f'    {line}\n' for line in body)


@pytest.mark.parametrize('body', ESCAPES)
def test_known_escapes_are_screened_before_they_run(quick, body):
    outcome, detail = quick.run(source(body), 'f', [((1,), 1)])
    assert outcome == 'fail' and 'screened' in detail, detail


def test_the_screen_lets_plain_code_and_plain_methods_through(quick):
    code = source('r = [ ]', 'for x in a0 :', '    r.append ( x * 2 )', 'r.sort ( )', 'return r')
    assert quick.run(code, 'f', [(([3, 1],), [2, 6]), (([],), [])]) == ('pass', 'every output matches')


def test_one_c_level_operation_that_explodes_times_out_and_the_next_job_runs(quick):
    # a program that explodes inside single C calls: `while a1 ** a0 :` on f26 grows the exponent inside one C call per iteration;
    # no line budget can fire in between, only the parent's clock
    code = 'def f ( a0 , a1 ) :\n    n = 0\n    while a1 ** a0 :\n        a0 = a0 * 3 + 1\n        n = n + 1\n    return n\n'
    start = time.perf_counter()
    assert quick.run(code, 'f', [((2, 3), 0)])[0] == 'timeout'
    assert time.perf_counter() - start < 3.0 and quick.counts['timeout'] == 1
    assert quick.run(source('return a0 + 1'), 'f', [((1,), 2)])[0] == 'pass'  # a fresh worker took over


def test_the_gym_records_a_timeout_as_a_failed_episode():
    task = next(t for t in arl.make_tasks('train') if t.task_id == 'f26:L3:2')
    env = arl.make_env()
    env.reset(task)
    env.step('edit L3 < **')
    start = time.perf_counter()
    observation, done = env.step('submit')
    assert done and env.reward == 0.0 and env.info['grader'] == 'timeout'
    assert time.perf_counter() - start < sandbox.WALL_SECONDS + 3.0


def test_python_loops_fail_on_the_deterministic_line_budget_not_the_clock(quick):
    outcome, detail = quick.run(source('while True :', '    a0 = a0 + 1'), 'f', [((1,), 1)])
    assert (outcome, detail) == ('fail', 'raised LineBudgetExceeded')


def test_a_job_just_above_the_memory_limit_fails_and_one_below_passes():
    # this machine could hold either string: only the worker's address-space limit tells them apart. The default
    # wall limit, not `quick`'s second: writing 448 MiB once took longer than a second on a loaded machine
    box = Sandbox()
    try:
        allocate = source('return len ( "x" * a0 )')
        # just above the 512 MiB the README promises (sandbox.MEMORY_BYTES + 1 MiB would let a looser limit pass)
        above = 513 * 2 ** 20
        assert box.run(allocate, 'f', [((above,), above)]) == ('fail', 'raised MemoryError')
        below = 448 * 2 ** 20  # beside the interpreter's own ~15 MiB
        assert box.run(allocate, 'f', [((below,), below)]) == ('pass', 'every output matches')
        assert box.counts == dict(timeout=0, crash=0)
    finally:
        box.close()


def test_a_reply_over_the_size_limit_is_a_crash_and_one_under_it_passes(quick):
    echo = source('return "x" * a0')
    under = sandbox.MAX_REPLY_BYTES - 100  # the reply line is the repr plus ~35 bytes of JSON
    assert quick.run(echo, 'f', [((under,), 'x' * under)]) == ('pass', 'every output matches')
    over = sandbox.MAX_REPLY_BYTES
    assert quick.run(echo, 'f', [((over,), 'x' * over)])[0] == 'crash' and quick.counts['crash'] == 1
    assert quick.run(source('return a0'), 'f', [((1,), 1)])[0] == 'pass'  # and a fresh worker took over


def worker_command(cpu_seconds):
    """The command line Sandbox._start runs (this checkout's sandbox.py), with its own CPU allowance per job."""
    return [sys.executable, '-S', '-s', sandbox.__file__, str(sandbox.MEMORY_BYTES), str(cpu_seconds)]


def test_the_cpu_limit_ends_a_worker_stuck_in_one_c_call():
    # the parent's clock is not involved here: a worker allowed 0 extra CPU seconds per job (what is left of the
    # current second) must end itself by SIGXCPU inside one C-level call that no line budget can interrupt
    worker = subprocess.Popen(worker_command(0), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, cwd='/', start_new_session=True)
    try:
        assert worker.stdout.readline() == b'{"status": "ready"}\n'
        explode = 'def f ( a0 , a1 ) :\n    while a1 ** a0 :\n        a0 = a0 * 3 + 1\n    return 0\n'
        worker.stdin.write(json.dumps(dict(source=explode, name='f', inputs=['(2, 3)'])).encode() + b'\n')
        worker.stdin.flush()
        start = time.monotonic()
        returncode = worker.wait(timeout=20)
        assert returncode == -signal.SIGXCPU and time.monotonic() - start < 5
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()


def test_the_live_worker_runs_under_every_limit(quick):
    assert quick.run(source('return a0'), 'f', [((1,), 1)])[0] == 'pass'
    limits = {}
    with open(f'/proc/{quick.process.pid}/limits') as table:  # what the kernel enforces on the worker itself
        for line in table.readlines()[1:]:
            name, soft, hard = line[:26].strip(), *line[26:].split()[:2]
            limits[name] = (soft, hard)
    assert limits['Max address space'] == (str(sandbox.MEMORY_BYTES),) * 2
    assert limits['Max file size'] == ('0', '0') and limits['Max core file size'] == ('0', '0')
    assert limits['Max processes'] == ('0', '0') and limits['Max open files'] == ('3', '3')
    assert limits['Max cpu time'][0] != 'unlimited'  # set before each job, from the CPU time used so far


def test_a_killed_worker_is_a_counted_crash_and_is_replaced(quick):
    assert quick.run(source('return a0'), 'f', [((1,), 1)])[0] == 'pass'
    quick.process.kill()
    quick.process.wait()
    assert quick.run(source('return a0'), 'f', [((1,), 1)])[0] == 'crash' and quick.counts['crash'] == 1
    assert quick.run(source('return a0'), 'f', [((1,), 1)])[0] == 'pass'


def test_the_parent_decides_the_verdict_from_plain_values_only():
    # what a hostile worker could send back instead of an honest repr: none of it can pass
    for text in ['__import__("os").system("true")', 'Anything()', '[' * 5000, 'nan', 'inf', '', '1' * 10]:
        assert not sandbox._same_value(text, 1)
    assert sandbox._same_value('2.0', 2) and sandbox._same_value('True', 1)  # Python's == as before
    assert not sandbox._same_value('(1, 2)', [1, 2])


def test_outputs_that_are_not_plain_values_fail(quick):
    assert quick.run(source('return range ( a0 )'), 'f', [((2,), [0, 1])])[0] == 'fail'
    assert quick.run(source('return ( x for x in a0 )'), 'f', [(([1],), [1])])[0] == 'fail'


PROBE = """
import json, os, signal, sys
sys.path.insert(0, {folder!r})
import sandbox
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # past the file-size limit a write then fails with EFBIG
held = os.open({held!r}, os.O_WRONLY | os.O_CREAT)  # a regular file opened before the limits: descriptor 3

def fork():
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)

def attempts():
    report = dict(uid=os.getuid())
    for name, attempt in [('read', lambda: open('/etc/hostname')), ('create', lambda: open({new!r}, 'w')),
                          ('write', lambda: os.write(held, b'data')), ('fork', fork),
                          ('memory', lambda: bytearray(sandbox.MEMORY_BYTES))]:
        try:
            attempt()
            report[name] = 'allowed'
        except (OSError, MemoryError) as error:
            report[name] = type(error).__name__
    return report

# the worker's own loop, with the grader swapped for these attempts: they run where a job runs, after the limits
sandbox.grade = lambda source, name, inputs: dict(status='ok', outputs=[json.dumps(attempts())])
sandbox._serve(sandbox.MEMORY_BYTES, 5)
"""


@pytest.fixture(scope='module')
def probe(tmp_path_factory):
    """What a job inside the worker's loop (sandbox._serve) can do, tried by trusted code -> dict."""
    folder = tmp_path_factory.mktemp('probe')
    code = PROBE.format(folder=os.path.dirname(sandbox.__file__), held=str(folder / 'held'), new=str(folder / 'new'))
    job = json.dumps(dict(source='', name='f', inputs=[])) + '\n'
    done = subprocess.run([sys.executable, '-S', '-s', '-c', code], input=job, capture_output=True, text=True,
                          timeout=60, close_fds=True, cwd='/')
    ready, reply = done.stdout.splitlines()
    assert json.loads(ready) == dict(status='ready'), done
    report = json.loads(json.loads(reply)['outputs'][0])
    report.update(new_exists=(folder / 'new').exists(), held_size=(folder / 'held').stat().st_size)
    return report


def test_a_job_cannot_open_create_or_grow_a_file_nor_exceed_the_memory_limit(probe):
    assert probe['read'] == probe['create'] == 'OSError'  # no new descriptor: no file, no socket
    assert not probe['new_exists']
    assert probe['write'] == 'OSError' and probe['held_size'] == 0  # even an open file cannot grow
    assert probe['memory'] == 'MemoryError'


def test_a_job_cannot_fork(probe):
    if probe['uid'] == 0:
        pytest.skip('the worker runs as root (root without CAP_SETUID cannot become another user), and the kernel '
                    'does not apply RLIMIT_NPROC to root: a fork cannot be refused there')
    assert probe['fork'] == 'BlockingIOError'  # EAGAIN: no process may be added


def may_change_identity():
    """Whether this process holds CAP_SETUID and CAP_SETGID (bits 7 and 6 of its effective capabilities)."""
    with open('/proc/self/status') as status:
        effective = int(next(line for line in status if line.startswith('CapEff:')).split()[1], 16)
    return bool(effective & (1 << 7)) and bool(effective & (1 << 6))


@pytest.mark.skipif(os.geteuid() != 0, reason='only a worker started by root changes its identity')
def test_a_worker_started_by_root_runs_as_an_unprivileged_user(quick, probe):
    if not may_change_identity():
        pytest.skip('root here lacks CAP_SETUID/CAP_SETGID: the worker stays root and may fork')
    assert quick.run(source('return a0'), 'f', [((1,), 1)])[0] == 'pass'
    with open(f'/proc/{quick.process.pid}/status') as status:
        ids = {line.split(':')[0]: line.split()[1:] for line in status if line.startswith(('Uid:', 'Gid:', 'Groups:'))}
    assert ids['Uid'] == ids['Gid'] == [str(sandbox.UNPRIVILEGED_ID)] * 4 and ids['Groups'] == []
    assert probe['uid'] == sandbox.UNPRIVILEGED_ID and probe['fork'] == 'BlockingIOError'  # so the fork is refused


def test_a_system_exit_in_agent_code_is_a_failure_not_the_end_of_training(quick):
    # the names SystemExit and GeneratorExit are not reachable; a StopIteration escaping a generator is
    code = source('def g ( ) :', '    yield 1', 'x = g ( )', 'return [ next ( x ) for _ in range ( 2 ) ]')
    assert quick.run(code, 'f', [((1,), [1, 1])])[0] == 'fail'
    assert sandbox.grade('raise SystemExit\n', 'f', [])['status'] == 'failed'  # caught even in-process


def test_the_worker_fails_every_held_out_bug_and_passes_its_fix():
    for task in arl.make_tasks('heldout'):
        assert gym.grade_source(task.lines, task.family, task.tests)[0] == 'fail'
        fixed = list(task.lines)
        words = fixed[task.bug_line - 1].split()
        indent = fixed[task.bug_line - 1][:len(fixed[task.bug_line - 1]) - len(fixed[task.bug_line - 1].lstrip())]
        words[task.bug_pos] = task.right
        fixed[task.bug_line - 1] = indent + ' '.join(words)
        assert gym.grade_source(fixed, task.family, task.tests) == ('pass', 'every output matches')


def test_a_closed_sandbox_leaves_no_worker_and_makes_no_folder(tmp_path, monkeypatch):
    monkeypatch.setenv('TMPDIR', str(tmp_path))  # any temporary folder the grader made would land here
    tempfile.tempdir = None
    try:
        box = Sandbox(wall_seconds=1.0)
        assert box.run(source('return a0'), 'f', [((1,), 1)])[0] == 'pass'
        process = box.process
        box.close()
    finally:
        tempfile.tempdir = None
    assert process.poll() is not None and list(tmp_path.iterdir()) == []
