"""The real model's tasks, their strict rewards, and the pilot's rule that picks a level."""
import re

import pytest
import torch

from agentrl.realrl import pilot
from agentrl.realrl.rewards import arithmetic_reward, code_reward, reply_number, reward
from agentrl.realrl.tasks import CODE_TEMPLATES, LEVELS, draw_tasks, make_tasks, task_pool
from agentrl.substrate.sandbox import Sandbox

# a correct body for every code template, written by hand (k is the task's constant)
SOLUTIONS = {
    'plus': 'return x + {k}', 'times': 'return x * {k}', 'divisible': 'return n % {k} == 0',
    'add_each': 'return [x + {k} for x in xs]', 'count': 'return xs.count({k})', 'repeat': 'return s * {k}',
    'first': 'return s[:{k}]',
}


@pytest.fixture(scope='module')
def sandbox():
    box = Sandbox()
    yield box
    box.close()


@pytest.mark.parametrize('level', list(LEVELS))
def test_the_splits_cut_the_pool_without_overlap_and_are_fixed(level):
    train, heldout = make_tasks(level, 'train'), make_tasks(level, 'heldout')
    ids = [t.task_id for t in task_pool(level)]
    assert len(set(ids)) == len(ids)
    assert not {t.task_id for t in train} & {t.task_id for t in heldout}
    assert sorted(t.task_id for t in train + heldout) == sorted(ids)
    assert 0 < len(heldout) < len(train)
    assert [t.task_id for t in make_tasks(level, 'heldout')] == [t.task_id for t in heldout]


@pytest.mark.parametrize('level', [level for level, family in LEVELS.items() if family == 'arithmetic'])
def test_every_arithmetic_answer_is_the_prompts_result(level):
    for task in task_pool(level):
        a, op, b = re.fullmatch(r'What is (\d+) ([-+*]) (\d+)\?', task.user).groups()
        assert task.answer == {'+': int(a) + int(b), '-': int(a) - int(b), '*': int(a) * int(b)}[op], task.task_id


def _solution(task):
    """The hand-written correct function for a code task."""
    for name, (pattern, signature, *_) in CODE_TEMPLATES.items():
        match = re.fullmatch(pattern.replace('{k}', r'(\d)'), task.function)
        if match:
            return f'def {task.function}({signature}):\n    {SOLUTIONS[name].format(k=match.group(1))}\n'
    raise AssertionError(f'{task.function} matches no template')


@pytest.mark.parametrize('level', [level for level, family in LEVELS.items() if family == 'code'])
def test_a_correct_function_earns_the_code_reward_and_a_wrong_one_does_not(level, sandbox):
    for task in task_pool(level):
        good = _solution(task)
        assert code_reward(task, f'Here it is:\n```python\n{good}```\nDone.', sandbox) == 1.0, task.task_id
        wrong = good.replace('return ', 'return 1 + ', 1) if 'divisible' not in task.function \
            else good.replace('== 0', '== 1')
        assert code_reward(task, f'```python\n{wrong}```', sandbox) == 0.0, task.task_id


def test_the_code_reward_wants_a_closed_block_with_the_named_function(sandbox):
    task = make_tasks('code-arith', 'train')[0]
    good = _solution(task)
    assert code_reward(task, f'```python\n{good}', sandbox) == 0.0  # cut off before the fence closed
    assert code_reward(task, good, sandbox) == 0.0  # no block at all
    assert code_reward(task, '```python\n' + good.replace(task.function, 'other') + '```', sandbox) == 0.0
    with pytest.raises(ValueError, match='needs a sandbox'):
        reward(task, good)


@pytest.mark.parametrize('text, number', [('7', 7), (' 7\n', 7), ('-3', -3), ('+12', 12), ('7.', None),
                                          ('The answer is 7', None), ('7 apples', None), ('', None),
                                          ('To solve this problem, 9 - 7 = 2', None), ('2\n\nExplanation: 9-7', None)])
def test_a_number_reply_is_the_number_and_nothing_else(text, number):
    assert reply_number(text) == number


