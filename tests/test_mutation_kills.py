"""Behavioural tests added to kill the mutants `make mutation` found surviving.

Each checks what a mechanism must do, against an independent computation or a stated rule, and fails when the line
doing it is broken.
"""
import ast
import copy
import io
import math
import re
import os
import sys
import types
import warnings

import pytest
import torch

import agentrl as arl
from agentrl.core.logprobs import masked_mean, selected_log_probs
from agentrl.core.metrics import pass_at_k
from agentrl.verified_cache import load_verified, save_verified


# ------------------------------------------------------------------------------------------- math core

@pytest.mark.parametrize('call, names', [
    (lambda: arl.kl_penalty(torch.zeros(2, 3), torch.zeros(3), 'k3'), ('logp', 'ref_logp')),
    (lambda: masked_mean(torch.zeros(2, 3), torch.ones(3)), ('x', 'mask')),
    (lambda: __import__('agentrl.ch10.regularizers', fromlist=['x']).centered_cross_product(
        torch.zeros(2, 3), torch.zeros(2), torch.ones(3)), ('logp', 'mask')),
    (lambda: arl.policy_loss(torch.zeros(2, 3), torch.zeros(3), torch.zeros(2), torch.ones(2, 3), arl.RLConfig()),
     ('logp', 'old_logp')),
    (lambda: arl.policy_loss(torch.zeros(2, 3), torch.zeros(2, 3), torch.zeros(2), torch.ones(3), arl.RLConfig()),
     ('logp', 'mask')),
])
def test_a_shape_mismatch_names_both_arguments_and_both_shapes(call, names):
    # the message is what a user reads to find which tensor is wrong: both names, both shapes, in order
    first, second = names
    with pytest.raises(ValueError, match=rf'^{first} has shape \(2, 3\) but {second} has shape \(3,\)'):
        call()


def test_kl_estimate_defaults_to_k3():
    logp, ref = torch.log(torch.tensor([0.2, 0.5, 0.3])), torch.log(torch.tensor([0.4, 0.4, 0.2]))
    l = (ref - logp).double()
    assert torch.allclose(arl.kl_estimate(logp, ref).double(), torch.exp(l) - 1 - l, atol=1e-7)


@pytest.mark.parametrize('n, c, k', [(4, 5, 2), (4, -1, 2), (4, 2, 0), (4, 2, 5)])
def test_pass_at_k_refuses_each_impossible_count_naming_them(n, c, k):
    # each condition alone is enough to refuse (c outside 0..n with a valid k, k outside 1..n with a valid c)
    with pytest.raises(ValueError, match=rf'n={n}, c={c}, k={k}'):
        pass_at_k(n, c, k)


def test_pass_at_k_by_enumerating_every_draw():
    from itertools import combinations

    for n in range(1, 7):
        for c in range(n + 1):
            for k in range(1, n + 1):
                draws = list(combinations([1] * c + [0] * (n - c), k))
                assert math.isclose(pass_at_k(n, c, k), sum(map(any, draws)) / len(draws), abs_tol=1e-12)


def test_selected_log_probs_refuses_ids_of_another_shape():
    with pytest.raises(ValueError, match=r'logits has shape \(2, 3, 5\) and ids has shape \(2, 4\)'):
        selected_log_probs(torch.zeros(2, 3, 5), torch.zeros(2, 4, dtype=torch.long))


# ------------------------------------------------------------------------------------------- verified cache

def _reason(path, description):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        assert load_verified(path, description) is None
    (warning,) = caught
    return str(warning.message)


@pytest.mark.parametrize('saved, loaded, key', [
    (dict(a=1, b=dict(c=2)), dict(a=1, b=dict(c=3)), 'b.c'),  # a nested value differs
    (dict(a=1), dict(a=1, b=2), 'b'),  # a key the file lacks
    (dict(a=1, b=2), dict(a=1), 'b'),  # a key the file has in excess
    (dict(a=1, b=dict(c=2)), dict(a=1, b=5), 'b'),  # a section where a plain value is expected
    (dict(a=1, b=5), dict(a=1, b=dict(c=2)), 'b'),  # and the other way round
])
def test_a_foreign_file_is_reported_naming_the_first_differing_key(tmp_path, saved, loaded, key):
    path = tmp_path / 'x.pt'
    save_verified(path, dict(w=torch.ones(2)), saved)
    assert f'provenance does not match at {key!r}' in _reason(path, loaded)
    assert load_verified(path, saved)['w'].tolist() == [1.0, 1.0]  # the file itself is fine for its own description


def test_each_unusable_file_is_reported_with_its_reason_in_one_sentence(tmp_path):
    # the warning is the user's only account of why a cache is rebuilt: '<what> <path> is unusable (<reason>); ...'
    def says(path, reason, description=dict(a=1)):
        assert _reason(path, description) == f'cache file {path} is unusable ({reason}); it will be recomputed'

    old = tmp_path / 'old.pt'
    torch.save(dict(w=torch.ones(2)), old)  # a cache file as written before descriptions were stored
    says(old, 'provenance does not match: none is stored (a file of an older format)')
    good = tmp_path / 'good.pt'
    save_verified(good, dict(w=torch.ones(2)), dict(a=1))
    record = torch.load(good, weights_only=True)
    for name, change, reason in [('format', dict(format=0), 'format 0 is not 1'),
                                 ('flipped', dict(payload=dict(w=torch.zeros(2))),
                                  'checksum mismatch: the payload changed after it was written')]:
        torch.save(dict(record, **change), tmp_path / f'{name}.pt')
        says(tmp_path / f'{name}.pt', reason)


def test_a_description_is_compared_by_its_fields_not_their_order(tmp_path):
    path = tmp_path / 'x.pt'
    save_verified(path, dict(w=torch.ones(2)), dict(a=1, b=dict(c=2, d=3)))
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        assert load_verified(path, dict(b=dict(d=3, c=2), a=1))['w'].tolist() == [1.0, 1.0]


_RAN = []


def _record_a_call():
    _RAN.append('code from the file ran')


class _Hostile:
    def __reduce__(self):
        return _record_a_call, ()


