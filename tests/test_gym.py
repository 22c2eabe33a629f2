"""The anonymised one-edit gym: tasks, hidden tests that really run, every tool and every kind of invalid call."""
import random
import time

import pytest

import agentrl as arl
from agentrl.substrate.gym import BREAKS, FIXES, grade_source, passes_hidden_tests, run_hidden_tests
from substrate_fixtures import on_main  # noqa: F401 (autouse: these tests build the substrate main)


def family_lines(task):
    """The correct source: the task's lines with its bug repaired."""
    lines = list(task.lines)
    words = lines[task.bug_line - 1].split()
    assert words[task.bug_pos] == task.wrong
    words[task.bug_pos] = task.right
    indent = lines[task.bug_line - 1][:len(lines[task.bug_line - 1]) - len(lines[task.bug_line - 1].lstrip())]
    lines[task.bug_line - 1] = indent + ' '.join(words)
    return lines


def test_splits():
    train, heldout, every = arl.make_tasks('train'), arl.make_tasks('heldout'), arl.make_tasks('all')
    assert len(heldout) == 10
    assert not {t.task_id for t in train} & {t.task_id for t in heldout}
    assert {t.task_id for t in every} == {t.task_id for t in train} | {t.task_id for t in heldout}
    assert [t.task_id for t in arl.make_tasks('train')] == [t.task_id for t in train]  # deterministic
    with pytest.raises(ValueError, match="'all', 'train', 'heldout'"):
        arl.make_tasks('test')


def test_heldout_bugs_are_never_shown_in_training():
    train = arl.make_tasks('train')
    shown = {(t.family, t.bug_line, t.wrong) for t in train} | {(t.family, *s[:2]) for t in train for s in t.sites}
    for task in arl.make_tasks('heldout'):
        assert (task.family, task.bug_line, task.wrong) not in shown
        assert sum(t.wrong == task.wrong for t in train) >= 3  # but its kind of bug is


def test_tasks_are_real_python_with_anonymised_names_and_one_token_bugs():
    for task in arl.make_tasks('all'):
        assert task.lines[0].startswith(f'def {task.family} ( a0')
        assert FIXES[task.wrong] == task.right
        correct = family_lines(task)
        assert sum(a != b for a, b in zip(correct, task.lines)) == 1
        compile(task.source, task.task_id, 'exec')
        assert not any(w in BREAKS.values() for line in correct for w in line.split())  # wrong tokens only in bugs


def test_hidden_tests_run_the_code_right_fix_passes_wrong_fix_fails():
    for task in arl.make_tasks('all'):
        assert not run_hidden_tests(task.lines, task.family, task.tests)
        assert run_hidden_tests(family_lines(task), task.family, task.tests)
    task = arl.make_tasks('train')[0]
    wrong = list(task.lines)
    wrong[0] = wrong[0].replace(task.family, 'g')  # the function is gone
    assert not run_hidden_tests(wrong, task.family, task.tests)
    assert not run_hidden_tests(['def oops ( :'], task.family, task.tests)  # syntax error


def test_hidden_tests_see_only_a_few_builtins_and_have_a_time_limit():
    # were open reachable, this would return 1 and pass; it fails on the name, before any file is touched
    sneaky = ['def f ( a0 ) :', '    handle = open ( "/etc/passwd" )', '    return 1']
    assert grade_source(sneaky, 'f', [((1,), 1)]) == ('fail', 'raised NameError')
    importer = ['def f ( a0 ) :', '    import os', '    return 1']
    assert not run_hidden_tests(importer, 'f', [((1,), 1)])
    loop = ['def f ( a0 ) :', '    while True :', '        a0 = a0 + 1', '    return a0']
    start = time.perf_counter()
    assert not run_hidden_tests(loop, 'f', [((1,), 2)])
    assert time.perf_counter() - start < 2.0
    assert run_hidden_tests(['def f ( a0 ) :', '    return max ( a0 ) + len ( a0 )'], 'f', [(([1, 5],), 7)])


def test_an_edit_can_cause_an_infinite_loop_and_submit_still_returns():
    task = next(t for t in arl.make_tasks('all') if 'while a1 > i :' in t.source and t.wrong != '-')
    line = next(n for n, text in enumerate(task.lines, 1) if text.strip() == 'i = i + 1')
    env = arl.make_env()
    env.reset(task)
    observation, _ = env.step(f'edit L{line} + -')
    assert observation == ['<obs>', 'ok', f'L{line}', '</obs>']
    start = time.perf_counter()
    _, done = env.step('submit')
    assert done and env.info['submitted'] and not env.info['hidden_pass'] and env.reward == 0.0
    assert time.perf_counter() - start < 5.0


def test_read_edit_submit_solve_a_task():
    task = arl.make_tasks('train')[5]
    env = arl.make_env()
    prompt = env.reset(task, offset=3)
    assert prompt[:2] == ['<task>', task.family] and prompt[-3:] == ['L4', f'L{3 + len(task.lines)}', '</task>']
    observation, done = env.step(f'read L4 L{3 + len(task.lines)}')
    assert not done and observation[0] == '<obs>' and observation[1] == 'L4' and observation[2] == 'def'
    assert ' '.join(observation).count(task.wrong) >= 1
    observation, done = env.step(task.fix(offset=3))
    assert observation == ['<obs>', 'ok', f'L{3 + task.bug_line}', '</obs>']
    assert env.lines[3:] == family_lines(task)  # the edit was applied to the source
    observation, done = env.step('submit')
    assert done and observation == []
    assert env.info == dict(n_turns=3, submitted=True, hidden_pass=True, actions=[
        f'read L4 L{3 + len(task.lines)}', task.fix(offset=3), 'submit'], n_invalid=0, reads=1, edited=True,
        truncated=False, reward=1.0, grader='pass')
    with pytest.raises(RuntimeError):
        env.step('submit')


