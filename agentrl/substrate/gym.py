"""The anonymised one-edit gym: small Python functions with a one-token bug, tool calls, hidden tests.

A task is the source of a real Python function with anonymised names (``def f03 ( a0 , a1 ) :``) in
which one token was changed. An episode is a short dialogue of tool calls written word by word by
the agent, each ending with ``;``:

    read L2 L5 ;      show lines 2..5 of the file, each line after its label
    edit L4 < > ;     replace the first '<' on line 4 by '>' (one edit per episode)
    submit ;          run the hidden tests on the edited function; the episode ends

That is the short grammar; the long one spells the same calls out (``read L2 to L5 ;``,
``edit L4 replace < with > ;``): more words per call, and more of them forced by the grammar.

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

from agentrl.substrate import task_families
from agentrl.substrate.config import active
from agentrl.substrate.sandbox import SAFE_BUILTINS, Sandbox, call_with_line_budget
from agentrl.substrate.task_families import source_lines

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
class Grammar:
    """How the read and edit calls are spelled: a pattern of slots per tool ('L' a line label, 'W' any word,
    anything else a word the grammar forces)."""
    name: str
    read: tuple  # the arguments of read: first and last line
    edit: tuple  # the arguments of edit: line, the word replaced, its replacement

    @property
    def words(self):
        """The words this grammar forces (they join the vocabulary)."""
        return tuple(slot for slot in self.read + self.edit if slot not in ('L', 'W'))

    @property
    def max_call_words(self):
        """The default limit on a call's words (';' included): one more than its longest call."""
        return 1 + max(len(self.read), len(self.edit)) + 1 + 1

    def spell(self, tool, *values):
        """The words of a call with these slot values, e.g. spell('read', 'L2', 'L5') -> 'read L2 to L5'."""
        values = iter(values)
        pattern = self.read if tool == 'read' else self.edit
        return ' '.join([tool] + [next(values) if slot in ('L', 'W') else slot for slot in pattern])

    def parse(self, tool, args):
        """The slot values of a read or edit call's arguments, or None if they do not fit its pattern."""
        pattern = self.read if tool == 'read' else self.edit
        if len(args) != len(pattern):
            return None
        values = []
        for slot, word in zip(pattern, args):
            if slot == 'L' and _label(word) is None or slot not in ('L', 'W') and word != slot:
                return None
            if slot in ('L', 'W'):
                values.append(word)
        return values


GRAMMARS = {'short': Grammar('short', read=('L', 'L'), edit=('L', 'W', 'W')),
            'long': Grammar('long', read=('L', 'to', 'L'), edit=('L', 'replace', 'W', 'with', 'W'))}


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
    grammar: str = 'short'  # how calls are spelled in its episodes (a key of GRAMMARS)
    offset_cap: int = MAX_LINES  # at most this many blank lines before the function

    @property
    def source(self):
        """The buggy source code as Python text."""
        return '\n'.join(self.lines) + '\n'

    @property
    def max_offset(self):
        """The function may start after up to this many blank lines of its file (it must end by L12)."""
        return min(MAX_LINES - len(self.lines), self.offset_cap)

    @property
    def calls(self):
        """The Grammar its episodes are spelled in."""
        return GRAMMARS[self.grammar]

    def fix(self, offset=0):
        """The edit call that repairs the bug when the function starts after `offset` blank lines, e.g. 'edit L4 < >'."""
        return self.calls.spell('edit', f'L{offset + self.bug_line}', self.wrong, self.right)

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


def family_table(families):
    """The (description, source, input draw) entries of a family set: 'base' or 'extended' (15 more after them)."""
    if families == 'base':
        return task_families.FAMILY_TABLE
    return task_families.FAMILY_TABLE + task_families.EXTRA_FAMILY_TABLE


def _make_families(families='base'):
    families_out = []
    for index, (description, text, make_args) in enumerate(family_table(families)):
        name = f'f{index:02d}'
        lines = tuple(line.replace('def F (', f'def {name} (') for line in source_lines(text))
        families_out.append(Family(name, description, lines, make_args))
    return families_out


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


def _split(tasks, rule='any_line'):
    """Deterministic held-out choice: one bug in each of HELDOUT_SIZE families, its kind of bug shown elsewhere.

    rule 'any_line': any bug of the family; 'fresh_line': only a bug alone on its line, so that no training bug of
    the family sits there (a blind guess among the family's training bugs never fixes it).
    """
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
        if rule == 'fresh_line':
            group = [t for t in group if sum(u.bug_line == t.bug_line for u in by_family[name]) == 1]
            if not group:
                continue
        heldout.append(group[rng.randrange(len(group))])
    if len(heldout) < HELDOUT_SIZE:
        raise ValueError(f'the {rule!r} held-out rule finds only {len(heldout)} of {HELDOUT_SIZE} families with a bug '
                         'it may hold out')
    held = {t.task_id for t in heldout}
    train = [t for t in tasks if t.task_id not in held]
    for t in heldout:  # each held-out bug must be of a kind (wrong token) the training split shows
        assert sum(u.wrong == t.wrong for u in train) >= 3, t.task_id
    return train, sorted(heldout, key=lambda t: t.task_id)