@pytest.mark.parametrize('torch_default', ['weights only', 'full pickles'])
def test_loading_a_cache_file_never_runs_code_from_it(tmp_path, monkeypatch, torch_default):
    # torch.load(weights_only=True): a pickle that calls a function is refused, not executed, also where the
    # environment tells torch to unpickle anything when a caller does not say weights_only itself
    if torch_default == 'full pickles':
        monkeypatch.setenv('TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD', '1')
    _RAN.clear()
    path = tmp_path / 'hostile.pt'
    torch.save(dict(format=1, description=dict(a=1), checksum='', payload=_Hostile()), path)
    assert _reason(path, dict(a=1)).startswith(f'cache file {path} is unusable (unreadable: ') and _RAN == []


def test_a_file_where_the_cache_folder_belongs_is_named(tmp_path):
    (tmp_path / 'blocker').write_text('')
    with pytest.raises(NotADirectoryError, match=r'blocker is a file, but the cache directory for x\.pt belongs'):
        load_verified(tmp_path / 'blocker' / 'x.pt', dict(a=1))


# ------------------------------------------------------------------------------------------- rollout

def _traj(group, reward, policy=(False, True, True), **info):
    from agentrl.substrate.rollout import Trajectory

    base = dict(reads=0, n_invalid=0, n_turns=1, submitted=False, truncated=False)
    base.update(info)
    return Trajectory('t', group, list(range(len(policy))), list(policy), [0.0] + [-0.5] * (len(policy) - 1),
                      reward, base)


def test_behavior_stats_are_the_means_over_episodes_computed_by_hand():
    trajs = [_traj(0, 1.0, reads=2, n_invalid=1, n_turns=3, submitted=True),
             _traj(0, 0.0, policy=(False, True), reads=0, n_invalid=0, n_turns=1, truncated=True),
             _traj(1, 1.0, reads=1, n_invalid=3, n_turns=2, submitted=True),
             _traj(1, 1.0, policy=(False, False, True, True, True), reads=1, n_invalid=0, n_turns=2)]
    assert arl.behavior_stats(trajs) == dict(reward=3 / 4, reads=4 / 4, invalid=4 / 4, turns=8 / 4,
                                             policy_tokens=(2 + 1 + 2 + 3) / 4, submitted=2 / 4, truncated=1 / 4,
                                             zero_var=1 / 2)  # group 1's rewards are equal, group 0's differ


def test_behavior_stats_refuses_an_empty_batch_saying_why():
    with pytest.raises(ValueError, match='^behavior_stats needs at least one trajectory$'):
        arl.behavior_stats([])


def test_collate_gives_float_rewards_and_mask_and_the_turns_per_episode():
    # integer rewards (a reward function may return 0 or 1) still give float rewards: advantages are float math
    batch = arl.collate([_traj(0, 1, n_turns=3), _traj(0, 0, policy=(False, True), n_turns=1)], pad_id=7)
    assert batch['rewards'].dtype == torch.float32 and batch['rewards'].tolist() == [1.0, 0.0]
    assert batch['n_turns'].tolist() == [3, 1] and batch['n_turns'].dtype == torch.long
    assert batch['ids'].dtype == torch.long and batch['ids'].tolist() == [[0, 1, 2], [0, 1, 7]]
    assert batch['action_mask'].dtype == torch.float32 and batch['action_mask'].tolist() == [[1, 1], [1, 0]]


@pytest.mark.parametrize('max_redraws', [0, 2])
def test_sample_step_draws_at_most_one_plus_max_redraws_times(monkeypatch, max_redraws):
    from agentrl.substrate import rollout

    draws = []

    def no_spread(model, env_factory, tasks, tok, cfg, generator):  # every group's rewards equal: never a signal
        draws.append(len(tasks))
        return [_traj(g, 0.0) for g in range(len(tasks)) for _ in range(cfg.group_size)]

    monkeypatch.setattr(rollout, 'sample_groups', no_spread)
    cfg = arl.RLConfig(max_redraws=max_redraws, tasks_per_step=2, group_size=2)
    kept, sampled = rollout.sample_step(None, None, list(range(5)), None, cfg, torch.Generator().manual_seed(0))
    assert draws == [2] * (1 + max_redraws) and kept == [] and len(sampled) == 4


# ------------------------------------------------------------------------------------------- sandbox

@pytest.mark.parametrize('kwargs, ok', [
    (dict(wall_seconds=0.0), False), (dict(wall_seconds=-1.0), False), (dict(wall_seconds=0.01), True),
    (dict(memory_bytes=64 * 2 ** 20 - 1), False), (dict(memory_bytes=64 * 2 ** 20), True),
    (dict(wall_seconds=0.0, memory_bytes=2 ** 30), False), (dict(wall_seconds=1.0, memory_bytes=2 ** 20), False),
])
def test_the_sandbox_refuses_a_clock_that_is_not_positive_and_less_than_64_mib(kwargs, ok):
    from agentrl.substrate.sandbox import Sandbox

    if ok:
        Sandbox(**kwargs)  # starts nothing yet
    else:
        with pytest.raises(ValueError, match=r'wall_seconds must be > 0 and memory_bytes >= 64 MiB, got'):
            Sandbox(**kwargs)


def test_the_worker_starts_in_the_root_folder_with_a_clean_environment_and_no_stderr():
    from agentrl.substrate.sandbox import Sandbox

    box = Sandbox(wall_seconds=1.0)
    try:
        assert box.run('def f ( a0 ) :\n    return a0\n', 'f', [((1,), 1)])[0] == 'pass'
        pid = box.process.pid
        environ = dict(item.split('=', 1) for item in open(f'/proc/{pid}/environ').read().split('\0') if item)
        environ.pop('MUTANT_UNDER_TEST', None)  # set by machinery/mutation_plugin.py in a mutation run only
        assert sorted(environ) == ['LC_ALL', 'PATH', 'PYTHONHASHSEED']  # nothing of the parent's environment
        assert environ['PYTHONHASHSEED'] == '0' and environ['LC_ALL'] == 'C.UTF-8'
        assert os.readlink(f'/proc/{pid}/cwd') == '/' and os.readlink(f'/proc/{pid}/fd/2') == '/dev/null'
    finally:
        box.close()


