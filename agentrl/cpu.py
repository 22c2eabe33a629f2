"""Pin the CPU arithmetic, so that every x86-64 machine with AVX2 computes the same bits, or says it cannot.

Each numerical library picks its kernels by the CPU it finds, and kernels differ in their last bits:

  ATEN_CPU_CAPABILITY=avx2     ATen's own vectorised kernels (softmax, layer norm, GELU, the fused Adam step, ...)
  MKL_CBWR=AVX2 or COMPATIBLE  MKL's branch for matrix products (torch's linear, mm, bmm, the attention's products)
                               and its vector maths (torch's exp, log, sqrt, ...)
  ONEDNN_MAX_CPU_ISA=AVX2      oneDNN's highest instruction set
  OPENBLAS_CORETYPE=Haswell    numpy's OpenBLAS kernel (numpy's matmul; matplotlib's transforms)
  NPY_DISABLE_CPU_FEATURES     numpy's own SIMD loops: its AVX-512 float64 exp and log differ from its AVX2 ones

Each library reads its variable once, when it first needs it, so the pin has to be in os.environ before torch and
numpy start; `agentrl/__init__.py` sets it before importing either. `make` and the `agentrl-ch10` Jupyter kernel also
put it in the environment of every process they start, and spawned run workers inherit it.

MKL is the one library that does not obey on every CPU. Intel documents its instruction-set branches (AVX2, AVX512)
as Intel-only: on an AMD CPU, MKL_CBWR=AVX2 runs MKL's reproducible mode with its automatic branch, so an Intel and
an AMD machine under the same pin compute different matrix products, attention and vector maths. MKL_CBWR=COMPATIBLE
(MKL's SSE2 branch) is honoured on both: under it an AMD EPYC and an Intel Xeon agreed on every operation an
arithmetic probe hashed but torch's Adam step, whose square root is MKL's vector maths and not exactly rounded (the
project's optimisers therefore take torch's fused Adam, whose square root is ATen's own and exact). It costs about
1.45 times a GRPO step from the same policy (AMD EPYC). Two arithmetics, then:

  pinned    (default)  the AVX2 pin above: the same bits wherever the probe matches the outputs' record (measured on
                       this project's AMD EPYC machines; an Intel machine computes others)
  portable             MKL_CBWR=COMPATIBLE instead: the same bits on Intel and AMD by the probe above (our own probe's
                       Intel record is still to be made), slower

chosen with AGENTRL_ARITHMETIC=pinned|portable (`make ARITHMETIC=portable`). Which arithmetic a machine computes
with is summed up by the probe's digest; the committed outputs record theirs (data/arithmetic/).

The rules:
  - only on x86-64 (platform.machine() 'x86_64' or 'AMD64') whose CPU has AVX2; elsewhere (ARM, ...) the libraries'
    own choice is left alone, and the TinyAgent digits then differ from the committed outputs;
  - a variable already set in the environment is respected (an explicit choice), with a warning if it differs;
  - AGENTRL_CPU_PIN=0 turns the pin off entirely (to measure what it costs);
  - if torch had already chosen another capability before the pin (torch imported and used before agentrl), a
    warning says so: the pin can no longer take effect in that process.
"""
import argparse
import json
import os
import platform
import sys
import warnings

NUMPY_AVX512 = 'X86_V4 AVX512_ICL AVX512_SPR'  # numpy's AVX-512 dispatch targets: left out, numpy runs its AVX2 loops
ARITHMETICS = {
    'pinned': {'ATEN_CPU_CAPABILITY': 'avx2', 'MKL_CBWR': 'AVX2', 'ONEDNN_MAX_CPU_ISA': 'AVX2',
               'OPENBLAS_CORETYPE': 'Haswell', 'NPY_DISABLE_CPU_FEATURES': NUMPY_AVX512},
    'portable': {'ATEN_CPU_CAPABILITY': 'avx2', 'MKL_CBWR': 'COMPATIBLE', 'ONEDNN_MAX_CPU_ISA': 'AVX2',
                 'OPENBLAS_CORETYPE': 'Haswell', 'NPY_DISABLE_CPU_FEATURES': NUMPY_AVX512},
}
DEFAULT_ARITHMETIC = 'pinned'
ARITHMETIC_VAR = 'AGENTRL_ARITHMETIC'  # 'pinned' (default) or 'portable'
PINS = ARITHMETICS[DEFAULT_ARITHMETIC]  # the default pin's variables
X86_64 = ('x86_64', 'AMD64')
OPT_OUT = 'AGENTRL_CPU_PIN'  # '0' turns the pin off


