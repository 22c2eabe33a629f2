"""The anonymised one-edit gym: small Python functions with a one-token bug, tool calls, hidden tests.

A task is the source of a real Python function with anonymised names (``def f03 ( a0 , a1 ) :``) in
which one token was changed. An episode is a short dialogue of tool calls written word by word by
the agent, each ending with ``;``:

    read L2 L5 ;      show lines 2..5 of the file, each line after its label
    edit L4 < > ;     replace the first '<' on line 4 by '>' (one edit per episode)
    submit ;          run the hidden tests on the edited function; the episode ends

Reward is 1 if the agent submitted and the edited function passes every hidden test, else 0. Any
bad call (unknown tool, malformed arguments, a line that does not exist, reading past the end, a
second edit, a call that never ends) is answered with an ``error`` observation and counted in
``info['n_invalid']``; running out of turns ends the episode and counts as one more invalid call.

The function starts after a few blank lines of its file (a random offset per episode; the prompt
says where it is), so a line number alone tells nothing about the bug. The header names the
function (one name per function family) but not the bug. Every bug replaces
one of eight operators by its counterpart, and the correct sources never contain the wrong tokens,
so a reader can spot the bug and its fix; an agent that does not read can only guess which of the
family's operators was broken (about one chance in five).

The hidden tests run the agent's code in a separate worker process under time, memory and file limits
(agentrl/substrate/sandbox.py); a time-out or a crash there fails the episode and is recorded in
``info['grader']``, it never stops training.
"""
import dataclasses
import random

from agentrl.substrate.sandbox import SAFE_BUILTINS, Sandbox, call_with_line_budget
from agentrl.substrate.task_families import FAMILY_TABLE, source_lines

END = ';'  # ends every tool call
TOOLS = ('read', 'edit', 'submit')
FIXES = {'<': '>', '-': '+', '!=': '==', 'or': 'and', '//': '%', 'min': 'max', '<=': '>=', '/': '*'}  # wrong -> right
BREAKS = {right: wrong for wrong, right in FIXES.items()}  # right -> wrong: the one-token bugs
MAX_LINES = 12  # line labels L1..L12 exist in the vocabulary
LINE_LABELS = tuple(f'L{i}' for i in range(1, MAX_LINES + 1))
SPECIAL_WORDS = ('<pad>', '<task>', '</task>', '<obs>', '</obs>')
MESSAGE_WORDS = ('ok', 'no', 'match', 'on', 'error', 'unknown', 'tool', 'bad', 'arguments', 'line', 'past', 'the',
                 'end', 'already', 'edited', 'call', 'too', 'long', 'turn', 'limit', 'lines')
PYTHON_KEYWORDS = ('False', 'None', 'True', 'and', 'as', 'assert', 'async', 'await', 'break', 'class', 'continue',
                   'def', 'del', 'elif', 'else', 'except', 'finally', 'for', 'from', 'global', 'if', 'import', 'in',
                   'is', 'lambda', 'nonlocal', 'not', 'or', 'pass', 'raise', 'return', 'try', 'while', 'with',
                   'yield')  # keyword.kwlist of Python 3.11, written out so the vocabulary is the same on every Python
PYTHON_WORDS = PYTHON_KEYWORDS + tuple('0123456789') + (
    '+', '-', '*', '/', '//', '%', '**', '==', '!=', '<', '<=', '>', '>=', '=', '(', ')', '[', ']', ',', ':', '.')
N_HIDDEN_TESTS = 12
HELDOUT_SIZE = 10


@dataclasses.dataclass(frozen=True)
class Family:
    """A correct function with anonymised names; `make_args(rng)` draws one hidden-test input tuple."""
    name: str
    description: str
    lines: tuple  # source lines with indentation, tokens separated by single spaces
    make_args: object


