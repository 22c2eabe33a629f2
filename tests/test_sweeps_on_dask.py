"""Sweeps through any concurrent.futures.Executor (agentrl/executors.py): a small sweep on a Dask LocalCluster (2
worker processes, 1 thread each, on 127.0.0.1, no dashboard) gives the runs of the same sweep trained in this process
and through local worker processes bit for bit, saved in the caller's run cache and not on the workers' side; the
substrate and the CPU pin reach the workers, which refuse to compute with other kernels; the cluster leaves no process
behind."""
import contextlib
import dataclasses
import os
import socket
import time

import pytest
import torch

from agentrl import executors, stopping
from agentrl.calibration import measure as calibration_measure
from agentrl.ch10 import experiments
from agentrl.cpu import cpu_pin_status, pin_in_force, pin_wanted
from agentrl.substrate.config import use
from machinery import search
from substrate_fixtures import MAIN, QUICK_SFT

QUICK = dataclasses.replace(MAIN, sft=QUICK_SFT)  # a substrate whose RL base is fine-tuned in seconds
SMALL = dict(tasks_per_step=2, eval_every=0)  # 16 episodes a step, no evaluation during training


def sweep():
    """Three 2-step runs: two settings, and one that starts from the first's final weights (so they cross too)."""
    first = experiments.arm('none', SMALL, steps=2)
    return [first, experiments.arm('KL k3+ 0.3', dict(SMALL, kl_coef=0.3, kl_kind='k3+'), steps=2),
            experiments.RunSpec('from none', first.fields, steps=2, seed=1, init=first, reference='rl_base')]


def assert_same_runs(a, b):
    assert a.keys() == b.keys()
    for name in a:
        assert a[name]['history'] == b[name]['history'], name
        assert a[name]['metrics'] == b[name]['metrics'], name
        assert a[name]['state_dict'].keys() == b[name]['state_dict'].keys(), name
        for key, tensor in a[name]['state_dict'].items():
            assert torch.equal(tensor, b[name]['state_dict'][key]), (name, key)


@contextlib.contextmanager
def cluster_and_client(**env):
    """A Dask cluster on this machine, 2 worker processes of 1 thread each, on 127.0.0.1 without a dashboard (the
    workers get `env` on top of this process's environment), and a client of it; both closed with the block.
    distributed is imported here, not at collection: the fast tests of this file start nothing of it."""
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host='127.0.0.1', dashboard_address=None,
                      env=env) as cluster, Client(cluster, set_as_default=False) as client:
        yield cluster, client


def worker_processes(client):
    """The pids of the cluster's worker processes and of their children (the grading workers), while they run."""
    workers = set(client.run(os.getpid).values())
    assert len(workers) == 2 and os.getpid() not in workers
    return workers | {pid for worker in workers for pid in stopping.descendants(worker)}


