"""Reading the records of the frameworks' functions executed beside ours (agentrl/ch10/framework_executed.py),
on made-up records, and on the committed ones for what notebook 12 prints first."""
import json
import math

import pytest

from agentrl.ch10 import framework_executed as fe, framework_map


def result(case, outcome, expected=''):
    return dict(case=case, outcome=outcome, expected=expected)


def check(framework='verl', function='f', setting='', options=('opt',), version='1', results=()):
    return dict(framework=framework, function=function, setting=setting, options=list(options), version=version,
                results=list(results))


def test_a_check_agrees_differs_as_declared_or_not():
    assert fe.check_outcome(check(results=[result('a', 'agrees'), result('b', 'agrees')])) == 'agrees'
    assert fe.check_outcome(check(results=[result('a', 'agrees'), result('b', 'differs', 'clamp')])) == \
        'differs as declared'
    assert fe.check_outcome(check(results=[result('a', 'differs'), result('b', 'differs', 'clamp')])) == \
        'not as declared'  # a difference nobody named
    assert fe.check_outcome(check(results=[result('a', 'agrees', 'clamp')])) == 'not as declared'  # named, not seen


def frameworks():
    options = [dict(name='opt', ours='agentrl.x.f', not_run=''), dict(name='other', ours='agentrl.x.g',
                                                                      not_run='needs a GPU'),
               dict(name='plain', ours='')]
    return [dict(framework=dict(name='verl'), options=options)]


def records(latest_results):
    reference = dict(set='reference', versions={'verl': '0.8.0'}, checks=[
        check(version='0.8.0', results=[result('a', 'agrees'), result('b', 'differs', 'clamp')])])
    latest = dict(set='latest', versions={'verl': '0.9.1'}, checks=[check(version='0.9.1', results=latest_results)])
    return dict(reference=reference, latest=latest)


def test_options_with_a_function_of_ours_are_executed_or_say_why_not():
    rows = fe.option_status(frameworks(), records([]))
    assert [(r['option'], r['status']) for r in rows] == [('opt', 'differs as declared'), ('other', 'not run')]
    assert rows[0]['reasons'] == ['clamp'] and rows[1]['not_run'] == 'needs a GPU'


def test_drift_names_what_appeared_and_what_went_between_the_releases():
    same = fe.drift_rows(records([result('a', 'agrees'), result('b', 'differs', 'clamp')]))
    assert same[0]['change'] == '' and 'compute what the map says in both' in fe.drift_table(same)
    moved = fe.drift_rows(records([result('a', 'differs', 'new divisor'), result('b', 'agrees')]))
    assert moved[0]['change'] == 'now: new divisor; no longer: clamp'
    assert moved[0]['before'] == 'differs as declared' and moved[0]['after'] == 'differs as declared'
    extended = fe.drift_rows(records([result('a', 'agrees'), result('b', 'differs', 'clamp, and a second')]))
    assert extended[0]['change'] == 'now: clamp, and a second'  # the clamp did not go: a longer reason extends it
    table = fe.drift_table(moved)
    assert '| verl | `opt` | 0.8.0 → 0.9.1 |' in table and '0 of the 1 options' in table


def test_a_function_that_raised_everywhere_is_absent_in_that_release():
    rows = fe.drift_rows(dict(
        reference=dict(set='reference', checks=[check(version='0.8', results=[result('a', 'raised', 'no mode')])]),
        latest=dict(set='latest', checks=[check(version='0.9', results=[result('a', 'agrees')])])))
    assert (rows[0]['before'], rows[0]['after']) == ('absent', 'agrees')


def test_a_record_that_is_not_one_is_refused_by_name(tmp_path):
    (tmp_path / 'reference.json').write_text('{"set": "latest", "checks": []}')
    with pytest.raises(ValueError, match="not the record of the 'reference' set"):
        fe.load_records(tmp_path)
    (tmp_path / 'reference.json').write_text('{')
    with pytest.raises(ValueError, match='not valid JSON'):
        fe.load_records(tmp_path)
    assert fe.load_records(tmp_path / 'none') == {}


def test_the_opening_counts_the_committed_records():
    found = fe.load_records()
    rows = fe.option_status(framework_map.load_frameworks(), found)
    text = fe.opening(framework_map.load_frameworks(), found)
    executed = sum(r['status'] != 'not run' for r in rows)
    assert f'Of the {len(rows)} entries' in text and f'{executed} were executed' in text
    assert 'depart from what was declared' not in text  # every committed check came out as declared
    assert all(r['not_run'] for r in rows if r['status'] == 'not run'), 'an option not run must say why'


def test_an_unclamped_k3_mean_is_the_kl_and_the_cap_of_ten_lowers_it():
    from agentrl.ch10 import framework_options as fo
    import torch
    logp = torch.tensor([0.9, 0.1 - 1e-3, 1e-3], dtype=torch.float64).log()
    ref = torch.tensor([0.3, 0.2, 0.5], dtype=torch.float64).log()
    assert fo.clamped_k3_mean(logp, ref) == pytest.approx(fo.categorical_kl(logp, ref), rel=1e-12)
    # the third outcome has ref / pi = 500: k3 there is about 493, capped at 10
    capped = fo.clamped_k3_mean(logp, ref, value=(-10.0, 10.0))
    assert capped == pytest.approx(fo.categorical_kl(logp, ref) - 1e-3 * (499 - 500 ** 0 - math.log(500) - 9),
                                   rel=1e-9)
    l = fo.k3_reaches(10)
    assert math.expm1(l) - l == pytest.approx(10, abs=1e-9)
    rows = fo.clamp_bias_table()
    assert rows[0]['kl'] == 0 and all(b == 0 for b in rows[0]['bias'].values())
    assert min(rows[-1]['bias'].values()) < -0.1  # far apart, the cap binds
    assert 'same bias in every row' in fe.clamp_reading(rows)


def test_an_executed_entry_says_how_its_checks_came_out():
    rows = [dict(framework='verl', option='opt', status='differs as declared', checks=2,
                 reasons=['clamp', 'clamp', 'cl']),  # repeated, and a reason another extends: said once
            dict(framework='verl', option='other', status='not run', checks=0, reasons=[])]
    said = fe.entry_sentences(rows, dict(reference=dict(versions={'verl': '0.8.0'})))
    assert said == {('verl', 'opt'): '2 checks on verl 0.8.0: differs as declared: clamp.'}