@dataclasses.dataclass(frozen=True)
class Task:
    """One buggy function: family source with the token at (line, position) replaced by `wrong`; fixed by `right`."""
    task_id: str
    family: str
    description: str
    lines: tuple  # the buggy source lines
    bug_line: int  # 1-based line number of the bug
    bug_pos: int  # index of the bug token among the line's words
    wrong: str
    right: str
    tests: tuple  # ((args, expected), ...) hidden tests, from the correct source
    sites: tuple  # (line, wrong, right) of the family's bugs in the training split: a blind agent's guesses

    @property
    def source(self):
        """The buggy source code as Python text."""
        return '\n'.join(self.lines) + '\n'

    @property
    def max_offset(self):
        """The function may start after up to this many blank lines of its file (it must end by L12)."""
        return MAX_LINES - len(self.lines)

    def fix(self, offset=0):
        """The edit call that repairs the bug when the function starts after `offset` blank lines, e.g. 'edit L4 < >'."""
        return f'edit L{offset + self.bug_line} {self.wrong} {self.right}'

    def prompt(self, offset=0):
        """The episode's opening words: header, what the function should compute, where it is; no hint of the bug."""
        return ['<task>', *self.lines[0].split()[1:], *self.description.split(), 'lines', LINE_LABELS[offset],
                LINE_LABELS[offset + len(self.lines) - 1], '</task>']




def _copy_args(args):
    return tuple(list(a) if isinstance(a, list) else a for a in args)


_SANDBOX = Sandbox()  # one grading worker per process, started on first use


def run_hidden_tests(lines, name, tests):
    """Whether function `name` of the source `lines` returns the expected value on every (args, expected) test.

    The code runs in a separate worker process under limits, with only SAFE_BUILTINS (agentrl.substrate.sandbox);
    a syntax error, a missing function, an exception, a time-out or a crash of the worker is a failure, never an
    exception here.
    """
    return grade_source(lines, name, tests)[0] == 'pass'


def grade_source(lines, name, tests):
    """(outcome, detail) of the hidden tests on `lines`: outcome 'pass', 'fail', 'timeout' or 'crash'."""
    return _SANDBOX.run('\n'.join(lines) + '\n', name, [(_copy_args(args), expected) for args, expected in tests])


_TEST_CACHE = {}  # (family, source text) -> the tests' outcome; sources repeat a lot during training


def hidden_test_outcome(task, lines):
    """'pass', 'fail', 'timeout' or 'crash': the hidden tests on `lines` (the task's source after the edit), cached by source."""
    key = (task.family, '\n'.join(lines))
    if key not in _TEST_CACHE:
        if len(_TEST_CACHE) > 100_000:
            _TEST_CACHE.clear()
        _TEST_CACHE[key] = grade_source(lines, task.family, task.tests)[0]
    return _TEST_CACHE[key]


def passes_hidden_tests(task, lines):
    """Whether `lines` (the task's source after the agent's edit) pass the task's hidden tests, cached by source."""
    return hidden_test_outcome(task, lines) == 'pass'


def _make_families():
    families = []
    for index, (description, text, make_args) in enumerate(FAMILY_TABLE):
        name = f'f{index:02d}'
        lines = tuple(line.replace('def F (', f'def {name} (') for line in source_lines(text))
        families.append(Family(name, description, lines, make_args))
    return families


def _hidden_tests(family):
    """N_HIDDEN_TESTS deterministic (args, expected) pairs computed by running the correct source."""
    rng = random.Random(f'hidden tests of {family.name}')
    namespace = {'__builtins__': dict(SAFE_BUILTINS)}  # our own correct code: it runs here, not in the worker
    exec(compile('\n'.join(family.lines) + '\n', family.name, 'exec'), namespace)
    tests = []
    for _ in range(N_HIDDEN_TESTS):
        args = family.make_args(rng)
        tests.append((args, call_with_line_budget(namespace[family.name], _copy_args(args))))
    return tuple(tests)


def _family_tasks(family):
    """Every one-token bug of the family (one per operator occurrence) that its hidden tests detect."""
    tests = _hidden_tests(family)
    sites = [(number, pos, word) for number, line in enumerate(family.lines, start=1) if number > 1
             for pos, word in enumerate(line.split()) if word in BREAKS]
    tasks = []
    for number, pos, right in sites:
        words = family.lines[number - 1].split()
        indent = family.lines[number - 1][:len(family.lines[number - 1]) - len(family.lines[number - 1].lstrip())]
        words[pos] = BREAKS[right]
        lines = family.lines[:number - 1] + (indent + ' '.join(words),) + family.lines[number:]
        if run_hidden_tests(lines, family.name, tests):
            continue  # an equivalent mutant: the hidden tests cannot tell it from the correct function
        tasks.append(Task(f'{family.name}:L{number}:{pos}', family.name, family.description, lines, number, pos,
                          BREAKS[right], right, tests, ()))
    site_list = tuple((t.bug_line, t.wrong, t.right) for t in tasks)
    return [dataclasses.replace(t, sites=site_list) for t in tasks]


