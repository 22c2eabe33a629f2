"""The sweep records notebooks 11 and 12 render are made by this tree's training code: a record from older code is an
error, since its verdicts may not be what today's code gives (they moved before, unnoticed)."""
from agentrl.calibration.substrates import load_record
from agentrl.ch10 import framework_claims
from agentrl.fingerprint import code_fingerprint, made_by
from machinery import certify, substrate_sweep


def test_every_part_of_the_substrate_sweep_comes_from_this_trees_training_code():
    record = load_record()
    assert record['substrates'], 'the substrate sweep record holds no substrate: run make substrate-sweep'
    stale = substrate_sweep.stale_parts(record, code_fingerprint())
    assert not stale, ('results/substrate_sweep.json holds parts made by other training code than this tree\'s: '
                       + ', '.join(f'{name} ({code[:12]})' for name, code in stale)
                       + f'; this tree is {code_fingerprint()[:12]}: run make substrate-sweep '
                       f'SWEEP_ARGS="--substrates {" ".join(name for name, _ in stale)}"')


def test_the_framework_sweep_comes_from_this_trees_training_code():
    record = framework_claims.load_record()
    assert made_by(record, code_fingerprint()), (
        f'results/framework_sweep.json was made by training code {record["code"][:12]}, this tree is '
        f'{code_fingerprint()[:12]}: run make framework-sweep')


def _entry(code):
    return dict(code=code, runs={}, seeds=[0])


def test_a_part_swept_by_new_code_retires_every_part_made_by_older_code():
    record = dict(substrates={'t45': _entry('new'), 't74': _entry('old'), 'long': _entry('older')},
                  sessions=[dict(code='old'), dict(code='new'), dict(date='before sessions named their code')])
    kept, dropped = substrate_sweep.keep_current(record, 'new')
    assert dropped == ['long', 't74']
    assert list(kept['substrates']) == ['t45'] and kept['sessions'] == [dict(code='new')]
    assert record['substrates'].keys() == {'t45', 't74', 'long'}, 'the record passed in is left as it was'
    assert substrate_sweep.stale_parts(kept, 'new') == []
    assert substrate_sweep.stale_parts(record, 'new') == [('t74', 'old'), ('long', 'older')]


def test_a_part_certified_for_new_code_stands_for_it_and_is_kept():
    certified = dict(_entry('old'), certified=[dict(code='new')])
    record = dict(substrates={'t45': certified, 't74': _entry('old')}, sessions=[dict(code='old')])
    assert substrate_sweep.stale_parts(record, 'new') == [('t74', 'old')]
    kept, dropped = substrate_sweep.keep_current(record, 'new')
    assert dropped == ['t74'] and list(kept['substrates']) == ['t45'] and kept['sessions'] == [dict(code='old')]
    assert made_by(certified, 'new') and made_by(certified, 'old') and not made_by(certified, 'newer')


def test_certification_compares_every_recorded_number_but_not_the_cache_key():
    recorded = {'0': {'none': dict(history=[dict(entropy=0.5)], run='key-old')}}
    same = {'0': {'none': dict(history=[dict(entropy=0.5)], run='key-new')}}
    moved = {'0': {'none': dict(history=[dict(entropy=0.5000000000000001)], run='key-new')}}
    assert certify.differences(recorded, same, 't45') == []
    assert certify.differences(recorded, moved, 't45') == [('t45', '0', 'none', 'differs from the record')]
    assert certify.differences(recorded, {'1': {'none': {}}}, 't45') == [('t45', '1', 'none', 'not in the record')]