def assert_all_ended(pids, seconds=10):
    deadline = time.monotonic() + seconds
    while any(stopping.alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [pid for pid in pids if stopping.alive(pid)], 'the cluster left processes running'


@pytest.mark.slow  # about 60 s: a cluster started, nine small runs trained
def test_a_sweep_on_a_dask_cluster_is_the_sweep_through_local_processes(tmp_path, monkeypatch):
    monkeypatch.delenv(executors.SCHEDULER_VARIABLE, raising=False)
    monkeypatch.setenv('AGENTRL_CACHE_DIR', str(tmp_path / 'cache'))  # the quick RL base: built here, loaded by workers
    specs = sweep()
    with use(QUICK):
        experiments.substrate()  # build the RL base before any worker looks for it
        monkeypatch.setenv('AGENTRL_RUNS_DIR', str(tmp_path / 'here-runs'))
        here = experiments.run_all(specs, processes=1)  # in this process, without a job: the reference
        monkeypatch.setenv('AGENTRL_RUNS_DIR', str(tmp_path / 'local-runs'))
        local = experiments.run_all(specs, processes=2)  # the default: two spawned local worker processes
        monkeypatch.setenv('AGENTRL_RUNS_DIR', str(tmp_path / 'runs'))
        # the workers get a run cache of their own, which must stay empty: a run comes back to be saved here
        with cluster_and_client(AGENTRL_RUNS_DIR=str(tmp_path / 'worker-runs')) as (_, client):
            pins, in_force = client.run(cpu_pin_status), client.run(pin_in_force)
            start = time.perf_counter()
            on_dask = experiments.run_all(specs, executor=client.get_executor())
            seconds = time.perf_counter() - start
            workers = worker_processes(client)
    if pin_wanted():  # as in a spawned run worker (tests/test_cpu_pin.py)
        assert set(in_force.values()) == {True}, pins
        assert all(status['capability'] == 'AVX2' for status in pins.values()), pins
    assert_same_runs(local, here)
    assert_same_runs(on_dask, here)
    assert all(run['provenance']['substrate'] == QUICK.key() for run in on_dask.values())
    assert sorted(os.listdir(tmp_path / 'runs')) == sorted(os.listdir(tmp_path / 'local-runs'))
    assert len(os.listdir(tmp_path / 'runs')) == len(specs)
    assert not (tmp_path / 'worker-runs').exists()
    assert_all_ended(workers)
    print(f'sweep of {len(specs)} runs on the LocalCluster: {seconds:.1f} s')


@pytest.mark.slow  # about 30 s: a cluster started, three seeds and a batch measured twice
def test_the_calibration_and_a_search_trial_measure_the_same_on_a_dask_cluster(tmp_path, monkeypatch):
    monkeypatch.delenv(executors.SCHEDULER_VARIABLE, raising=False)
    monkeypatch.setenv('AGENTRL_CACHE_DIR', str(tmp_path / 'cache'))
    protocol = calibration_measure.Protocol(seeds=(0, 1), batch_seeds=(0,), short_steps=2, long_steps=3, attempts=8)
    here = calibration_measure.measure(QUICK, protocol, processes=1)  # also builds the RL base the workers load
    with cluster_and_client() as (cluster, client):
        workers = worker_processes(client)
        measured = calibration_measure.measure(QUICK, protocol, executor=client.get_executor())
        trial = search.Search(scheduler=cluster.scheduler_address)  # what --scheduler sets
        seeds = search.measured(trial, QUICK, protocol, [('batch', 0), ('seed', 1)])
        workers |= worker_processes(client)
    assert measured == here
    assert seeds == [here[1][0], here[0][1]]
    assert_all_ended(workers)
    with socket.socket() as probe:  # a port of this machine that nothing listens on once the probe is closed
        probe.bind(('127.0.0.1', 0))
        nobody = f'tcp://127.0.0.1:{probe.getsockname()[1]}'
    with pytest.raises(ConnectionError, match=f'no Dask scheduler answered at {nobody} within 2 s'):
        with executors.dask_client(nobody, timeout=2):
            pass


def test_a_worker_that_computes_with_other_kernels_refuses_the_job():
    pin = executors.pin_environment()
    assert executors.pinned(pin, divmod, 7, 2) == (3, 1)
    other = dict(pin, kernels=dict(pin['kernels'], aten='AVX512'))
    with pytest.raises(RuntimeError, match='computes with the CPU kernels'):
        executors.pinned(other, divmod, 7, 2)


def test_the_executor_is_the_one_given_else_local_processes_else_none():
    given = object()
    with executors.sweep_executor(2, executor=given, scheduler='tcp://127.0.0.1:1') as chosen:
        assert chosen is given
    with executors.sweep_executor(1) as chosen:
        assert chosen is None
    assert executors.ordered(None, divmod, [(7, 2), (9, 4)]) == [(3, 1), (2, 1)]
    assert executors.scheduler_address({executors.SCHEDULER_VARIABLE: 'tcp://h:8786'}) == 'tcp://h:8786'
    assert executors.scheduler_address({}) is None
    assert executors.dask_worker_threads() is None  # this process is no Dask worker


@pytest.mark.parametrize('address', ['127.0.0.1:8786', 'http://host:8786', 'tcp://host', 'tcp://host:port',
                                     'tcp://:8786', 'tcp://host:8786/path', ''])
def test_a_scheduler_address_of_another_form_is_refused_before_connecting(address):
    with pytest.raises(ValueError, match=r'is not a Dask scheduler address: expected tcp://HOST:PORT'):
        executors.check_scheduler_address(address)
    assert executors.check_scheduler_address('tcp://10.0.0.5:8786') == 'tcp://10.0.0.5:8786'
    assert executors.check_scheduler_address('tls://[::1]:8786') == 'tls://[::1]:8786'
