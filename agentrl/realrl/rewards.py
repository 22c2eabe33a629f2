"""Strict, verifiable rewards: 1.0 for a reply that is exactly right in the asked format, else 0.0.

A loose parser pays for luck: 'To solve this, 9 - 7 means 2 ...' contains the answer without giving it. So an
arithmetic reply must be the number and nothing else, and a code reply must hold a closed ```python block whose
function passes every test in the project's sandbox.
"""
import re

from agentrl.pretrained.bonus import code_block

NUMBER_REPLY = re.compile(r'[-+]?\d+')  # the whole reply, once surrounding whitespace is stripped


def reply_number(text):
    """The int a reply consists of, or None: only an optional sign and digits, with whitespace around them."""
    stripped = text.strip()
    return int(stripped) if NUMBER_REPLY.fullmatch(stripped) else None


def arithmetic_reward(task, text):
    """1.0 if the reply is exactly the task's answer written as an integer, else 0.0."""
    return float(reply_number(text) == task.answer)


def code_reward(task, text, sandbox):
    """1.0 if the reply's first closed ```python block defines task.function and it passes every test of task.tests
    in `sandbox` (an agentrl.substrate.sandbox.Sandbox), else 0.0."""
    code = code_block(text)
    if code is None or not code.strip():
        return 0.0
    status, _ = sandbox.run(code, task.function, task.tests)
    return float(status == 'pass')


def in_format(task, text):
    """Whether a reply has the asked form, right or wrong: a bare integer (arithmetic), a closed code block (code)."""
    if task.family == 'arithmetic':
        return reply_number(text) is not None
    return code_block(text) is not None


def reward(task, text, sandbox=None):
    """The task family's reward for one reply -> 0.0 or 1.0; a code task needs a sandbox."""
    if task.family == 'arithmetic':
        return arithmetic_reward(task, text)
    if task.family == 'code':
        if sandbox is None:
            raise ValueError(f'task {task.task_id!r} is a code task: its reward needs a sandbox')
        return code_reward(task, text, sandbox)
    raise ValueError(f'task {task.task_id!r} has family {task.family!r}; the families are arithmetic and code')
