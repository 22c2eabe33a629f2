"""The 15 families of EXTRA_FAMILY_TABLE (f36..f50 of the 'extended' family set) obey the rules of FAMILY_TABLE's.

Each family is built the way the gym builds one (name f36.., the source's lines with 'def F (' renamed) and turned
into tasks by gym._family_tasks, which keeps only the one-token bugs its 12 hidden tests detect.
"""
import collections
import functools

import pytest

from agentrl.substrate import gym
from agentrl.substrate.task_families import EXTRA_FAMILY_TABLE, FAMILY_TABLE, source_lines

N_BASE = 36
ALLOWED_NAMES = {'a0', 'a1', 'a2', 'r', 'c', 'x', 'y', 'i', 's', 'm', 'p', 'k', 'n', 't'}
ALLOWED_BUILTINS = {'len', 'range', 'max', 'abs'}  # the builtins FAMILY_TABLE's sources call
PUNCTUATION = {'(', ')', '[', ']', ',', ':', '='}
MAX_WORDS = 330


def _family(index, entry):
    description, text, make_args = entry
    name = f'f{index:02d}'
    lines = tuple(line.replace('def F (', f'def {name} (') for line in source_lines(text))
    return gym.Family(name, description, lines, make_args)


BASE = [_family(index, entry) for index, entry in enumerate(FAMILY_TABLE)]
EXTRA = [_family(N_BASE + index, entry) for index, entry in enumerate(EXTRA_FAMILY_TABLE)]


@functools.lru_cache(maxsize=None)
def _tasks(name):
    family = next(f for f in BASE + EXTRA if f.name == name)
    return tuple(gym._family_tasks(family))


def test_tables_have_their_sizes():
    assert len(FAMILY_TABLE) == N_BASE  # the default substrate's families are untouched
    assert len(EXTRA_FAMILY_TABLE) == 15
    assert [f.name for f in EXTRA] == [f'f{i}' for i in range(36, 51)]


@pytest.mark.parametrize('family', EXTRA, ids=lambda f: f.name)
def test_source_is_small_anonymised_python_with_right_hand_operators(family):
    text = '\n'.join(family.lines) + '\n'
    compile(text, family.name, 'exec')
    assert len(family.lines) <= 10  # fits in L1..L12 after up to 2 blank lines
    assert family.lines[0].startswith(f'def {family.name} ( a0')
    allowed = (set(gym.FIXES.values()) | ALLOWED_NAMES | ALLOWED_BUILTINS | PUNCTUATION | set(gym.PYTHON_KEYWORDS)
               | set('0123456789') | {family.name})
    for line in family.lines:
        body = line.lstrip(' ')
        indent = len(line) - len(body)
        assert indent % 4 == 0, line
        assert body == ' '.join(body.split()), f'tokens not separated by single spaces: {line!r}'
        words = body.split()
        assert not set(words) & set(gym.FIXES), f'a wrong-side operator in {line!r}'
        assert set(words) <= allowed, f'{sorted(set(words) - allowed)} in {line!r}'


@pytest.mark.parametrize('family', EXTRA, ids=lambda f: f.name)
def test_runs_on_its_hidden_tests_with_some_variety(family):
    tests = gym._hidden_tests(family)  # runs the correct source under the sandbox's line budget
    assert len(tests) == gym.N_HIDDEN_TESTS
    assert len({repr(expected) for _, expected in tests}) >= 2, 'every hidden test expects the same value'


@pytest.mark.parametrize('family', EXTRA, ids=lambda f: f.name)
def test_enough_detectable_bugs_spread_over_lines(family):
    tasks = _tasks(family.name)
    per_line = collections.Counter(task.bug_line for task in tasks)
    assert len(tasks) >= 5, [t.task_id for t in tasks]
    assert len(per_line) >= 3, dict(per_line)
    assert sum(count == 1 for count in per_line.values()) >= 2, dict(per_line)  # room for a fresh-line held-out bug
    assert gym.run_hidden_tests(family.lines, family.name, tasks[0].tests)
    for task in tasks:
        assert task.bug_line >= 2 and gym.FIXES[task.wrong] == task.right
        assert task.lines[task.bug_line - 1].split()[task.bug_pos] == task.wrong
        assert not gym.run_hidden_tests(task.lines, family.name, task.tests)


def test_descriptions_and_sources_are_all_different():
    descriptions = [entry[0] for entry in FAMILY_TABLE + EXTRA_FAMILY_TABLE]
    bodies = [tuple(source_lines(entry[1])[1:]) for entry in FAMILY_TABLE + EXTRA_FAMILY_TABLE]
    assert len(set(descriptions)) == len(descriptions)
    assert len(set(bodies)) == len(bodies)
    for description, _, _ in EXTRA_FAMILY_TABLE:
        assert description == description.lower().strip() and '  ' not in description


def test_vocabulary_of_all_51_families_stays_small():
    tasks = [task for family in BASE + EXTRA for task in _tasks(family.name)]
    words = gym.vocabulary_words(tasks)
    assert len(words) <= MAX_WORDS, len(words)