def test_a_sandbox_closes_its_worker_at_exit_registering_once(monkeypatch):
    from agentrl.substrate import sandbox

    registered = []
    monkeypatch.setattr(sandbox.atexit, 'register', registered.append)
    box = sandbox.Sandbox(wall_seconds=1.0)
    try:
        for _ in range(2):
            assert box.run('def f ( a0 ) :\n    return a0\n', 'f', [((1,), 1)])[0] == 'pass'
            box.close()  # the next run starts a new worker
        assert registered == [box.close]
    finally:
        box.close()



def test_the_worker_runs_without_site_in_its_own_session_holding_none_of_the_parents_descriptors():
    from agentrl.substrate.sandbox import Sandbox

    read_end, write_end = os.pipe()
    os.set_inheritable(write_end, True)  # a descriptor any child started without close_fds would receive
    box = Sandbox(wall_seconds=1.0)
    try:
        assert box.run('def f ( a0 ) :\n    return a0\n', 'f', [((1,), 1)])[0] == 'pass'
        pid = box.process.pid
        with open(f'/proc/{pid}/cmdline') as f:
            assert f.read().split('\0')[1:3] == ['-S', '-s']  # no site module, no user site-packages on sys.path
        assert os.getsid(pid) == pid  # a session of its own: a Ctrl-C at the terminal does not reach it
        held = os.readlink(f'/proc/self/fd/{write_end}')
        assert held not in {os.readlink(f'/proc/{pid}/fd/{fd}') for fd in os.listdir(f'/proc/{pid}/fd')}
    finally:
        box.close()
        os.close(read_end)
        os.close(write_end)


def test_a_worker_that_does_not_start_is_an_error_naming_the_interpreter_and_the_script(monkeypatch):
    from agentrl.substrate import sandbox

    monkeypatch.setattr(sandbox.atexit, 'register', lambda close: None)
    monkeypatch.setattr(sys, 'executable', '/bin/false')  # an "interpreter" that ends at once without a word
    box = sandbox.Sandbox(wall_seconds=1.0)
    with pytest.raises(RuntimeError, match=r'^the grading worker \(/bin/false /\S+/sandbox\.py\) did not start$'):
        box.run('def f ( a0 ) :\n    return a0\n', 'f', [((1,), 1)])
    assert box.process is None  # and nothing is left running

@pytest.mark.parametrize('code, reason', [
    ('def f(__x):\n    return 1', "name '__x' is not allowed"),  # a parameter
    ('f(__x=1)', "name '__x' is not allowed"),  # a keyword argument
    ('import os as __x', "name '__x' is not allowed"),  # an alias
    ('from os import path as __x', "name '__x' is not allowed"),
    ('def f():\n    global __x', "name '__x' is not allowed"),
    ('def f():\n    x = 1\n    def g():\n        nonlocal __x', "name '__x' is not allowed"),
    ('match x:\n    case int():\n        pass', 'class patterns are not allowed'),
    ('f(*a, **k)\nf(a=1)\nimport os\nimport os as o\ndef g():\n    global y\n    return 1', None),  # all plain
])
def test_the_screen_checks_every_kind_of_name_and_says_which(code, reason):
    from agentrl.substrate.sandbox import screen

    assert screen(ast.parse(code)) == reason


@pytest.mark.parametrize('source, why', [
    ('def f(:\n    return 1\n', 'does not parse: SyntaxError'),
    ('def f():\n    return 1\nreturn 2\n', 'does not compile: SyntaxError'),  # parses, but return outside a function
    ('def f():\n    return ().__class__\n', "screened: attribute '__class__' is not allowed"),
    ('x = 1\n', "no function 'f'"),  # the source runs, but defines no f
    ('f = 1\n', "no function 'f'"),  # or an f that cannot be called
    ('def f():\n    return open\n', 'raised NameError'),  # only SAFE_BUILTINS exist for the code ...
    ('def f():\n    import os\n    return 1\n', 'raised ImportError'),  # ... so no import either
])
def test_grade_says_why_code_that_cannot_run_fails(source, why):
    from agentrl.substrate.sandbox import grade

    assert grade(source, 'f', [()]) == dict(status='failed', why=why)


def _straight_line_function(lines):
    namespace = {}
    exec('def g():\n' + '    a = 1\n' * lines, namespace)  # noqa: S102 - trusted code, built here
    return namespace['g']


def test_the_line_budget_allows_exactly_line_budget_lines_and_keeps_the_callers_tracer():
    import sys

    from agentrl.substrate.sandbox import LINE_BUDGET, LineBudgetExceeded, call_with_line_budget

    counted = []

    def count(frame, event, arg):  # an independent count of the line events of one call
        if event == 'line':
            counted.append(1)
        return count

    g = _straight_line_function(LINE_BUDGET)
    sys.settrace(lambda frame, event, arg: count)
    try:
        g()
    finally:
        sys.settrace(None)
    assert len(counted) == LINE_BUDGET
    mine = lambda frame, event, arg: None  # noqa: E731 - a tracer the caller had (a debugger, coverage)
    previous = sys.gettrace()
    sys.settrace(mine)
    try:
        assert call_with_line_budget(g) is None  # exactly the budget: allowed
        assert sys.gettrace() is mine  # and the caller's tracer is back
        with pytest.raises(LineBudgetExceeded):
            call_with_line_budget(_straight_line_function(LINE_BUDGET + 1))
        assert sys.gettrace() is mine
    finally:
        sys.settrace(previous)


def test_a_nan_output_never_matches_even_a_nan_expected_value():
    # nan is unequal to itself, so no output can be the answer nan: the identical-text shortcut must not apply
    from agentrl.substrate.sandbox import _same_value

    nan = float('nan')
    assert not _same_value('nan', nan) and not _same_value('[nan]', [nan]) and not _same_value('(1, nan)', (1, nan))
    assert _same_value('[1, 2.5]', [1, 2.5]) and _same_value('{1: "a"}', {1: 'a'})