def _split(tasks):
    """Deterministic held-out choice: one bug in each of HELDOUT_SIZE families, its kind of bug shown elsewhere."""
    rng = random.Random('heldout split')
    by_family = {}
    for task in tasks:
        by_family.setdefault(task.family, []).append(task)
    candidates = [name for name, group in by_family.items() if len(group) >= 4]
    rng.shuffle(candidates)
    heldout = []
    for name in candidates:
        if len(heldout) == HELDOUT_SIZE:
            break
        group = by_family[name]
        heldout.append(group[rng.randrange(len(group))])
    held = {t.task_id for t in heldout}
    train = [t for t in tasks if t.task_id not in held]
    for t in heldout:  # each held-out bug must be of a kind (wrong token) the training split shows
        assert sum(u.wrong == t.wrong for u in train) >= 3, t.task_id
    return train, sorted(heldout, key=lambda t: t.task_id)


def _all_tasks():
    """Build every task once: {'all', 'train', 'heldout'} -> tuples of tasks."""
    if not _TASKS:
        tasks = [task for family in _make_families() for task in _family_tasks(family)]
        train, heldout = _split(tasks)
        # what a blind agent may guess: the family's bugs that the training split shows
        shown = {}
        for task in train:
            shown.setdefault(task.family, []).append((task.bug_line, task.wrong, task.right))
        train, heldout = ([dataclasses.replace(t, sites=tuple(shown[t.family])) for t in split] for split in (train, heldout))
        _TASKS.update(train=tuple(train), heldout=tuple(heldout))
        _TASKS['all'] = tuple(sorted(train + heldout, key=lambda t: t.task_id))
    return _TASKS


_TASKS = {}
SPLITS = ('all', 'train', 'heldout')


def make_tasks(split='all'):
    """Deterministic list of Task objects: 'all', 'train', or 'heldout' (exactly 10, disjoint from 'train')."""
    if split not in SPLITS:
        raise ValueError(f'unknown split {split!r}; valid splits: {", ".join(map(repr, SPLITS))}')
    return list(_all_tasks()[split])


def vocabulary_words(tasks):
    """Every word an episode on these tasks can contain: specials, tool syntax, messages, line labels, code."""
    words = list(SPECIAL_WORDS) + [END, *TOOLS] + list(MESSAGE_WORDS) + list(LINE_LABELS)
    words += list(PYTHON_WORDS) + list(SAFE_BUILTINS)  # an edit may write any keyword, digit, operator, builtin
    for task in tasks:
        for line in task.lines:
            words += line.split()
        words += task.description.split()
        words += [task.right, task.wrong]
    return list(dict.fromkeys(words))  # unique, first-seen order


def draw_offset(task, uniform):
    """The blank lines before the function, from a uniform number in [0, 1): 0..task.max_offset equally likely."""
    return min(int(uniform * (task.max_offset + 1)), task.max_offset)


def _label(word):
    """Line number of a label word 'L4' -> 4, or None if the word is not a line label."""
    return int(word[1:]) if word in LINE_LABELS else None


def _obs(*words):
    return ['<obs>', *words, '</obs>']


