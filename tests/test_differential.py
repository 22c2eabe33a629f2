"""The harness that runs the frameworks' functions beside ours (machinery/differential), on stand-in functions of
our own, and the committed records against the checks the code declares now. Runs without any framework installed."""
import json

import pytest
import torch

from agentrl.ch10 import framework_map
from agentrl.core.kl import kl_penalty
from machinery.differential import cases, compare, run
from machinery.differential.compare import Check, Differs


def _check(theirs, mine=lambda c: c['logp'] * 2, **extra):
    return Check('verl', ('x',), 'f', 'g', '', theirs=theirs, mine=mine, **extra)


def test_the_same_arithmetic_agrees_and_a_moved_gradient_does_not():
    same = compare.run_check(_check(lambda c: c['logp'] + c['logp']), 'ragged', 'reference')
    assert same['outcome'] == 'agrees' and same['value_gap'] == 0 and same['grad_gap'] == 0
    # equal values, but one side's gradient is held back on one token: the Jacobian-vector product shows it
    def held(c):
        out = c['logp'] * 2
        return out - (out[0, 0] - out[0, 0].detach()) * (torch.arange(out.numel()).view_as(out) == 0)
    moved = compare.run_check(_check(held), 'ragged', 'reference')
    assert moved['outcome'] == 'differs' and moved['value_gap'] == 0 and moved['grad_gap'] > 1


def test_a_difference_of_one_part_in_a_million_is_the_tolerance():
    near = compare.run_check(_check(lambda c: c['logp'] * 2 * (1 + 5e-7)), 'ragged', 'reference')
    far = compare.run_check(_check(lambda c: c['logp'] * 2 * (1 + 5e-6)), 'ragged', 'reference')
    assert near['outcome'] == 'agrees' and far['outcome'] == 'differs'


def test_a_float32_function_is_judged_at_float32s_scale_and_only_when_it_says_so():
    # k3 of log-probabilities cast to float32, as OpenRLHF computes it: near zero, float32's rounding is large
    rounded = lambda c: kl_penalty(c['logp'].float(), c['ref_logp'].float(), 'k3').double()  # noqa: E731
    ours = lambda c: kl_penalty(c['logp'], c['ref_logp'], 'k3')  # noqa: E731
    assert compare.run_check(_check(rounded, ours), 'long', 'reference')['outcome'] == 'differs'
    assert compare.run_check(_check(rounded, ours, precision='float32'), 'long', 'reference')['outcome'] == 'agrees'
    shifted = lambda c: kl_penalty(c['logp'], c['ref_logp'] + 1e-3, 'k3')  # noqa: E731
    assert compare.run_check(_check(shifted, ours, precision='float32'), 'long', 'reference')['outcome'] == 'differs'
    with pytest.raises(ValueError, match="unknown precision 'float16'"):
        _check(rounded, precision='float16')


def test_a_raise_is_recorded_and_never_counts_as_agreement():
    def absent(c):
        raise TypeError('no such argument')
    result = compare.run_check(_check(absent), 'ragged', 'reference')
    assert result['outcome'] == 'raised' and 'no such argument' in result['error']
    assert not compare.as_expected(result)
    declared = _check(absent, differs=(Differs('not in this release', sets=('reference',)),))
    assert compare.as_expected(compare.run_check(declared, 'ragged', 'reference'))
    assert not compare.as_expected(compare.run_check(declared, 'ragged', 'latest'))


def test_a_declared_difference_holds_only_on_its_cases_and_sets():
    check = _check(lambda c: c['logp'] * 2, differs=(Differs('why', cases=('far ratios',), sets=('latest',)),))
    assert check.expected_difference('latest', 'far ratios') == 'why'
    assert check.expected_difference('reference', 'far ratios') == ''
    assert check.expected_difference('latest', 'ragged') == ''
    # declared but not seen: not as declared
    assert not compare.as_expected(compare.run_check(check, 'far ratios', 'latest'))
    # a condition on the tensors: expected only on a case that meets it
    conditional = _check(lambda c: c['logp'] * 2, differs=(Differs('far', when=lambda c: c['mask'].shape[1] > 100),))
    assert conditional.expected_difference('reference', 'long', cases.make('long')) == 'far'
    assert conditional.expected_difference('reference', 'ragged', cases.make('ragged')) == ''


def test_the_cases_reach_the_edges_the_frameworks_clamp_and_divide_at():
    with pytest.raises(ValueError, match="unknown case 'wide'"):
        cases.make('wide')
    empty = cases.make('empty row')
    assert (empty['mask'].sum(-1) == 0).any()
    far = cases.make('far ratios')
    log_ratio = far['ref_logp'] - far['logp']
    assert log_ratio.max() > 20 and log_ratio.min() < -20  # beyond verl's ±20
    assert ((far['logp'] - far['old_logp']).sum(-1) / far['mask'].sum(-1)).max() > 10  # past GSPO's clamp at 10
    assert cases.make('single token')['mask'].shape == (4, 1) and cases.make('long')['mask'].shape[1] == 512
    assert all(cases.make('ragged')[leaf].requires_grad for leaf in cases.LEAVES)
    assert torch.equal(cases.make('ragged')['logp'], cases.make('ragged')['logp'])  # the same tensors every time



@pytest.mark.parametrize('set_name', run.SETS)
def test_each_committed_record_holds_the_checks_the_code_declares_now(set_name):
    path = run.RECORDS / f'{set_name}.json'
    record = json.loads(path.read_text())
    names = record['frameworks']
    declared = []
    for name in names:
        declared += [(c.framework, c.function, c.setting, list(c.options), c.stand_in, c.precision,
                      [(case, c.expected_difference(set_name, case, cases.make(case))) for case in c.cases])
                     for c in run.checks_of(name)]
    recorded = [(c['framework'], c['function'], c['setting'], c['options'], c['stand_in'], c['precision'],
                 [(r['case'], r['expected']) for r in c['results']]) for c in record['checks']]
    assert recorded == declared, f'{path} is older than the checks: run make frameworks-test'
    assert all(c['as_expected'] for c in record['checks'])


def test_every_option_a_check_names_is_in_the_map():
    known = {(f['framework']['name'], o['name']) for f in framework_map.load_frameworks() for o in f['options']}
    for name in run.MODULES:
        for check in run.checks_of(name):
            missing = [o for o in check.options if (name, o) not in known]
            assert not missing, f'{check.name} names options the map does not have: {missing}'
