"""Pin torch's CPU kernels to one instruction set, so that every x86-64 machine computes the same bits.

torch (ATen), MKL and oneDNN each pick their kernels from the CPU they run on: on an AVX-512 machine they use
AVX-512 kernels, on an AVX2 machine AVX2 ones, and softmax, GELU or attention then differ in the last digits, which a
training run amplifies. Three environment variables fix the choice to AVX2, which every x86-64 CPU since 2013 has:

  ATEN_CPU_CAPABILITY=avx2   ATen's own vectorised kernels (softmax, log-softmax, attention, ...)
  MKL_CBWR=AVX2              MKL's conditional numerical reproducibility mode (matrix multiplies)
  ONEDNN_MAX_CPU_ISA=AVX2    oneDNN's highest instruction set (element-wise ops such as GELU)

Each library reads its variable once, when it first needs it: ATen at its first dispatched operation, MKL and oneDNN
when they initialise. `pin_cpu_kernels()` therefore has to run before torch computes anything; `agentrl/__init__.py`
calls it before importing torch, and setting `os.environ` inside the process is then enough (checked: a fresh
process that sets the three in `os.environ` and then imports torch reports capability 'AVX2' and computes the same
bits as one started with them in its environment). `make` and the `agentrl-ch10` Jupyter kernel also put them in the
environment of every process they start, so a notebook that imports torch before agentrl is pinned too, and
spawned run workers inherit them (and import agentrl first in any case).

The rules:
  - only on x86-64 (platform.machine() 'x86_64' or 'AMD64') whose CPU has AVX2; elsewhere (ARM, ...) torch's own
    choice is left alone, and the TinyAgent digits may then differ from the committed outputs;
  - a variable already set in the environment is respected (an explicit choice, e.g. ATEN_CPU_CAPABILITY=default to
    compare), with a warning if it differs from the pin;
  - AGENTRL_CPU_PIN=0 turns the pin off entirely (to measure what it costs);
  - if torch had already chosen another capability before the pin (torch imported and used before agentrl), a
    warning says so: the pin can no longer take effect in that process.

On AMD CPUs MKL honours only the AUTO and COMPATIBLE branches of MKL_CBWR (Intel documents the others as Intel-only):
MKL_CBWR=AVX2 then runs MKL in its reproducible mode with the automatic branch (MKL_VERBOSE=1 reports 'CNR:AUTO').
"""
import argparse
import json
import os
import platform
import sys
import warnings

PINS = {'ATEN_CPU_CAPABILITY': 'avx2', 'MKL_CBWR': 'AVX2', 'ONEDNN_MAX_CPU_ISA': 'AVX2'}
X86_64 = ('x86_64', 'AMD64')
OPT_OUT = 'AGENTRL_CPU_PIN'  # '0' turns the pin off


def is_x86_64():
    """True on an x86-64 machine (the only one whose kernels these variables select)."""
    return platform.machine() in X86_64


def has_avx2():
    """Whether the CPU has AVX2 and FMA (what ATen requires for its AVX2 kernels).

    Read from /proc/cpuinfo on Linux; elsewhere assumed (every x86-64 CPU since 2013 has both).
    """
    try:
        with open('/proc/cpuinfo') as f:
            for line in f:
                if line.startswith('flags'):
                    flags = set(line.split(':', 1)[1].split())
                    return {'avx2', 'fma'} <= flags
    except OSError:
        pass
    return True


def pin_wanted():
    """Whether this process should pin: x86-64 with AVX2 and not turned off with AGENTRL_CPU_PIN=0."""
    return os.environ.get(OPT_OUT, '1') != '0' and is_x86_64() and has_avx2()


