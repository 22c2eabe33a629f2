"""The real-model sweep: what it runs, skips, keeps and throws away (training stubbed), and a small sweep on a Dask
cluster that loses a worker mid-run."""
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from types import SimpleNamespace

import pytest

from agentrl import executors
from agentrl.paths import REPO
from agentrl.realrl import runs
from machinery import real_sweep

PRETRAINED = SimpleNamespace(model=SimpleNamespace(config=SimpleNamespace(vocab_size=49152)))


def fake_runs(monkeypatch, tmp_path, cached=()):
    """Training stubbed, the run cache in tmp_path: -> the list of (name, seed, steps, reset_at) trained."""
    monkeypatch.setenv('AGENTRL_CACHE_DIR', str(tmp_path / 'cache'))
    trained = []

    def train_and_evaluate(spec, pretrained=None, watch=None):
        trained.append((spec.name, spec.seed, spec.steps, spec.reset_at))
        return dict(history=[dict(step=0)], evaluation=dict(pass_at_k=[0.5] * 32), seconds=1.0, peak_rss_mb=1024.0)

    def load_run(spec):
        return dict(history=[], evaluation=dict(pass_at_k=[1.0] * 32), seconds=2.0, peak_rss_mb=1.0) \
            if (spec.name, spec.seed) in cached else None

    monkeypatch.setattr(runs, 'train_and_evaluate', train_and_evaluate)
    monkeypatch.setattr(runs, 'load_run', load_run)
    monkeypatch.setattr(real_sweep, 'pretrained_for', lambda model: PRETRAINED)
    return trained


