"""The CPU pin (agentrl/cpu.py): AVX2 kernels wherever the project runs torch on x86-64, torch's own choice elsewhere.

In force (a) in a notebook kernel, from the agentrl-ch10 kernel spec alone, and (b) in a spawned run worker, both by
inheritance and by the worker's own `import agentrl`. The rules themselves are checked on any machine.

This module imports agentrl only inside functions: a spawned worker imports it to find `worker_report`, and must do
so before anything pins torch, as a run worker does.
"""
import concurrent.futures
import json
import multiprocessing
import os
import platform
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
NUMPY_OFF = 'X86_V4 AVX512_ICL AVX512_SPR'
ARITHMETICS = {  # restated here, not imported: the tests hold agentrl.cpu to them
    'pinned': {'ATEN_CPU_CAPABILITY': 'avx2', 'MKL_CBWR': 'AVX2', 'ONEDNN_MAX_CPU_ISA': 'AVX2',
               'OPENBLAS_CORETYPE': 'Haswell', 'NPY_DISABLE_CPU_FEATURES': NUMPY_OFF},
    'portable': {'ATEN_CPU_CAPABILITY': 'avx2', 'MKL_CBWR': 'COMPATIBLE', 'ONEDNN_MAX_CPU_ISA': 'AVX2',
                 'OPENBLAS_CORETYPE': 'Haswell', 'NPY_DISABLE_CPU_FEATURES': NUMPY_OFF},
}
PINS = ARITHMETICS[os.environ.get('AGENTRL_ARITHMETIC') or 'pinned']  # what make asked for (pinned unless told)
KERNEL = 'agentrl-ch10'
X86_64 = platform.machine() in ('x86_64', 'AMD64')
on_x86_64 = pytest.mark.skipif(not X86_64, reason=f'the CPU pin applies on x86-64 only; this machine is '
                                                  f'{platform.machine()}, where torch keeps its own kernels')


@pytest.fixture
def pin_applies():
    """Skip unless agentrl pins on this machine (x86-64 with AVX2, AGENTRL_CPU_PIN not 0)."""
    from agentrl.cpu import has_avx2, pin_wanted

    if os.environ.get('AGENTRL_CPU_PIN') == '0':
        pytest.skip('AGENTRL_CPU_PIN=0: the CPU pin is turned off')
    if not has_avx2():
        pytest.skip('this x86-64 CPU has no AVX2: the CPU pin is not applied')
    assert pin_wanted()


@pytest.fixture
def unpinned_parent(monkeypatch):
    """This process's environment without the pin variables, so children get them from elsewhere or not at all."""
    for name in PINS:
        monkeypatch.delenv(name, raising=False)


def print_status_source(import_agentrl):
    """Code printing, as JSON, the capability torch dispatches and the pin variables (optionally after agentrl)."""
    return ('import json, os\n'
            + ('import agentrl\n' if import_agentrl else '')
            + 'import torch\n'
            + f'print(json.dumps(dict(capability=torch.backends.cpu.get_cpu_capability(), '
              f'**{{k: os.environ.get(k) for k in {sorted(PINS)!r}}})))\n')


def run_in_kernel(sources):
    """Execute one cell per source through the agentrl-ch10 kernel -> the JSON each cell printed."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(source) for source in sources]
    NotebookClient(nb, kernel_name=KERNEL, timeout=300).execute()
    return [json.loads(''.join(out.get('text', '') for out in cell.outputs if out.get('name') == 'stdout'))
            for cell in nb.cells]


@on_x86_64
def test_notebook_kernel_is_pinned_by_its_spec(pin_applies, unpinned_parent):
    """A notebook on the agentrl-ch10 kernel dispatches AVX2 even if it imports torch before agentrl (or never)."""
    from jupyter_client.kernelspec import KernelSpecManager

    spec = KernelSpecManager().get_kernel_spec(KERNEL)
    assert {k: spec.env.get(k) for k in PINS} == PINS, (
        f'the {KERNEL} kernel spec ({spec.resource_dir}) does not carry the CPU pin in its env: run `make setup`, '
        f'or .venv/bin/python agentrl/cpu.py --kernel-spec {spec.resource_dir}/kernel.json')
    torch_first, agentrl_after = run_in_kernel([print_status_source(False), print_status_source(True)])
    assert torch_first == dict(capability='AVX2', **PINS)
    assert agentrl_after == dict(capability='AVX2', **PINS)


def worker_report():
    """In a spawned worker: the pin variables as inherited, then, after `import agentrl` (what every run worker
    does first), what is in force."""
    inherited = {name: os.environ.get(name) for name in PINS}
    import agentrl  # noqa: F401
    from agentrl.cpu import cpu_pin_status

    return inherited, cpu_pin_status()


def run_in_spawned_worker():
    """worker_report() in a worker launched the way runs are (ProcessPoolExecutor over spawn)."""
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=multiprocessing.get_context('spawn')) as pool:
        return pool.submit(worker_report).result(timeout=300)


@on_x86_64
def test_run_worker_inherits_the_pin(pin_applies):
    """A run worker started from a process that imported agentrl inherits the variables and dispatches AVX2."""
    import agentrl  # noqa: F401  (the parent, as in a notebook: agentrl imported, so the variables are set)

    assert {k: os.environ.get(k) for k in PINS} == PINS
    inherited, status = run_in_spawned_worker()
    assert inherited == PINS
    assert status['capability'] == 'AVX2'
    assert {k: status[k] for k in PINS} == PINS


@on_x86_64
def test_run_worker_pins_itself(pin_applies, unpinned_parent):
    """Even from a parent whose environment lacks the variables, the worker's own `import agentrl` pins it."""
    inherited, status = run_in_spawned_worker()
    assert inherited == dict.fromkeys(PINS)
    assert status['capability'] == 'AVX2'
    assert {k: status[k] for k in PINS} == PINS