def _all_tasks(families, heldout_rule, grammar, max_offset):
    """Build every task of these choices once: {'all', 'train', 'heldout'} -> tuples of tasks."""
    key = (families, heldout_rule, grammar, max_offset)
    if key not in _TASKS:
        tasks = [task for family in _make_families(families) for task in _family_tasks(family)]
        train, heldout = _split(tasks, heldout_rule)
        # what a blind agent may guess: the family's bugs that the training split shows
        shown = {}
        for task in train:
            shown.setdefault(task.family, []).append((task.bug_line, task.wrong, task.right))
        train, heldout = ([dataclasses.replace(t, sites=tuple(shown[t.family]), grammar=grammar, offset_cap=max_offset)
                           for t in split] for split in (train, heldout))
        _TASKS[key] = dict(train=tuple(train), heldout=tuple(heldout),
                           all=tuple(sorted(train + heldout, key=lambda t: t.task_id)))
    return _TASKS[key]


_TASKS = {}  # (families, held-out rule, grammar, max offset) -> the splits
SPLITS = ('all', 'train', 'heldout')


def make_tasks(split='all', substrate=None):
    """Deterministic list of Task objects: 'all', 'train', or 'heldout' (exactly 10, disjoint from 'train').

    The tasks of `substrate` (a SubstrateConfig; default: the active one, agentrl.substrate.config.active()).
    """
    if split not in SPLITS:
        raise ValueError(f'unknown split {split!r}; valid splits: {", ".join(map(repr, SPLITS))}')
    config = active() if substrate is None else substrate
    return list(_all_tasks(config.families, config.heldout, config.grammar, config.max_offset)[split])


def vocabulary_words(tasks):
    """Every word an episode on these tasks can contain: specials, tool syntax, messages, line labels, code."""
    words = list(SPECIAL_WORDS) + [END, *TOOLS] + list(MESSAGE_WORDS) + list(LINE_LABELS)
    words += list(PYTHON_WORDS) + list(SAFE_BUILTINS)  # an edit may write any keyword, digit, operator, builtin
    for grammar in dict.fromkeys(task.grammar for task in tasks):
        words += GRAMMARS[grammar].words  # the words a long call forces ('to', 'replace', 'with')
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

    def __init__(self, max_turns=6, max_call_words=None):
        if max_turns < 1 or max_call_words is not None and max_call_words < 2:
            raise ValueError(f'max_turns must be >= 1 and max_call_words >= 2 (or None: the grammar\'s limit), got '
                             f'{max_turns}, {max_call_words}')
        self.max_turns, self.call_limit = max_turns, max_call_words
        self.task = None

    @property
    def max_call_words(self):
        """Words a call may have (';' included): as set, or the task's grammar's limit (6 for the short one)."""
        if self.call_limit is not None:
            return self.call_limit
        return (self.task.calls if self.task is not None else GRAMMARS['short']).max_call_words

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
            labels = self.task.calls.parse('read', args)
            if labels is None or _label(labels[0]) > _label(labels[1]):
                return self._invalid('bad', 'arguments')
            first, last = _label(labels[0]), _label(labels[1])
            if last > n_lines:
                return self._invalid('past', 'the', 'end', LINE_LABELS[n_lines - 1])
            self.info['reads'] += 1
            shown = []
            for number in range(first, last + 1):
                shown += [LINE_LABELS[number - 1], *self.lines[number - 1].split()]  # a blank line shows its label only
            return _obs(*shown)
        # tool == 'edit'
        slots = self.task.calls.parse('edit', args)
        if slots is None:
            return self._invalid('bad', 'arguments')
        label, old, new = slots
        number = _label(label)
        if number > n_lines:
            return self._invalid('no', 'line', label)
        if self.info['edited']:
            return self._invalid('already', 'edited')
        self.info['edited'] = True  # the one edit is used, whether or not `old` occurs on the line
        line = self.lines[number - 1]
        words = line.split()
        if old not in words:
            return _obs('no', 'match', 'on', label)
        words[words.index(old)] = new
        self.lines[number - 1] = line[:len(line) - len(line.lstrip())] + ' '.join(words)
        return _obs('ok', label)


def make_env(cfg=None):
    """A fresh environment with the turn and call-length limits of cfg (an RLConfig; defaults if None)."""
    if cfg is None:
        return Env()
    return Env(max_turns=cfg.max_turns, max_call_words=cfg.max_call_words)
