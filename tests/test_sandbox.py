"""Grading agent-written code: screened, in a limited worker process, verdicts decided by the parent.

Each test fails on the in-process grader this replaced (restricted builtins plus a line-count trace).
"""
import os
import tempfile
import subprocess
import sys
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
    # the case: `while a1 ** a0 :` on f26 grows the exponent inside one C call per iteration;
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


def test_memory_is_bounded_in_the_worker(quick):
    outcome, detail = quick.run(source('return len ( [ 0 ] * ( 10 ** 10 ) )'), 'f', [((1,), 10 ** 10)])
    assert outcome in ('fail', 'crash') and quick.counts['timeout'] == 0, detail


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


def test_the_worker_cannot_open_write_or_fork(tmp_path):
    # the worker's own limits, checked in a child that applies them and then tries what the screen forbids
    probe = (
        'import os, sys\n'
        f'sys.path.insert(0, {str(os.path.dirname(sandbox.__file__))!r})\n'
        'import sandbox\n'
        'sandbox._limit_this_process(sandbox.MEMORY_BYTES)\n'
        'results = []\n'
        f'for attempt in (lambda: open("/etc/hostname"), lambda: open({str(tmp_path / "x")!r}, "w").write("data"),\n'
        '                 lambda: os.fork()):\n'
        '    try:\n'
        '        attempt()\n'
        '        results.append("allowed")\n'
        '    except OSError:\n'
        '        results.append("refused")\n'
        'sys.stdout.write(" ".join(results))\n')
    done = subprocess.run([sys.executable, '-S', '-s', '-c', probe], capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL, close_fds=True)
    refused = done.stdout.split()
    assert refused[:1] == ['refused'], done  # no file can be opened
    assert not (tmp_path / 'x').exists() or (tmp_path / 'x').stat().st_size == 0
    if os.geteuid() != 0:  # root is exempt from the process-count limit
        assert refused[2] == 'refused'


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
