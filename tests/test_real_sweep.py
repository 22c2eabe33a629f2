"""The real-model sweep's bookkeeping, with the training stubbed: what it runs, skips, keeps and throws away."""
import json
from types import SimpleNamespace

from agentrl.realrl import runs
from machinery import real_sweep

PRETRAINED = SimpleNamespace(model=SimpleNamespace(config=SimpleNamespace(vocab_size=49152)))


def fake_runs(monkeypatch):
    trained = []

    def ensure_run(spec, pretrained=None, watch=None):
        trained.append((spec.name, spec.seed, spec.steps, spec.reset_at))
        return dict(history=[dict(step=0)], evaluation=dict(pass_at_k=[0.5] * 32), seconds=1.0, peak_rss_mb=1024.0)

    monkeypatch.setattr(runs, 'ensure_run', ensure_run)
    return trained


def test_each_run_is_written_once_and_a_second_call_skips_it(tmp_path, monkeypatch):
    trained = fake_runs(monkeypatch)
    path = tmp_path / 'real_sweep.json'
    real_sweep.sweep(['none', 'KL k3 0.3, reset at half'], [0, 1], base=True, path=path, say=lambda _: None,
                     pretrained=PRETRAINED)
    assert trained == [('base', 0, 0, None), ('none', 0, runs.SWEEP_STEPS, None),
                       ('KL k3 0.3, reset at half', 0, runs.SWEEP_STEPS, runs.SWEEP_STEPS // 2),
                       ('none', 1, runs.SWEEP_STEPS, None),
                       ('KL k3 0.3, reset at half', 1, runs.SWEEP_STEPS, runs.SWEEP_STEPS // 2)]
    record = json.loads(path.read_text())
    assert set(record['runs']) == {'0', '1'} and record['runs']['0']['none']['vocab_size'] == 49152
    real_sweep.sweep(['none', 'KL-Cov'], [0], base=True, path=path, say=lambda _: None, pretrained=PRETRAINED)
    assert trained[5:] == [('KL-Cov', 0, runs.SWEEP_STEPS, None)]  # the base and 'none' were recorded already
    assert len(json.loads(path.read_text())['sessions']) == 2


def test_a_record_of_other_code_is_started_afresh(tmp_path, monkeypatch):
    fake_runs(monkeypatch)
    path = tmp_path / 'real_sweep.json'
    path.write_text(json.dumps(dict(code='older code', level=runs.SWEEP_LEVEL, steps=runs.SWEEP_STEPS,
                                    runs={'0': {'none': {}}}, base=None, sessions=[{}])))
    said = []
    record = real_sweep.sweep(['KL-Cov'], [0], path=path, say=said.append, pretrained=PRETRAINED)
    assert record['code'] == runs.real_code_fingerprint() and list(record['runs']['0']) == ['KL-Cov']
    assert 'starting it afresh' in said[0]