def test_each_run_is_written_once_and_a_second_call_skips_it(tmp_path, monkeypatch):
    trained = fake_runs(monkeypatch, tmp_path)
    path = tmp_path / 'real_sweep.json'
    real_sweep.sweep(['none', 'KL k3 0.3, reset at half'], [0, 1], base=True, path=path, say=lambda _: None)
    assert trained == [('base', 0, 0, None), ('none', 0, runs.SWEEP_STEPS, None),
                       ('KL k3 0.3, reset at half', 0, runs.SWEEP_STEPS, runs.SWEEP_STEPS // 2),
                       ('none', 1, runs.SWEEP_STEPS, None),
                       ('KL k3 0.3, reset at half', 1, runs.SWEEP_STEPS, runs.SWEEP_STEPS // 2)]
    record = json.loads(path.read_text())
    assert set(record['runs']) == {'0', '1'} and record['runs']['0']['none']['vocab_size'] == 49152
    real_sweep.sweep(['none', 'KL-Cov'], [0], base=True, path=path, say=lambda _: None)
    assert trained[5:] == [('KL-Cov', 0, runs.SWEEP_STEPS, None)]  # the base and 'none' were recorded already
    assert len(json.loads(path.read_text())['sessions']) == 2


def test_a_check_trains_the_run_again_and_names_the_first_difference(tmp_path, monkeypatch):
    fake_runs(monkeypatch, tmp_path)

    def train_and_evaluate(spec, pretrained=None, watch=None):  # a run that depends on its seed, seen step by step
        history = []
        for step in range(3):
            history.append(dict(step=step, entropy=0.5 / (step + 1 + spec.seed)))
            if watch is not None:
                watch(step, history[-1], None, None)
        return dict(history=history, evaluation=dict(pass_at_k=[0.25 * (1 + spec.seed)] * 32), seconds=1.0,
                    peak_rss_mb=1.0)

    monkeypatch.setattr(runs, 'train_and_evaluate', train_and_evaluate)
    path = tmp_path / 'real_sweep.json'
    real_sweep.sweep(['none', 'KL-Cov'], [0, 1], path=path, say=lambda _: None)
    said = []
    assert real_sweep.check(['KL-Cov'], [1], path, said.append) == 0
    assert said[-1].startswith('KL-Cov, seed 1: equal to the record bit for bit (all 3 steps and the held-out evaluation)')
    assert real_sweep.check(['none'], [0], path, said.append, steps=2) == 0 and '(its first 2 steps)' in said[-1]
    record = json.loads(path.read_text())
    record['runs']['1']['KL-Cov']['history'][2]['entropy'] += 1e-12  # one step, one number, a last bit or so
    path.write_text(json.dumps(record))
    assert real_sweep.check(['KL-Cov', 'none'], [1], path, said.append) == 1
    assert 'differs from the record' in said[-2] and 'first at step 2, `entropy`' in said[-2]
    assert real_sweep.check(['KL-Cov'], [1], path, said.append, steps=2) == 0  # the difference is past step 2
    record['runs']['1']['KL-Cov']['history'][2]['entropy'] -= 1e-12
    record['runs']['0']['none']['evaluation']['pass_at_k'][31] = 0.0
    path.write_text(json.dumps(record))
    assert real_sweep.check(['none'], [0], path, said.append) == 1 and said[-1].endswith('the held-out evaluation is not')
    assert real_sweep.check(['Clip-Cov'], [0], path, said.append) == 1 and 'not in the record' in said[-1]
    path.write_text(json.dumps(dict(record, code='older code')))
    with pytest.raises(ValueError, match='other real-model code'):
        real_sweep.check(['none'], [0], path, said.append)


def test_a_record_of_other_code_is_started_afresh(tmp_path, monkeypatch):
    fake_runs(monkeypatch, tmp_path)
    path = tmp_path / 'real_sweep.json'
    path.write_text(json.dumps(dict(code='older code', level=runs.SWEEP_LEVEL, steps=runs.SWEEP_STEPS,
                                    runs={'0': {'none': {}}}, base=None, sessions=[{}])))
    said = []
    record = real_sweep.sweep(['KL-Cov'], [0], path=path, say=said.append)
    assert record['code'] == runs.real_code_fingerprint() and list(record['runs']['0']) == ['KL-Cov']
    assert 'starting it afresh' in said[0]


def test_a_run_in_the_run_cache_is_recorded_without_training(tmp_path, monkeypatch):
    trained = fake_runs(monkeypatch, tmp_path, cached={('none', 0)})
    record = real_sweep.sweep(['none', 'KL k3 1.0'], [0], path=tmp_path / 'real_sweep.json', say=lambda _: None)
    assert trained == [('KL k3 1.0', 0, runs.SWEEP_STEPS, None)]
    assert record['runs']['0']['none']['evaluation']['pass_at_k'][0] == 1.0  # the cached run's, not a new one


def test_a_run_trained_under_another_provenance_is_refused(tmp_path, monkeypatch):
    fake_runs(monkeypatch, tmp_path)
    monkeypatch.setattr(real_sweep, 'train_job', lambda name, description, model: dict(
        provenance=dict(code='a worker with other code'), run={}, vocab_size=1))
    with pytest.raises(RuntimeError, match='under another provenance'):
        real_sweep.sweep(['none'], [0], path=tmp_path / 'real_sweep.json', say=lambda _: None)
    assert not (tmp_path / 'cache').exists() or not any((tmp_path / 'cache').rglob('real-*.pt'))


# The Dask sweep with a worker killed mid-run: a scheduler and two single-threaded worker processes (no nanny, so a
# killed worker stays dead) on the loopback, training a tiny random Llama with SmolLM2's tokenizer for one step on
# one-digit sums (replies of 12 tokens: sampling over 49,152 tokens is most of a job's time).
SMALL = dict(settings=['none'], seeds=[0, 1, 2], steps=1, level='add1')


@pytest.fixture(scope='module')
def tokenizer_folder(tmp_path_factory):
    """SmolLM2's tokenizer saved as JSON: a worker reads it in a second, the GGUF file's copy in about fifteen."""
    from transformers import AutoTokenizer

    from agentrl.pretrained.loader import checked_gguf

    gguf = checked_gguf()
    folder = tmp_path_factory.mktemp('tokenizer')
    AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name, local_files_only=True).save_pretrained(folder)
    return str(folder)


def free_port():
    with socket.socket() as probe:
        probe.bind(('127.0.0.1', 0))
        return probe.getsockname()[1]


@contextlib.contextmanager
def loopback_cluster(workers):
    """A Dask scheduler and `workers` worker processes over TCP on 127.0.0.1 -> the scheduler's address."""
    address = f'tcp://127.0.0.1:{free_port()}'
    dask = [sys.executable, '-m', 'distributed.cli.dask_{}']
    env = dict(os.environ, PYTHONPATH=str(REPO))
    quiet = dict(cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    started = [subprocess.Popen([dask[0], dask[1], dask[2].format('scheduler'), '--host', '127.0.0.1', '--port',
                                 address.rsplit(':', 1)[1], '--no-dashboard'], **quiet)]
    try:
        for _ in range(workers):
            started.append(subprocess.Popen([dask[0], dask[1], dask[2].format('worker'), address, '--nthreads', '1',
                                             '--no-nanny', '--no-dashboard', '--host', '127.0.0.1'], **quiet))
        yield address
    finally:
        for process in started:
            process.kill()
            process.wait()


@pytest.mark.slow
def test_a_sweep_on_dask_survives_a_worker_killed_mid_run(tmp_path, monkeypatch, tokenizer_folder):
    monkeypatch.setenv('AGENTRL_CACHE_DIR', str(tmp_path / 'cache'))
    quiet = dict(say=lambda line: None, model=tokenizer_folder)
    alone = real_sweep.sweep(**SMALL, path=tmp_path / 'alone.json', **quiet)
    assert len({json.dumps(run['history'], sort_keys=True) for seed in alone['runs'].values()
                for run in seed.values()}) == 3  # the three runs differ, so a mixed-up result would be seen
    killed = []
    with loopback_cluster(2) as address, executors.dask_client(address) as client:
        client.wait_for_workers(2, timeout=120)
        pids = client.run(os.getpid)  # {worker address: its process}

        def kill_a_busy_worker():  # a worker one second into a job is training, not loading
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and not killed:
                busy = [worker for worker, tasks in client.processing().items() if tasks]
                if busy:
                    time.sleep(1)
                    if client.processing().get(busy[0]):  # still under way: killed mid-run
                        os.kill(pids[busy[0]], signal.SIGKILL)
                        killed.append(busy[0])
                time.sleep(0.05)

        killer = threading.Thread(target=kill_a_busy_worker, daemon=True)
        killer.start()
        where = dict(scheduler=address, workers=2)
        there = real_sweep.sweep(**SMALL, path=tmp_path / 'there.json', model=tokenizer_folder,
                                 executor=client.get_executor(pure=False), where=where, say=lambda line: None)
        killer.join()
        assert killed and len(client.nthreads()) == 1  # one worker was lost, and the sweep finished on the other
    assert there['sessions'][0]['scheduler'] == address
    assert real_sweep.without_timing(there) == real_sweep.without_timing(alone)
    assert json.loads((tmp_path / 'there.json').read_text())['runs'] == there['runs']
    assert not any((tmp_path / 'cache').rglob('real-*.pt'))  # the stand-in's runs stay out of the run cache