def test_lucky_digits_in_a_chatty_reply_earn_nothing():
    task = next(t for t in task_pool('sub1') if t.user == 'What is 9 - 7?')
    assert arithmetic_reward(task, '2') == 1.0 and reward(task, '2') == 1.0
    assert arithmetic_reward(task, 'To solve this problem, we subtract 7 from 9 and get 2.') == 0.0
    assert arithmetic_reward(task, '2\nThat is because 9 minus 7 is 2.') == 0.0
    assert arithmetic_reward(task, '3') == 0.0


def test_unknown_levels_and_splits_are_named():
    with pytest.raises(ValueError, match="unknown level 'add9'.*add1"):
        make_tasks('add9', 'train')
    with pytest.raises(ValueError, match="unknown split 'test'.*train, heldout"):
        make_tasks('add1', 'test')


def test_draw_tasks_follows_its_generator():
    tasks = make_tasks('add1', 'train')
    first = draw_tasks(tasks, 4, torch.Generator().manual_seed(3))
    assert first == draw_tasks(tasks, 4, torch.Generator().manual_seed(3))
    assert first != draw_tasks(tasks, 4, torch.Generator().manual_seed(4))


def _pilot(level, rewards, sample_seconds=1.0, forward=0.1, train=0.3):
    return pilot.LevelPilot(level, LEVELS[level], 12, rewards, sample_seconds, forward, train)


def test_the_pilot_reads_pass1_and_flat_groups():
    result = _pilot('add1', [[1, 0] * 4, [0] * 8, [1] * 8, [1, 1, 0, 0, 0, 0, 0, 0]])
    assert result.pass1 == pytest.approx((4 + 0 + 8 + 2) / 32)
    assert result.flat_share == 0.5
    assert not result.few_flat  # exactly half is not fewer than half


def test_the_rule_prefers_code_then_the_level_nearest_the_bands_middle():
    mixed = [[1, 0, 0, 0, 0, 0, 0, 0]] * 2 + [[1, 1, 1, 0, 0, 0, 0, 0]] * 2  # pass@1 0.25, no flat group
    middle = [[1, 1, 1, 0, 0, 0, 0, 0], [1, 1, 1, 1, 1, 0, 0, 0]] * 2  # pass@1 0.5
    arithmetic = [_pilot('add1', middle), _pilot('sub1', mixed)]
    assert pilot.choose(arithmetic) == 'add1'
    assert pilot.choose(arithmetic + [_pilot('code-arith', mixed)]) == 'code-arith'
    slow_code = _pilot('code-arith', mixed, train=pilot.RUN_SECONDS)  # in the band but too dear a step
    assert not slow_code.fits_time and pilot.choose(arithmetic + [slow_code]) == 'add1'
    assert pilot.choose([_pilot('add1', [[0] * 8] * 4)]) is None


def test_the_few_shot_examples_answer_no_task_of_any_level():
    from agentrl.realrl.tasks import FEW_SHOT

    questions = {task.user for level in LEVELS for task in task_pool(level)}
    assert FEW_SHOT and not questions & {question for question, _ in FEW_SHOT}
    for question, answer in FEW_SHOT:  # and each example is itself right, in the strict format
        a, op, b = re.fullmatch(r'What is (\d+) ([-+]) (\d+)\?', question).groups()
        assert reply_number(answer) == (int(a) + int(b) if op == '+' else int(a) - int(b))
    assert all(t.examples == FEW_SHOT for t in task_pool('fs-add1')) and not task_pool('add1')[0].examples


def test_the_format_is_the_replys_form_whether_right_or_wrong():
    from agentrl.realrl.rewards import in_format

    sums = next(t for t in task_pool('add1') if t.answer == 5)
    assert in_format(sums, '7') and in_format(sums, '5') and not in_format(sums, 'It is 5')
    code = make_tasks('code-arith', 'train')[0]
    assert in_format(code, '```python\ndef f():\n    return 0\n```') and not in_format(code, '```python\ndef f():')