def test_a_wrong_edit_fails_the_hidden_tests_and_a_missing_token_uses_the_edit():
    task = next(t for t in arl.make_tasks('train') if len(t.sites) >= 2)
    other = next(s for s in task.sites if s[:2] != (task.bug_line, task.wrong))
    env = arl.make_env()
    env.reset(task)
    words = task.lines[other[0] - 1].split()
    observation, _ = env.step(f'edit L{other[0]} {words[-1]} {words[-1]}')  # a real edit that changes nothing
    assert observation[:2] == ['<obs>', 'ok']
    env.step('submit')
    assert env.reward == 0.0 and env.info['n_invalid'] == 0
    env.reset(task)
    observation, _ = env.step(f'edit L{task.bug_line} ** +')
    assert observation == ['<obs>', 'no', 'match', 'on', f'L{task.bug_line}', '</obs>']
    observation, _ = env.step(task.fix())
    assert observation == ['<obs>', 'error', 'already', 'edited', '</obs>']
    env.step('submit')
    assert env.reward == 0.0 and env.info['n_invalid'] == 1


@pytest.mark.parametrize('call, message', [
    ('open L1', ['unknown', 'tool']),
    ([';'], ['unknown', 'tool']),
    ('L2 edit < >', ['unknown', 'tool']),
    ('read L1', ['bad', 'arguments']),
    ('read 1 6', ['bad', 'arguments']),
    ('read L5 L2', ['bad', 'arguments']),
    ('read L1 L12', ['past', 'the', 'end', 'L6']),
    ('edit L4 <', ['bad', 'arguments']),
    ('edit 4 < >', ['bad', 'arguments']),
    ('edit L9 < >', ['no', 'line', 'L9']),
    ('submit L6', ['bad', 'arguments']),
    (['read', 'L1', 'L2', 'L3', 'L4', 'L5'], ['call', 'too', 'long']),
])
def test_every_kind_of_invalid_call_is_an_observation(call, message):
    task = next(t for t in arl.make_tasks('all') if len(t.lines) == 6)
    env = arl.make_env()
    env.reset(task)
    observation, done = env.step(call)
    assert observation == ['<obs>', 'error', *message, '</obs>']
    assert not done and env.info['n_invalid'] == 1 and env.info['n_turns'] == 1 and not env.info['edited']


def test_running_out_of_turns_ends_the_episode_and_counts():
    env = arl.Env(max_turns=6)
    env.reset(arl.make_tasks('train')[0])
    for turn in range(5):
        _, done = env.step('read L1 L2')
        assert not done
    observation, done = env.step('read L1 L2')
    assert done and observation[-4:] == ['<obs>', 'error', 'turn', 'limit', '</obs>'][-4:]
    assert env.info['n_invalid'] == 1 and env.info['reads'] == 6 and not env.info['submitted'] and env.reward == 0.0


def test_offsets_shift_the_line_labels():
    task = arl.make_tasks('train')[0]
    env = arl.make_env()
    env.reset(task, offset=task.max_offset)
    last = task.max_offset + len(task.lines)
    assert last == 12
    observation, _ = env.step('read L1 L3')
    assert observation[:4] == ['<obs>', 'L1', 'L2', 'L3']  # blank lines before the function
    env.step(task.fix(task.max_offset))
    env.step('submit')
    assert env.reward == 1.0
    with pytest.raises(ValueError, match='offset'):
        env.reset(task, offset=task.max_offset + 1)


def test_blind_guessing_succeeds_about_one_time_in_five():
    train = arl.make_tasks('train')
    families = {t.family for t in train}
    ceiling = len(families) / len(train)  # best blind success: one right guess per family
    assert 0.15 <= ceiling <= 0.3
    rng, wins, episodes = random.Random(0), 0, 2000
    env = arl.make_env()
    for i in range(episodes):  # the scripted guesser: a uniform guess among the family's usual bugs
        task = train[rng.randrange(len(train))]
        env.reset(task)
        line, wrong, right = task.sites[rng.randrange(len(task.sites))]
        env.step(f'edit L{line} {wrong} {right}')
        env.step('submit')
        wins += env.reward
    assert 0.12 <= wins / episodes <= 0.3


def test_test_results_are_cached_by_source_and_agree_with_running():
    task = arl.make_tasks('train')[1]
    assert passes_hidden_tests(task, family_lines(task)) is True
    assert passes_hidden_tests(task, list(task.lines)) is False


def test_agent_code_that_triggers_a_syntax_warning_prints_nothing(capfd):
    import warnings

    from agentrl.substrate.gym import run_hidden_tests

    with warnings.catch_warnings():
        warnings.simplefilter('error')  # a warning escaping the gym would raise here
        assert run_hidden_tests(['def f(a):', '    return 5 (a)'], 'f', [((1,), 1)]) is False
    assert capfd.readouterr().err == ''