def _box_talking_to(script):
    """A Sandbox whose 'worker' is `script` (python -c): what the parent does with a worker that misbehaves."""
    import subprocess
    import sys

    from agentrl.substrate.sandbox import Sandbox

    box = Sandbox(wall_seconds=5.0)
    box.process = subprocess.Popen([sys.executable, '-c', script], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    box.owner = os.getpid()
    return box


@pytest.mark.parametrize('reply, outcome', [
    ('[1, 2]', ('crash', 'the worker was stopped (crash)')),  # JSON, but not an object
    ('not json', ('crash', 'the worker was stopped (crash)')),
    ('{"status": "ok", "outputs": []}', ('fail', 'wrong number of outputs')),  # one output per test, or a failure
    ('{"status": "ok", "outputs": "1"}', ('fail', 'wrong number of outputs')),
])
def test_the_parent_turns_a_reply_it_cannot_use_into_a_crash_or_a_failure(reply, outcome):
    box = _box_talking_to(f'import sys\nsys.stdin.readline()\nprint({reply!r}, flush=True)\nsys.stdin.readline()')
    try:
        assert box.run('def f ( a0 ) :\n    return a0\n', 'f', [((1,), 1)]) == outcome
        assert box.counts['crash'] == (outcome[0] == 'crash')
    finally:
        box.close()


def test_a_wrong_answer_fails_as_a_wrong_output_and_every_crash_is_counted():
    from agentrl.substrate import sandbox

    box = sandbox.Sandbox(wall_seconds=1.0)
    try:
        assert box.run('def f ( a0 ) :\n    return a0 + 1\n', 'f', [((1,), 1)]) == ('fail', 'wrong output')
        echo = 'def f ( a0 ) :\n    return "x" * a0\n'
        for crashes in (1, 2):  # a reply over the size limit is a crash, and each one is counted
            big = sandbox.MAX_REPLY_BYTES
            assert box.run(echo, 'f', [((big,), 'x' * big)])[0] == 'crash' and box.counts['crash'] == crashes
    finally:
        box.close()


def test_a_reply_of_exactly_the_size_limit_is_read_and_one_byte_more_is_a_crash():
    import json

    from agentrl.substrate import sandbox

    overhead = len(json.dumps(dict(status='ok', outputs=[repr('')])).encode()) + 1  # the reply line, newline included
    n = sandbox.MAX_REPLY_BYTES - overhead
    box = sandbox.Sandbox(wall_seconds=2.0)
    try:
        echo = 'def f ( a0 ) :\n    return "x" * a0\n'
        assert box.run(echo, 'f', [((n,), 'x' * n)]) == ('pass', 'every output matches')
        assert box.run(echo, 'f', [((n + 1,), 'x' * (n + 1))])[0] == 'crash'
    finally:
        box.close()


# ------------------------------------------------------------------------------------------- GRPO settings

_INT = 'a valid integer'
_NUMBER = 'a valid number'
_FINITE = 'a finite number'
_TEMPERATURE = "a finite number in [0.01, 100.0] (beyond, logits / temperature leave float32's useful range)"
_SEED = 'an int in [0, 2**63) (a torch.Generator seed)'
_CLIP_LOW = 'a finite number in (0, 1)'
_AT_LEAST = 'greater than or equal to {}'.format
_ABOVE = 'greater than {}'.format
_REFUSED = [  # (field, value, what the message says is allowed): each just past its boundary, or of a wrong type
    ('lr', 0.0, _ABOVE(0)), ('lr', -1e-9, _ABOVE(0)), ('epochs', 0, _AT_LEAST(1)), ('minibatches', 0, _AT_LEAST(1)),
    ('temperature', 0.0099, _TEMPERATURE), ('temperature', 100.01, _TEMPERATURE),
    ('seed', -1, _SEED), ('seed', 2 ** 63, _SEED), ('eval_seed', -1, _SEED), ('eval_seed', 2 ** 63, _SEED),
    ('kl_coef', -1e-9, _AT_LEAST(0)), ('clip_low', 0.0, _CLIP_LOW), ('clip_low', 1.0, _CLIP_LOW),
    ('clip_high', 0.0, _ABOVE(0)), ('max_grad_norm', 0.0, _ABOVE(0)), ('group_size', 1, _AT_LEAST(2)),
    ('tasks_per_step', 0, _AT_LEAST(1)), ('max_redraws', -1, _AT_LEAST(0)), ('max_turns', 0, _AT_LEAST(1)),
    ('max_call_words', 1, _AT_LEAST(2)), ('max_call_words', 2.0, _INT), ('max_call_words', True, _INT),
    ('turn_cost', -1e-9, _AT_LEAST(0)), ('eval_every', -1, _AT_LEAST(0)), ('eval_group_size', 0, _AT_LEAST(1)),
] + [(name, value, _SEED if 'seed' in name else _INT)
     for name in ('seed', 'epochs', 'minibatches', 'group_size', 'tasks_per_step', 'max_redraws', 'max_turns',
                  'eval_every', 'eval_group_size', 'eval_seed')
     for value in (2.0, True)] + [
    (name, value, {'temperature': _TEMPERATURE, 'clip_low': _CLIP_LOW}.get(name, _FINITE if number else _NUMBER))
    for name in ('lr', 'temperature', 'kl_coef', 'clip_low', 'clip_high', 'max_grad_norm', 'turn_cost')
    for value, number in ((float('nan'), True), (float('inf'), True), (-float('inf'), True), (True, False),
                          ('1', False))]
_ALLOWED = [('lr', 1e-9), ('lr', 1), ('epochs', 1), ('minibatches', 1), ('temperature', 0.01), ('temperature', 100.0),
            ('seed', 0), ('seed', 2 ** 63 - 1), ('eval_seed', 2 ** 63 - 1), ('kl_coef', 0.0), ('kl_coef', 0),
            ('clip_low', 1e-9), ('clip_low', 1 - 1e-9), ('clip_high', 1e-9), ('clip_high', 5.0),
            ('max_grad_norm', 1e-9), ('group_size', 2), ('tasks_per_step', 1), ('max_redraws', 0), ('max_turns', 1),
            ('max_call_words', None), ('max_call_words', 2), ('turn_cost', 0.0), ('eval_every', 0),
            ('eval_group_size', 1), ('kl_kind', 'k1+'), ('kl_kind', 'k3+')]


@pytest.mark.parametrize('name, value, allowed', _REFUSED, ids=lambda x: repr(x))
def test_each_setting_just_past_its_range_is_refused_naming_the_field_the_range_and_the_value(name, value, allowed):
    with pytest.raises(ValueError) as raised:
        arl.RLConfig(**{name: value})
    [error] = raised.value.errors()  # this field's error alone
    assert (error['loc'], error['msg'], repr(error['input'])) == ((name,), f'Input should be {allowed}', repr(value))
    assert str(raised.value).startswith(f'1 validation error for RLConfig\n{name}\n  Input should be {allowed} [type=')


@pytest.mark.parametrize('name, value', _ALLOWED, ids=lambda x: repr(x))
def test_each_setting_at_its_boundary_is_accepted(name, value):
    assert getattr(arl.RLConfig(**{name: value}), name) == value


def test_an_unknown_kl_kind_is_refused_naming_the_field_and_the_valid_kinds():
    with pytest.raises(ValueError, match=r"^1 validation error for RLConfig\nkl_kind\n  Value error, unknown KL kind "
                                         r"'k4'; valid kinds: 'k1', 'k2', 'k3', 'k1\+', 'k3\+' \[type=value_error, "
                                         r"input_value='k4',"):
        arl.RLConfig(kl_kind='k4')



# ------------------------------------------------------------------------------------------- chapter 10's plug-ins

def _fake_batch():
    torch.manual_seed(0)
    ids = torch.tensor([[0, 2, 1, 3], [1, 1, 0, 2]])
    mask = torch.tensor([[0.0, 1.0, 1.0], [1.0, 1.0, 0.0]])
    sample_logp = torch.log(torch.rand(2, 3)) * mask
    return dict(ids=ids, action_mask=mask, sample_logp=sample_logp, rewards=torch.tensor([1.0, 0.0]))


_REF_LOGITS = torch.randn(2, 4, 5, generator=torch.Generator().manual_seed(1))


def _reference(tokens):  # a reference policy: fixed logits [B, T, V] whatever the tokens
    return _REF_LOGITS


def test_sequence_kl_sums_log_pi_old_minus_log_ref_over_policy_tokens_at_temperature_1_by_default():
    from agentrl.ch10.regularizers import sequence_kl

    batch = _fake_batch()
    ref = torch.log_softmax(_REF_LOGITS.double()[:, :-1], -1)
    expected = [sum(float(batch['sample_logp'][b, t]) - float(ref[b, t, batch['ids'][b, t + 1]])
                    for t in range(3) if batch['action_mask'][b, t]) for b in range(2)]
    assert torch.allclose(sequence_kl(batch, _reference).double(), torch.tensor(expected, dtype=torch.double),
                          atol=1e-5)
    hot = torch.log_softmax(_REF_LOGITS.double()[:, :-1] / 2.0, -1)  # at temperature 2 the reference is flatter
    expected_hot = [sum(float(batch['sample_logp'][b, t]) - float(hot[b, t, batch['ids'][b, t + 1]])
                        for t in range(3) if batch['action_mask'][b, t]) for b in range(2)]
    assert torch.allclose(sequence_kl(batch, _reference, 2.0).double(), torch.tensor(expected_hot, dtype=torch.double),
                          atol=1e-5)


def test_kl_in_reward_lowers_each_reward_by_coef_times_its_episodes_kl():
    from agentrl.ch10.regularizers import KLInReward, sequence_kl

    batch, record = _fake_batch(), {}
    term = KLInReward(_reference, 0.5)
    term.begin(None, arl.RLConfig())
    per_episode = sequence_kl(batch, _reference)
    term.shape_rewards(batch, record)
    assert torch.allclose(batch['rewards'], torch.tensor([1.0, 0.0]) - 0.5 * per_episode)
    assert record['kl_seq'] == pytest.approx(per_episode.mean().item())


def test_kl_in_reward_freezes_its_own_copy_of_the_starting_policy():
    from agentrl.ch10.regularizers import KLInReward

    model = torch.nn.Linear(3, 2)
    term = KLInReward(None, 0.1)
    term.begin(model, arl.RLConfig(temperature=2.0))
    before = [p.detach().clone() for p in term.reference.parameters()]
    with torch.no_grad():
        for p in model.parameters():
            p.add_(1.0)  # training moves the policy ...
    assert all(torch.equal(a, b) for a, b in zip(before, term.reference.parameters()))  # ... not the reference
    assert not term.reference.training and term.temperature == 2.0


@pytest.mark.parametrize('kwargs, kinds', [
    (dict(), []),  # no coefficient: the plain engine update
    (dict(entropy_coef=0.1), ['EntropyBonus']),
    (dict(ref_model='ref', kl_coef=0.2), ['ReferenceKL']),
    (dict(ref_model='ref'), []),  # a reference but kl_coef 0: no KL term
    (dict(kl_coef=0.2), []),  # a coefficient but no reference: no KL term
    (dict(entropy_coef=0.1, ref_model='ref', kl_coef=0.2), ['EntropyBonus', 'ReferenceKL']),
])
def test_regularized_update_plugs_in_exactly_the_terms_its_coefficients_ask_for(monkeypatch, kwargs, kinds):
    from agentrl.ch10 import regularizers

    calls = []
    monkeypatch.setattr(regularizers, 'rl_update', lambda *args, **kw: calls.append(kw['plugins']) or 'stats')
    kwargs = dict(kwargs)  # the parameters are shared by every run of the test in this process: leave them whole
    cfg = arl.RLConfig(kl_coef=kwargs.pop('kl_coef', 0.0))
    assert regularizers.regularized_update('model', 'optimizer', 'batch', 'advantages', cfg, **kwargs) == 'stats'
    (plugins,) = calls
    assert [type(p).__name__ for p in plugins] == kinds
    for p in plugins:
        assert p.coef == (0.1 if isinstance(p, regularizers.EntropyBonus) else 0.2)


# ------------------------------------------------------------------------------------------- GRPO engine

def test_zero_steps_is_a_run_that_trains_nothing_and_other_counts_are_refused():
    model = torch.nn.Linear(2, 2)
    before = [p.detach().clone() for p in model.parameters()]
    assert arl.train_rl(model, [], None, arl.RLConfig(eval_every=0), steps=0) == []
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))
    for steps in (2.5, True, -1, '3'):
        with pytest.raises(ValueError, match=rf'^steps must be an int >= 0, got {re.escape(repr(steps))}$'):
            arl.train_rl(model, [], None, arl.RLConfig(), steps=steps)