def pin_cpu_kernels():
    """Set the instruction-set pins in os.environ before torch starts (x86-64 with AVX2 only).

    Variables already in the environment are kept (a warning names any that differs from the pin). Returns the
    variables this call set, {} when it set none. Must run before torch's first operation to take effect.
    """
    if not pin_wanted():
        return {}
    set_now = {}
    for name, value in PINS.items():
        current = os.environ.get(name)
        if current is None:
            os.environ[name] = value
            set_now[name] = value
        elif current.upper() != value.upper():
            warnings.warn(f'{name}={current} is set in the environment and overrides agentrl\'s pin ({name}={value}); '
                          'TinyAgent results may differ in their last digits from the committed outputs',
                          RuntimeWarning, stacklevel=2)
    if 'torch' in sys.modules:  # torch came first: did its dispatcher already choose?
        chosen = sys.modules['torch'].backends.cpu.get_cpu_capability()  # fixes the choice now if not yet made
        wanted = os.environ['ATEN_CPU_CAPABILITY'].upper()
        if chosen != wanted:
            warnings.warn(f'torch already dispatches {chosen} kernels (it ran before agentrl was imported), not '
                          f'{wanted}: the CPU pin is not in force in this process. Import agentrl before torch, or '
                          'start Python with ' + ' '.join(f'{k}={v}' for k, v in PINS.items()) + ' in its '
                          'environment (make and the agentrl-ch10 Jupyter kernel do)', RuntimeWarning, stacklevel=2)
    return set_now


def cpu_pin_status():
    """What is in force in this process: {'machine', 'pin_applies', 'capability', and each pinned variable's value}.

    'capability' is torch.backends.cpu.get_cpu_capability() ('AVX2' when pinned on x86-64; asking fixes ATen's
    choice if torch has not computed anything yet). Imports torch.
    """
    import torch

    status = {'machine': platform.machine(), 'pin_applies': pin_wanted(),
              'capability': torch.backends.cpu.get_cpu_capability()}
    status.update({name: os.environ.get(name) for name in PINS})
    return status


def pin_in_force():
    """True if torch dispatches AVX2 kernels and the three variables hold the pin; None where the pin does not apply."""
    if not pin_wanted():
        return None
    status = cpu_pin_status()
    return status['capability'] == 'AVX2' and all((status[name] or '').upper() == value.upper()
                                                  for name, value in PINS.items())


def pin_kernel_spec(path):
    """Put the pins in the `env` of a Jupyter kernel spec (kernel.json) when they apply on this machine, else take them
    out; the kernel then starts pinned whoever launches it (papermill, nbclient, a reader's `jupyter lab`)."""
    with open(path) as f:
        spec = json.load(f)
    env = {k: v for k, v in spec.get('env', {}).items() if k not in PINS}
    if pin_wanted():
        env.update(PINS)
    if env:
        spec['env'] = env
    else:
        spec.pop('env', None)
    with open(path, 'w') as f:
        json.dump(spec, f, indent=1)
        f.write('\n')
    return env


class fixed_threads:
    """Run torch on `count` threads inside the block (whatever the machine's core count), then restore the caller's.

    Results computed on a different number of threads differ in their last digits, so every training runs inside one.
    """

    def __init__(self, count):
        self.count = count

    def __enter__(self):
        import torch  # only used once agentrl has pinned the kernels

        self.saved = torch.get_num_threads()
        torch.set_num_threads(self.count)

    def __exit__(self, *exc):
        import torch

        torch.set_num_threads(self.saved)


def main(argv=None):
    parser = argparse.ArgumentParser(description='The CPU pin: print what is in force, or pin a Jupyter kernel spec.')
    parser.add_argument('--kernel-spec', metavar='KERNEL_JSON', help='write the pins into this kernel.json\'s env')
    args = parser.parse_args(argv)
    if args.kernel_spec:
        env = pin_kernel_spec(args.kernel_spec)
        pinned = ' '.join(f'{k}={env[k]}' for k in PINS if k in env)
        print(f'{args.kernel_spec}: ' + (f'kernel pinned ({pinned})' if pinned else 'no CPU pin on this machine'))
    else:
        pin_cpu_kernels()
        print(cpu_pin_status())
    return 0


if __name__ == '__main__':  # run as a file (`python agentrl/cpu.py`), it needs no other part of agentrl
    sys.exit(main())
