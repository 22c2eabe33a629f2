"""Prompts with checkable answers for the real model, made by a seeded generator: nothing is downloaded.

Two families, each a ladder of levels from easy to hard:

  arithmetic   'What is 7 + 5?' under a calculator system prompt; the answer is an int. The 'fs-' levels put two
               answered questions (FEW_SHOT) before it, which show the format and answer no task of any level
  code         'Write a Python function `times_3(x)` that returns x multiplied by 3.'; graded by running tests

Every level enumerates its whole pool of tasks (all operand pairs, all template and constant pairs), shuffles it with
a seeded `random.Random`, and cuts it into a held-out part and a training part that never overlap.
"""
import itertools
import random
from dataclasses import dataclass, field

CALCULATOR = 'You are a calculator. Reply with the number only.'
PROGRAMMER = 'You are a Python programmer. Reply with one ```python code block and nothing else.'
SPLITS = ('train', 'heldout')
HELDOUT_SHARE = 0.25  # of each level's pool, held out from training
SPLIT_SEED = 20261206  # the shuffle that cuts every pool; the pools are fixed, so are their splits


@dataclass(frozen=True)
class Task:
    """One prompt and what a correct reply must give."""
    task_id: str  # unique within its level, e.g. 'add1/7+5'
    family: str  # 'arithmetic' or 'code'
    system: str  # the system turn
    user: str  # the user turn
    answer: int = None  # arithmetic: the number the reply must be
    function: str = None  # code: the function's name
    tests: tuple = field(default=())  # code: ((args, expected), ...)
    examples: tuple = field(default=())  # ((user, assistant), ...) turns before the question


# --- arithmetic -------------------------------------------------------------------------------------------------------

# level -> (operator, first operands, second operands); easy to hard
ARITHMETIC_LEVELS = {
    'add1': ('+', range(0, 10), range(0, 10)),
    'sub1': ('-', range(0, 10), range(0, 10)),
    'add2': ('+', range(10, 50), range(1, 10)),
    'mul1': ('*', range(2, 10), range(2, 10)),
    'add22': ('+', range(10, 100), range(10, 100)),
}
ARITHMETIC_LEVELS.update({f'fs-{level}': spec for level, spec in list(ARITHMETIC_LEVELS.items())})
# three-digit questions: no level's pool holds them, so the examples give the format and no task's answer
FEW_SHOT = (('What is 120 - 5?', '115'), ('What is 200 + 31?', '231'))
_APPLY = {'+': lambda a, b: a + b, '-': lambda a, b: a - b, '*': lambda a, b: a * b}


def _arithmetic_pool(level):
    op, firsts, seconds = ARITHMETIC_LEVELS[level]
    examples = FEW_SHOT if level.startswith('fs-') else ()
    return [Task(f'{level}/{a}{op}{b}', 'arithmetic', CALCULATOR, f'What is {a} {op} {b}?', answer=_APPLY[op](a, b),
                 examples=examples)
            for a, b in itertools.product(firsts, seconds)]


# --- code -------------------------------------------------------------------------------------------------------------

# Every template is solvable with the sandbox's builtins (len, range, min, max, abs, sum, sorted) and plain str and
# list methods. Each: (name pattern with {k}, signature, description with {k}, reference function of k, test inputs).
_INTS = ((0,), (1,), (4,), (-3,), (10,))
_LISTS = (([1, 2, 3],), ([5],), ([4, -1, 7, 2],), ([0, 0, 9],))
_WORDS = (('abc',), ('hello',), ('a',), ('Python',))
CODE_TEMPLATES = {
    'plus': ('plus_{k}', 'x', 'returns x plus {k}', lambda k: (lambda x: x + k), _INTS),
    'times': ('times_{k}', 'x', 'returns x multiplied by {k}', lambda k: (lambda x: x * k), _INTS),
    'divisible': ('divisible_by_{k}', 'n', 'returns True if n is divisible by {k}, else False',
                  lambda k: (lambda n: n % k == 0), ((0,), (12,), (7,), (15,), (-6,))),
    'add_each': ('add_{k}_to_each', 'xs', 'returns a new list with {k} added to every element of the list xs',
                 lambda k: (lambda xs: [x + k for x in xs]), _LISTS),
    'count': ('count_{k}s', 'xs', 'returns how many times the number {k} occurs in the list xs',
              lambda k: (lambda xs: xs.count(k)), (([1, 2, 3],), ([2, 2, 5, 2],), ([],), ([3, 4, 5, 6, 7, 8, 9],))),
    'repeat': ('repeat_{k}', 's', 'returns the string s repeated {k} times',
               lambda k: (lambda s: s * k), _WORDS),
    'first': ('first_{k}', 's', 'returns the first {k} characters of the string s',
              lambda k: (lambda s: s[:k]), _WORDS + (('abcdefghij',),)),
}
CODE_LEVELS = {
    'code-arith': ('plus', 'times', 'divisible'),
    'code-lists': ('add_each', 'count', 'repeat', 'first'),
    'code-mixed': ('plus', 'times', 'divisible', 'add_each', 'count', 'repeat', 'first'),
}
CODE_CONSTANTS = range(2, 10)


def _code_task(level, template, k):
    pattern, signature, description, reference, inputs = CODE_TEMPLATES[template]
    name = pattern.format(k=k)
    solve = reference(k)
    tests = tuple((args, solve(*[list(a) if isinstance(a, list) else a for a in args])) for args in inputs)
    user = f'Write a Python function `{name}({signature})` that {description.format(k=k)}.'
    return Task(f'{level}/{name}', 'code', PROGRAMMER, user, function=name, tests=tests)


def _code_pool(level):
    return [_code_task(level, template, k) for template in CODE_LEVELS[level] for k in CODE_CONSTANTS]


# --- both -------------------------------------------------------------------------------------------------------------

LEVELS = {**{level: 'arithmetic' for level in ARITHMETIC_LEVELS}, **{level: 'code' for level in CODE_LEVELS}}


def task_pool(level):
    """Every task of a level, in a fixed order -> list of Task."""
    if level not in LEVELS:
        raise ValueError(f'unknown level {level!r}; the levels are: {", ".join(LEVELS)}')
    return _arithmetic_pool(level) if LEVELS[level] == 'arithmetic' else _code_pool(level)


def make_tasks(level, split):
    """The `split` ('train' or 'heldout') part of a level's pool -> list of Task; the two parts never overlap."""
    if split not in SPLITS:
        raise ValueError(f'unknown split {split!r}; the splits are: {", ".join(SPLITS)}')
    pool = task_pool(level)
    order = list(range(len(pool)))
    random.Random(f'{SPLIT_SEED}/{level}').shuffle(order)
    n_heldout = max(1, round(HELDOUT_SHARE * len(pool)))
    chosen = order[:n_heldout] if split == 'heldout' else order[n_heldout:]
    return [pool[i] for i in sorted(chosen)]


def draw_tasks(tasks, n, generator):
    """n tasks drawn without replacement with a torch.Generator -> list (all of them, shuffled, if n >= len)."""
    import torch

    if not tasks:
        raise ValueError('draw_tasks needs at least one task')
    picks = torch.randperm(len(tasks), generator=generator)[:n].tolist()
    return [tasks[i] for i in picks]