def test_the_reference_kl_freezes_its_own_copy_of_the_starting_policy():
    from agentrl.substrate.grpo import ReferenceKL

    model = torch.nn.Linear(3, 2)
    term = ReferenceKL(None, 0.1, 'k3')
    term.begin(model, arl.RLConfig())
    before = [p.detach().clone() for p in term.reference.parameters()]
    with torch.no_grad():
        for p in model.parameters():
            p.add_(1.0)
    assert all(torch.equal(a, b) for a, b in zip(before, term.reference.parameters())) and not term.reference.training


def test_a_step_without_update_logs_the_policy_token_entropy_at_the_sampling_temperature():
    from agentrl.substrate.grpo import skipped_update

    logits = torch.randn(2, 4, 5, generator=torch.Generator().manual_seed(3))
    batch = dict(ids=torch.zeros(2, 4, dtype=torch.long), action_mask=torch.tensor([[1.0, 0.0, 1.0], [0.0, 1.0, 1.0]]))
    p = torch.softmax(logits.double()[:, :-1] / 2.0, -1)
    entropy = -(p * p.log()).sum(-1)
    expected = float((entropy * batch['action_mask']).sum() / 4)
    stats = skipped_update(lambda ids, widths=None: logits, batch, arl.RLConfig(temperature=2.0))
    assert stats['grad_norm'] == 0.0 and stats['entropy'] == pytest.approx(expected, abs=1e-5)


