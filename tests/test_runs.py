"""Saved runs: bit-identical to a fresh in-process run, keyed by what produced them, rebuilt when corrupt."""
import dataclasses
import warnings

import pytest
import torch

from agentrl.ch10 import experiments

pytestmark = pytest.mark.slow  # trains real runs on the full RL base


@pytest.fixture()
def tmp_cache(tmp_path, monkeypatch):
    """A private, empty run cache, inherited by worker processes (the RL base cache is left where it is)."""
    monkeypatch.setenv('AGENTRL_RUNS_DIR', str(tmp_path / 'runs'))
    return tmp_path / 'runs'


def tiny(name='tiny', **fields):
    """A 2-step run spec, cheap enough for tests."""
    return experiments.arm(name, fields, steps=2)


def test_parallel_runs_equal_sequential_ones(tmp_cache, monkeypatch):
    specs = [tiny('a'), tiny('b', kl_coef=0.3, kl_kind='k3+')]
    train_here = experiments.train_and_evaluate
    monkeypatch.setattr(experiments, 'train_and_evaluate', lambda spec: pytest.fail('trained in the main process'))
    parallel = experiments.run_all(specs, processes=2)  # trained in two worker processes, loaded here
    monkeypatch.setattr(experiments, 'train_and_evaluate', train_here)
    assert sorted(p.name for p in tmp_cache.iterdir()) == sorted(experiments.run_path(s).name for s in specs)
    for spec in specs:
        sequential = experiments.train_and_evaluate(spec)  # trained again, here
        assert sequential['history'] == parallel[spec.name]['history']
        assert sequential['metrics'] == parallel[spec.name]['metrics']
        for key, tensor in sequential['state_dict'].items():
            assert torch.equal(tensor, parallel[spec.name]['state_dict'][key]), key


def test_a_saved_run_is_loaded_not_retrained(tmp_cache, monkeypatch):
    spec = tiny()
    first = experiments.ensure_run(spec)
    assert first['settings'] == dataclasses.asdict(spec.config())  # the values it ran with, the substrate's included
    monkeypatch.setattr(experiments, 'train_and_evaluate', lambda spec: pytest.fail('retrained a saved run'))
    assert experiments.ensure_run(spec)['history'] == first['history']


def test_the_file_name_changes_with_what_produced_the_run(tmp_cache, monkeypatch):
    spec = tiny()
    path = experiments.run_path(spec)
    assert experiments.run_path(tiny(kl_coef=0.1)) != path
    assert experiments.run_path(experiments.arm('tiny', steps=3)) != path
    monkeypatch.setattr(experiments, 'code_fingerprint', lambda: 'another version of the code')
    assert experiments.run_path(spec) != path


def test_a_corrupt_run_file_is_rebuilt_with_a_warning(tmp_cache):
    spec = tiny()
    good = experiments.ensure_run(spec)
    path = experiments.run_path(spec)
    path.write_bytes(b'not a torch file')
    with pytest.warns(UserWarning, match='will be recomputed'):
        rebuilt = experiments.ensure_run(spec)
    assert rebuilt['history'] == good['history']
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        experiments.ensure_run(spec)  # the rebuilt file is now trusted again


def test_a_run_file_with_other_provenance_is_not_trusted(tmp_cache):
    spec = tiny()
    run = experiments.ensure_run(spec)
    path = experiments.run_path(spec)
    run['provenance'] = {**run['provenance'], 'spec': 'something else'}
    torch.save(run, path)
    with pytest.warns(UserWarning, match='provenance does not match'):
        experiments.ensure_run(spec)


def test_bad_specs_are_rejected_with_the_field_named():
    with pytest.raises(ValueError, match='reference'):
        experiments.RunSpec('x', reference='yesterday')
    with pytest.raises(ValueError, match='steps'):
        experiments.RunSpec('x', steps=0)
    with pytest.raises(ValueError, match='kl_kind'):
        experiments.arm('x', dict(kl_kind='k9'))
    with pytest.raises(ValueError, match='unique'):
        experiments.run_all([tiny('same'), tiny('same')])


def test_probes_and_their_evaluations_do_not_touch_the_training_streams():
    plain = experiments.train_and_evaluate(tiny())
    probed = experiments.train_and_evaluate(experiments.arm('tiny', steps=2, probes=('heldout:1', 'covariance')))
    for key, tensor in plain['state_dict'].items():
        assert torch.equal(tensor, probed['state_dict'][key]), key
    assert all({'probe_pass1', 'covariance', 'entropy_change'} <= set(h) for h in probed['history'])
    with pytest.raises(ValueError, match='probes'):
        experiments.arm('x', probes=('heldout:0',))


def test_the_adaptive_controller_follows_its_formula():
    run = experiments.train_and_evaluate(experiments.arm('adaptive', dict(kl_coef=0.3, kl_kind='k3+'), steps=3,
                                                         kl_target=0.01))
    betas = [h['kl_coef'] for h in run['history']]
    assert betas[0] == 0.3
    for h, beta_next in zip(run['history'], betas[1:]):
        error = min(max(h['kl_ref'] / 0.01 - 1, -0.2), 0.2)
        assert beta_next == pytest.approx(h['kl_coef'] * (1 + error / 10), rel=1e-12)


def test_each_trained_run_says_how_long_it_took_where_asked_and_a_loaded_one_says_nothing(tmp_cache, tmp_path,
                                                                                         monkeypatch):
    import json

    log = tmp_path / 'times.jsonl'
    monkeypatch.setenv('AGENTRL_RUN_TIMES', str(log))
    specs = [tiny('a'), tiny('b', kl_coef=0.3, kl_kind='k3+')]
    experiments.run_all(specs, processes=1)
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert [line['name'] for line in lines] == ['a', 'b'] and {line['workers'] for line in lines} == {1}
    assert len({line['batch'] for line in lines}) == 1 and all(line['seconds'] > 0 for line in lines)
    experiments.run_all(specs, processes=1)  # both loaded from the run cache: nothing trained, nothing timed
    assert len(log.read_text().splitlines()) == 2