def arithmetic():
    """The arithmetic asked for: AGENTRL_ARITHMETIC, else 'pinned'; anything else is refused, naming the choices."""
    name = os.environ.get(ARITHMETIC_VAR) or DEFAULT_ARITHMETIC
    if name not in ARITHMETICS:
        raise ValueError(f'{ARITHMETIC_VAR}={name!r} is not an arithmetic; choose one of {", ".join(ARITHMETICS)}')
    return name


def pins():
    """The pin variables of the arithmetic asked for (ARITHMETICS[arithmetic()])."""
    return ARITHMETICS[arithmetic()]


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
    for name, value in pins().items():
        current = os.environ.get(name)
        if current is None:
            os.environ[name] = value
            set_now[name] = value
        elif current.upper() != value.upper():
            warnings.warn(f'{name}={current} is set in the environment and overrides agentrl\'s pin ({name}={value}); '
                          'results may differ in their last digits from the committed outputs',
                          RuntimeWarning, stacklevel=2)
    if 'torch' in sys.modules:  # torch came first: did its dispatcher already choose?
        chosen = sys.modules['torch'].backends.cpu.get_cpu_capability()  # fixes the choice now if not yet made
        wanted = os.environ['ATEN_CPU_CAPABILITY'].upper()
        if chosen != wanted:
            warnings.warn(f'torch already dispatches {chosen} kernels (it ran before agentrl was imported), not '
                          f'{wanted}: the CPU pin is not in force in this process. Import agentrl before torch, or '
                          'start Python with ' + ' '.join(f'{k}={v!r}' for k, v in pins().items()) + ' in its '
                          'environment (make and the agentrl-ch10 Jupyter kernel do)', RuntimeWarning, stacklevel=2)
    return set_now


def cpu_pin_status():
    """What is in force in this process: {'machine', 'pin_applies', 'capability', and each pinned variable's value}.

    'capability' is torch.backends.cpu.get_cpu_capability() ('AVX2' when pinned on x86-64; asking fixes ATen's
    choice if torch has not computed anything yet). Imports torch.
    """
    import torch

    status = {'machine': platform.machine(), 'pin_applies': pin_wanted(), 'arithmetic': arithmetic(),
              'capability': torch.backends.cpu.get_cpu_capability()}
    status.update({name: os.environ.get(name) for name in PINS})
    return status


def pin_in_force():
    """True if torch dispatches AVX2 kernels and the variables hold the pin; None where the pin does not apply."""
    if not pin_wanted():
        return None
    status = cpu_pin_status()
    return status['capability'] == 'AVX2' and all((status[name] or '').upper() == value.upper()
                                                  for name, value in pins().items())


def pin_kernel_spec(path):
    """Put the pins in the `env` of a Jupyter kernel spec (kernel.json) when they apply on this machine, else take them
    out; the kernel then starts pinned whoever launches it (papermill, nbclient, a reader's `jupyter lab`)."""
    with open(path) as f:
        spec = json.load(f)
    env = {k: v for k, v in spec.get('env', {}).items() if k not in PINS and k != ARITHMETIC_VAR}
    if pin_wanted():
        env.update(pins())
        env[ARITHMETIC_VAR] = arithmetic()
    if env:
        spec['env'] = env
    else:
        spec.pop('env', None)
    with open(path, 'w') as f:
        json.dump(spec, f, indent=1)
        f.write('\n')
    return env


def adam(parameters, lr, weight_decay=None):
    """torch's Adam (AdamW when weight_decay is given) in its fused form: one ATen kernel per step whose square root is
    exactly rounded. The default, unfused step takes MKL's vector square root, which is not, and whose last bit
    differs between MKL's branches and so between CPU vendors."""
    import torch

    if weight_decay is None:
        return torch.optim.Adam(parameters, lr=lr, fused=True)
    return torch.optim.AdamW(parameters, lr=lr, weight_decay=weight_decay, fused=True)


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
        pinned = ' '.join(f'{k}={env[k]!r}' for k in [*PINS, ARITHMETIC_VAR] if k in env)
        print(f'{args.kernel_spec}: ' + (f'kernel pinned ({pinned})' if pinned else 'no CPU pin on this machine'))
    else:
        pin_cpu_kernels()
        print(cpu_pin_status())
    return 0


if __name__ == '__main__':  # run as a file (`python agentrl/cpu.py`), it needs no other part of agentrl
    sys.exit(main())