def test_heldout_pass_at_1_samples_the_given_tasks_with_its_own_seeded_draws_and_averages_the_rewards(monkeypatch):
    from agentrl.substrate import grpo

    seen = {}

    def fake_sample_groups(model, env_factory, tasks, tok, cfg, generator):
        seen.update(tasks=tasks, group_size=cfg.group_size, seed=generator.initial_seed(), env=env_factory())
        return [_traj(0, r) for r in (1.0, 0.0, 0.0, 1.0, 1.0)]

    monkeypatch.setattr(grpo, 'sample_groups', fake_sample_groups)
    monkeypatch.setattr(grpo, 'make_env', lambda cfg: ('env for', cfg.max_turns, cfg.group_size))
    cfg = arl.RLConfig(eval_seed=7, eval_group_size=16, max_turns=3)
    assert grpo.heldout_pass_at_1(None, None, cfg, tasks=['a', 'b'], attempts=4, seed=11) == pytest.approx(3 / 5)
    assert seen == dict(tasks=['a', 'b'], group_size=4, seed=11, env=('env for', 3, 4))
    grpo.heldout_pass_at_1(None, None, cfg, tasks=['a'])  # the defaults: cfg's eval_group_size and eval_seed
    assert seen['group_size'] == 16 and seen['seed'] == 7



class _Bigram(torch.nn.Module):
    """A policy small enough for the engine's bookkeeping: next-token logits from the current token alone."""

    def __init__(self, seed=0):
        super().__init__()
        self.table = torch.nn.Embedding(5, 5)
        with torch.no_grad():
            self.table.weight.copy_(torch.randn(5, 5, generator=torch.Generator().manual_seed(seed)))

    def forward(self, ids, widths=None):  # a bigram reads no context: widths change nothing
        return self.table(ids)


_TOK = types.SimpleNamespace(pad_id=0)