def clean_env(**extra):
    """os.environ without the pin variables and the opt-out, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if k not in PINS and k != 'AGENTRL_CPU_PIN'}
    env.update(extra)
    return env


def python(code, env):
    return subprocess.run([sys.executable, '-c', code], env=env, capture_output=True, text=True, check=True, cwd=REPO)


@on_x86_64
def test_warns_when_torch_chose_before_agentrl(pin_applies):
    """torch imported and used before agentrl: too late to pin, and agentrl says so (on a machine above AVX2)."""
    native = python('import torch; print(torch.backends.cpu.get_cpu_capability())', clean_env()).stdout.strip()
    if native == 'AVX2':
        pytest.skip('torch dispatches AVX2 here anyway: nothing to warn about')
    late = python('import torch; torch.ones(3).exp(); import agentrl', clean_env())
    assert 'the CPU pin is not in force in this process' in late.stderr


def test_rules(monkeypatch):
    """Set when absent on x86-64 with AVX2; an explicit value kept (with a warning); nothing elsewhere or when off."""
    from agentrl import cpu

    def fresh(machine, avx2=True, **env):
        for name in list(PINS) + ['AGENTRL_CPU_PIN', 'AGENTRL_ARITHMETIC']:
            monkeypatch.delenv(name, raising=False)
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        monkeypatch.setattr(cpu.platform, 'machine', lambda: machine)
        monkeypatch.setattr(cpu, 'has_avx2', lambda: avx2)
        monkeypatch.delitem(sys.modules, 'torch', raising=False)  # as before torch's import (restored afterwards)

    default = ARITHMETICS['pinned']
    fresh('x86_64')
    assert cpu.pin_cpu_kernels() == default and {k: os.environ[k] for k in default} == default
    fresh('AMD64')
    assert cpu.pin_cpu_kernels() == default
    fresh('x86_64', AGENTRL_ARITHMETIC='portable')
    assert cpu.pin_cpu_kernels() == ARITHMETICS['portable'] and os.environ['MKL_CBWR'] == 'COMPATIBLE'
    fresh('x86_64', AGENTRL_ARITHMETIC='exact')
    with pytest.raises(ValueError, match="AGENTRL_ARITHMETIC='exact' is not an arithmetic; choose one of pinned, "
                                         "portable"):
        cpu.pin_cpu_kernels()
    for machine in ('aarch64', 'arm64', 'ppc64le'):
        fresh(machine)
        assert cpu.pin_cpu_kernels() == {} and not any(k in os.environ for k in PINS)
    fresh('x86_64', avx2=False)
    assert cpu.pin_cpu_kernels() == {} and not any(k in os.environ for k in PINS)
    fresh('x86_64', AGENTRL_CPU_PIN='0')
    assert cpu.pin_cpu_kernels() == {} and not any(k in os.environ for k in PINS)
    fresh('x86_64', ATEN_CPU_CAPABILITY='default')
    with pytest.warns(RuntimeWarning, match='ATEN_CPU_CAPABILITY=default is set in the environment'):
        assert cpu.pin_cpu_kernels() == {k: v for k, v in default.items() if k != 'ATEN_CPU_CAPABILITY'}
    assert os.environ['ATEN_CPU_CAPABILITY'] == 'default'
    fresh('x86_64', **default)  # already set to the pin (by make or the kernel spec): nothing to do, no warning
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        assert cpu.pin_cpu_kernels() == {}


def test_kernel_spec_rewrite(tmp_path, monkeypatch):
    """The kernel spec gets the pins in its env where they apply and loses them elsewhere; other env entries stay."""
    from agentrl import cpu

    path = tmp_path / 'kernel.json'
    path.write_text(json.dumps({'argv': ['python'], 'display_name': 'x', 'env': {'OTHER': '1'}}))
    monkeypatch.setattr(cpu, 'pin_wanted', lambda: True)
    for name in ('pinned', 'portable'):
        monkeypatch.setenv('AGENTRL_ARITHMETIC', name)
        cpu.pin_kernel_spec(path)
        assert json.loads(path.read_text())['env'] == dict(OTHER='1', **ARITHMETICS[name], AGENTRL_ARITHMETIC=name)
    monkeypatch.setattr(cpu, 'pin_wanted', lambda: False)
    cpu.pin_kernel_spec(path)
    assert json.loads(path.read_text())['env'] == {'OTHER': '1'}