class Env:
    """One episode on one task: reset(task) -> prompt words; step(call) -> (observation words, done)."""

    def __init__(self, max_turns=6, max_call_words=6):
        if max_turns < 1 or max_call_words < 2:
            raise ValueError(f'max_turns must be >= 1 and max_call_words >= 2, got {max_turns}, {max_call_words}')
        self.max_turns, self.max_call_words = max_turns, max_call_words
        self.task = None

    def reset(self, task, offset=0):
        """Start an episode on task, its function after `offset` blank lines of the file -> the prompt words.

        The prompt gives the header, the description and where the function is ('lines L3 L8').
        """
        if not 0 <= offset <= task.max_offset:
            raise ValueError(f'offset must be in [0, {task.max_offset}] for {task.task_id}, got {offset}')
        self.task, self.lines, self.done = task, [''] * offset + list(task.lines), False
        self.info = dict(n_turns=0, submitted=False, hidden_pass=False, actions=[], n_invalid=0, reads=0,
                         edited=False, truncated=False, reward=0.0, grader=None)  # grader: the tests' outcome
        return task.prompt(offset)

    @property
    def reward(self):
        """1.0 if the agent submitted and the hidden tests passed, else 0.0."""
        return self.info['reward']

    def call_is_complete(self, words):
        """Whether the agent's words so far make one whole call: ended by ';' or as long as a call may be."""
        return bool(words) and (words[-1] == END or len(words) >= self.max_call_words)

    def step(self, call):
        """Carry out one tool call (a string, or the agent's list of words ending with ';'); returns (observation, done)."""
        if self.task is None or self.done:
            raise RuntimeError('step() called on a finished episode; call reset(task) first')
        if isinstance(call, str):
            words = call.split()
            words = words if words and words[-1] == END else words + [END]
        elif isinstance(call, (list, tuple)) and all(isinstance(word, str) for word in call):
            words = list(call)
        else:
            raise TypeError(f'step() takes a call as a string or a list of words, got {call!r}')
        if not words:
            raise ValueError("step() got an empty call: a call has at least one word, e.g. ['submit', ';']")
        self.info['n_turns'] += 1
        if words[-1] != END:
            observation = self._invalid('call', 'too', 'long')
            self.info['actions'].append(' '.join(words))
        else:
            self.info['actions'].append(' '.join(words[:-1]))
            observation = self._run(words[:-1])
        if not self.done and self.info['n_turns'] >= self.max_turns:
            self.done = True
            observation = observation + self._invalid('turn', 'limit')
        return observation, self.done

    def _invalid(self, *message):
        self.info['n_invalid'] += 1
        return _obs('error', *message)

    def _run(self, words):
        tool, args = (words[0], words[1:]) if words else (None, [])
        if tool not in TOOLS:
            return self._invalid('unknown', 'tool')
        n_lines = len(self.lines)
        if tool == 'submit':
            if args:
                return self._invalid('bad', 'arguments')
            self.done = True
            self.info['submitted'] = True
            self.info['grader'] = hidden_test_outcome(self.task, self.lines)
            self.info['hidden_pass'] = self.info['grader'] == 'pass'
            self.info['reward'] = float(self.info['hidden_pass'])
            return []
        if tool == 'read':
            if len(args) != 2 or _label(args[0]) is None or _label(args[1]) is None or _label(args[0]) > _label(args[1]):
                return self._invalid('bad', 'arguments')
            first, last = _label(args[0]), _label(args[1])
            if last > n_lines:
                return self._invalid('past', 'the', 'end', LINE_LABELS[n_lines - 1])
            self.info['reads'] += 1
            shown = []
            for number in range(first, last + 1):
                shown += [LINE_LABELS[number - 1], *self.lines[number - 1].split()]  # a blank line shows its label only
            return _obs(*shown)
        # tool == 'edit'
        if len(args) != 3 or _label(args[0]) is None:
            return self._invalid('bad', 'arguments')
        number, old, new = _label(args[0]), args[1], args[2]
        if number > n_lines:
            return self._invalid('no', 'line', args[0])
        if self.info['edited']:
            return self._invalid('already', 'edited')
        self.info['edited'] = True  # the one edit is used, whether or not `old` occurs on the line
        line = self.lines[number - 1]
        words = line.split()
        if old not in words:
            return _obs('no', 'match', 'on', args[0])
        words[words.index(old)] = new
        self.lines[number - 1] = line[:len(line) - len(line.lstrip())] + ' '.join(words)
        return _obs('ok', args[0])


def make_env(cfg=None):
    """A fresh environment with the turn and call-length limits of cfg (an RLConfig; defaults if None)."""
    if cfg is None:
        return Env()
    return Env(max_turns=cfg.max_turns, max_call_words=cfg.max_call_words)
