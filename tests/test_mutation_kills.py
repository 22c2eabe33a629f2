"""Behavioural tests added to kill the mutants `make mutation` found surviving (issue 19, point 1).

Each checks what a mechanism must do, against an independent computation or a stated rule, and fails when the line
doing it is broken.
"""
import ast
import math
import os
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


def test_loading_a_cache_file_never_runs_code_from_it(tmp_path):
    # torch.load(weights_only=True): a pickle that calls a function is refused, not executed
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
    with pytest.raises(ValueError, match='at least one trajectory'):
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
        environ.pop('MUTANT_UNDER_TEST', None)  # set by agentrl/build/mutation_plugin.py in a mutation run only
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