def _episodes(rewards):
    """Two-episode groups with these rewards; the episodes' tokens differ, so a spread gives a gradient."""
    shapes = [(False, True, True, True), (False, True)]
    return [_traj(i // 2, float(r), policy=shapes[i % 2]) for i, r in enumerate(rewards)]


def _engine_batch():
    return arl.collate(_episodes([1, 0, 1, 0]), _TOK.pad_id)


@pytest.mark.parametrize('reference, kl_coef, kl_term', [
    (True, 0.1, True), (True, 0.0, False), (False, 0.1, False), (False, 0.0, False)])
def test_rl_update_adds_chapter_9s_kl_only_with_a_reference_and_a_coefficient(reference, kl_coef, kl_term):
    model, batch = _Bigram(), _engine_batch()
    cfg = arl.RLConfig(group_size=2, minibatches=1, kl_coef=kl_coef)
    stats = arl.rl_update(model, torch.optim.Adam(model.parameters(), lr=1e-2), batch,
                          arl.compute_advantages(batch, cfg), cfg, _Bigram(seed=1) if reference else None)
    assert ('kl_ref' in stats) == kl_term and stats['grad_norm'] > 0


def test_a_nan_loss_is_refused_before_any_weight_changes_saying_so():
    model, batch = _Bigram(), _engine_batch()
    with torch.no_grad():
        model.table.weight[0, 0] = float('nan')  # every episode starts with token 0
    before = model.table.weight.detach().clone()
    cfg = arl.RLConfig(group_size=2, minibatches=1)
    with pytest.raises(arl.NonFiniteLossError, match=r'^the loss is nan; the model was not updated$'):
        arl.rl_update(model, torch.optim.Adam(model.parameters(), lr=1e-2), batch, arl.compute_advantages(batch, cfg),
                      cfg)
    assert torch.equal(model.table.weight.nan_to_num(), before.nan_to_num())



class _InfiniteGradient(torch.autograd.Function):
    """The identity forward; backward sends an infinite gradient (a network whose loss is finite but whose
    gradient overflows)."""

    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        return grad * float('inf')


class _OverflowingBigram(_Bigram):
    def forward(self, ids, widths=None):
        return _InfiniteGradient.apply(self.table(ids))


def test_an_infinite_gradient_is_refused_before_any_weight_changes_saying_so():
    model, batch = _OverflowingBigram(), _engine_batch()
    before = model.table.weight.detach().clone()
    cfg = arl.RLConfig(group_size=2, minibatches=1)
    with pytest.raises(arl.NonFiniteLossError,
                       match=r'^the gradient norm is (inf|nan) \(the loss \S+ is finite\); the model was not updated$'):
        arl.rl_update(model, torch.optim.Adam(model.parameters(), lr=1e-2), batch, arl.compute_advantages(batch, cfg),
                      cfg)
    assert torch.equal(model.table.weight, before)

def _scripted_sampling(monkeypatch):
    """train_rl's sampling replaced by a script (a reward spread on even steps, none on odd ones) that draws from
    the run's generator as the real one does -> the list it fills, one dict per step."""
    from agentrl.substrate import grpo

    seen = []

    def sample_step(model, env_factory, tasks, tok, cfg, generator):
        env = env_factory()
        torch.rand(3, generator=generator)  # the draws a real step makes (task picks, tokens)
        sampled = _episodes([1, 0, 1, 0] if len(seen) % 2 == 0 else [1, 1, 0, 0])
        seen.append(dict(limits=(env.max_turns, env.max_call_words), sampled=sampled, state=generator.get_state()))
        return (sampled if len(seen) % 2 == 1 else []), sampled

    monkeypatch.setattr(grpo, 'sample_step', sample_step)
    return seen


_SCRIPTED = dict(group_size=2, tasks_per_step=2, eval_every=0, max_turns=2, max_call_words=3)


def test_each_step_is_logged_with_its_number_its_behaviour_and_whether_it_had_a_signal(monkeypatch):
    seen = _scripted_sampling(monkeypatch)
    history = arl.train_rl(_Bigram(), ['task'], _TOK, arl.RLConfig(**_SCRIPTED), steps=3)
    assert [r['step'] for r in history] == [0, 1, 2] and [r['signal'] for r in history] == [1.0, 0.0, 1.0]
    for record, step in zip(history, seen):
        assert record.items() >= arl.behavior_stats(step['sampled']).items()
        assert step['limits'] == (2, 3)  # the episodes' environments have the run's limits


class _Watcher(arl.Plugin):
    """Records what the engine hands its hooks."""

    def __init__(self):
        self.calls = []

    def before_update(self, model, batch, advantages, record):
        self.calls.append(('before', model, batch, advantages, record))

    def extend_loss(self, loss, rows, logits, logp, mask, stats):
        self.calls.append(('rows', rows.tolist()))
        return loss

    def after_update(self, model, record):
        self.calls.append(('after', model, record, sorted(record)))


def test_plugins_see_the_model_the_batch_its_advantages_and_the_steps_record(monkeypatch):
    seen = _scripted_sampling(monkeypatch)
    model, watcher, cfg = _Bigram(), _Watcher(), arl.RLConfig(**_SCRIPTED)
    history = arl.train_rl(model, ['task'], _TOK, cfg, steps=2, plugins=[watcher])
    before = [c for c in watcher.calls if c[0] == 'before']
    after = [c for c in watcher.calls if c[0] == 'after']
    for step, (_, m, batch, advantages, record) in enumerate(before):
        assert m is model and record is history[step]
        assert torch.equal(batch['ids'], arl.collate(seen[step]['sampled'], _TOK.pad_id)['ids'])
        assert torch.equal(advantages, arl.compute_advantages(batch, cfg))
    for step, (_, m, record, keys) in enumerate(after):
        assert m is model and record is history[step] and 'grad_norm' in keys  # the update's stats are in
    assert len(before) == len(after) == 2


def test_the_minibatch_order_is_drawn_from_the_runs_generator_after_the_steps_sampling(monkeypatch):
    # one stream for task draws, sampling and minibatch order: a run is reproduced from its seed alone
    seen = _scripted_sampling(monkeypatch)
    watcher = _Watcher()
    arl.train_rl(_Bigram(), ['task'], _TOK, arl.RLConfig(**_SCRIPTED), steps=1, plugins=[watcher])
    after_sampling = torch.Generator().set_state(seen[0]['state'])
    expected = [chunk.tolist() for chunk in torch.randperm(4, generator=after_sampling).chunk(2)]
    assert [c[1] for c in watcher.calls if c[0] == 'rows'] == expected


def test_the_optimizer_steps_at_the_configured_learning_rate(monkeypatch):
    # Adam's first step moves every weight with a gradient by lr (the gradient's sign times lr)
    _scripted_sampling(monkeypatch)
    model = _Bigram()
    start = copy.deepcopy(model)
    arl.train_rl(model, ['task'], _TOK, arl.RLConfig(lr=0.05, minibatches=1, **_SCRIPTED), steps=1)
    assert (model.table.weight - start.table.weight).abs().max().item() == pytest.approx(0.05, rel=1e-4)


def test_held_out_evaluation_follows_every_eval_every_steps_on_the_given_tasks(monkeypatch):
    from agentrl.substrate import grpo

    _scripted_sampling(monkeypatch)
    evaluated = []

    def heldout_pass_at_1(model, tok, cfg, tasks=None):
        evaluated.append((model, tasks))
        return len(evaluated) / 4

    monkeypatch.setattr(grpo, 'heldout_pass_at_1', heldout_pass_at_1)
    model, cfg = _Bigram(), arl.RLConfig(**dict(_SCRIPTED, eval_every=3))
    history = arl.train_rl(model, ['task'], _TOK, cfg, steps=6, eval_tasks=['held out'])
    assert [r.get('heldout_pass1') for r in history] == [None, None, 0.25, None, None, 0.5]  # after steps 3 and 6
    assert evaluated == [(model, ['held out'])] * 2


class _Terminal(io.StringIO):
    """A stderr that says it is a terminal, so progress() draws its bar into it."""

    def isatty(self):
        return True


def test_the_progress_bar_names_the_run(monkeypatch):
    _scripted_sampling(monkeypatch)
    for name in ('AGENTRL_PROGRESS', 'CI'):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delitem(sys.modules, 'ipykernel', raising=False)  # not a notebook's kernel here
    terminal = _Terminal()
    monkeypatch.setattr(sys, 'stderr', terminal)
    arl.train_rl(_Bigram(), ['task'], _TOK, arl.RLConfig(**_SCRIPTED), steps=1, label="run 'probe'")
    assert "run 'probe'" in terminal.getvalue()

@pytest.mark.parametrize('kwargs, match', [
    (dict(entropy_coef=-0.1), r'^entropy_coef must be a finite number >= 0, got -0\.1$'),
    (dict(entropy_coef=float('nan')), r'^entropy_coef must be a finite number >= 0, got nan$'),
    (dict(entropy_coef=float('inf')), r'^entropy_coef must be a finite number >= 0, got inf$'),
    (dict(kl_target=0.0, kl_coef=0.1), r'^kl_target=0\.0 needs kl_target > 0'),
    (dict(kl_target=-1.0, kl_coef=0.1), r'^kl_target=-1\.0 needs'),
    (dict(kl_target=float('nan'), kl_coef=0.1), r'^kl_target=nan needs'),
    (dict(kl_target=0.05), r'\(got kl_coef=0\.0, kl_in_reward=False\)$'),  # no KL to steer
    (dict(kl_target=0.05, kl_coef=0.1, kl_in_reward=True), r'kl_in_reward=True\)$'),  # the KL is in the reward
])
def test_chapter_plugins_refuse_each_impossible_setting_saying_why(kwargs, match):
    from agentrl.ch10.regularizers import chapter_plugins

    kwargs = dict(kwargs)  # the parameters are shared by every run of the test in this process: leave them whole
    cfg = arl.RLConfig(kl_coef=kwargs.pop('kl_coef', 0.0))
    with pytest.raises(ValueError, match=match):
        chapter_plugins(cfg, **kwargs)


def test_chapter_plugins_pass_the_reference_and_the_target_on():
    from agentrl.ch10 import regularizers

    (in_reward,) = regularizers.chapter_plugins(arl.RLConfig(kl_coef=0.2), kl_in_reward=True, ref_model='ref')
    assert isinstance(in_reward, regularizers.KLInReward) and in_reward.reference == 'ref' and in_reward.coef == 0.2
    kl, adaptive = regularizers.chapter_plugins(arl.RLConfig(kl_coef=0.2), ref_model='ref', kl_target=1e-9)
    assert kl.reference == 'ref' and adaptive.kl_term is kl and adaptive.target == 1e-9


def test_train_regularized_hands_the_chapters_choices_to_the_engine(monkeypatch):
    from agentrl.ch10 import regularizers

    calls = []
    monkeypatch.setattr(regularizers, 'train_rl', lambda *args, **kw: calls.append((args, kw)) or 'history')
    cfg = arl.RLConfig(kl_coef=0.2)
    assert regularizers.train_regularized('m', 'tasks', 'tok', cfg, 3, entropy_coef=0.1, ref_model='ref') == 'history'
    assert regularizers.train_regularized('m', 'tasks', 'tok', cfg, 3, kl_in_reward=True) == 'history'
    (args, kw), (_, kw2) = calls
    assert args == ('m', 'tasks', 'tok', cfg, 3) and set(kw) == {'plugins'}
    assert [type(p).__name__ for p in kw['plugins']] == ['EntropyBonus', 'ReferenceKL']
    assert kw['plugins'][1].reference == 'ref'
    assert [type(p).__name__ for p in kw2['plugins']] == ['KLInReward']


def test_chapter_plugins_orders_every_option_as_the_loss_adds_them():
    cfg = arl.RLConfig(kl_coef=0.2)
    chosen = arl.chapter_plugins(cfg, 0.1, False, 'ref', kl_target=0.05, policy_loss=dict(variant='kl_cov'))
    assert [type(p).__name__ for p in chosen] == ['CovariancePolicyLoss', 'EntropyBonus', 'ReferenceKL', 'AdaptiveKL']


@pytest.mark.parametrize('kwargs', [dict(fraction=1.0), dict(fraction=1e-9), dict(bounds=(2.0, 2.0 + 1e-9)),
                                    dict(kl_coef=0.0)])
def test_the_covariance_loss_accepts_the_ends_of_its_ranges(kwargs):
    from agentrl.ch10.regularizers import CovariancePolicyLoss

    term = CovariancePolicyLoss('kl_cov', **kwargs)
    assert all(getattr(term, k) == v for k, v in kwargs.items())


@pytest.mark.parametrize('kwargs,field', [(dict(fraction=0.0), 'cov_fraction'), (dict(bounds=(2.0, 2.0)), 'cov_bounds'),
                                          (dict(kl_coef=-1e-9), 'kl_cov_coef')])
def test_the_covariance_loss_refuses_what_lies_just_outside_them(kwargs, field):
    from agentrl.ch10.regularizers import CovariancePolicyLoss

    with pytest.raises(ValueError, match=f'^{field} must be'):
        CovariancePolicyLoss('kl_cov', **kwargs)


def test_the_covariance_loss_names_its_variants_and_defaults_to_the_papers_kl_cov_coefficient():
    from agentrl.ch10.regularizers import CovariancePolicyLoss

    with pytest.raises(ValueError, match=r"^policy-loss variant must be one of 'clip_cov', 'kl_cov', got 'x'$"):
        CovariancePolicyLoss('x')
    assert CovariancePolicyLoss('kl_cov').kl_coef == 1.0  # Cui et al.'s KL-Cov coefficient


def test_kl_cov_subtracts_coef_times_the_drift_from_the_sampling_policy_on_its_tokens():
    from agentrl.ch10.regularizers import CovariancePolicyLoss

    g = torch.Generator().manual_seed(5)
    logp, old_logp = -torch.rand(2, 3, generator=g), -torch.rand(2, 3, generator=g)
    surrogate, mask = torch.randn(2, 3, generator=g), torch.ones(2, 3)
    term = CovariancePolicyLoss('kl_cov', fraction=1.0, kl_coef=0.5)  # every policy token is penalised
    term.begin(None, arl.RLConfig())
    stats, advantages = {}, torch.tensor([1.0, -1.0])
    out = term.reshape_surrogate(surrogate, logp, old_logp, advantages, mask, stats)
    unclipped = torch.exp(logp - old_logp) * advantages[:, None]  # KL-Cov replaces the clipped surrogate
    assert torch.allclose(out, unclipped - 0.5 * (logp - old_logp).abs()) and stats['cov_selected_frac'] == 1.0


def test_the_entropy_bonus_logs_the_entropy_and_subtracts_coef_times_it():
    from agentrl.ch10.regularizers import EntropyBonus, entropy_bonus

    logits, mask, stats = torch.randn(2, 3, 5, generator=torch.Generator().manual_seed(2)), torch.ones(2, 3), {}
    loss = EntropyBonus(0.3).extend_loss(torch.tensor(1.0), None, logits, None, mask, stats)
    bonus = entropy_bonus(logits, mask)
    assert stats == dict(entropy=pytest.approx(bonus.item())) and torch.allclose(loss, 1.0 - 0.3 * bonus)
