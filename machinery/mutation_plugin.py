"""A pytest plugin loaded only by `make mutation` (mutmut's pytest_add_cli_args): it lets mutmut's mutants reach the
sandbox's worker process.

mutmut copies the package into mutants/ and rewrites every mutated function into a trampoline that picks the
original or the mutant named by the MUTANT_UNDER_TEST environment variable; the trampoline imports mutmut. The
grading worker is agentrl/substrate/sandbox.py run as a script with `python -S -s` and a clean environment, so
left alone it could not import mutmut (no site-packages), would never see MUTANT_UNDER_TEST, and would run as module
`__main__` (the trampoline matches mutants by module name): every mutant of the worker's code (the screen, the line
budget, `_limit_this_process`, `_serve`) would run unmutated and survive whatever the tests do.

So, in a mutation run only, every `python -S ...` command that runs sandbox.py (Sandbox._start, and the tests that
start a worker themselves) is rewritten to load the same mutated file under its package name
`agentrl.substrate.sandbox` (also registered as `sandbox`, the name tests/test_sandbox.py's probe imports), with a
folder holding only mutmut on sys.path, and the active mutant in its environment; then it does what the command
did (serve jobs, or run the given `-c` code). The worker's code, limits and protocol are unchanged.

While mutmut collects which tests cover which function (MUTANT_UNDER_TEST=stats), calls inside the worker cannot be
recorded in the test process, so starting a worker records the worker-side functions as covered by the running test.

mutmut forks every mutant's test run from its main process, after that process ran the tests once unmutated. A
child forked from a process in which torch has run OpenMP threads hangs at its first parallel operation, so in a
mutation run torch runs on one thread whatever the code asks (torch.set_num_threads always sets 1; the tests that need
two threads, or a spawned process, are deselected in pyproject.toml). The tests' quick RL base lives in
mutants/.quick-base, built by the unmutated runs, and each mutant's run works on a private copy of it: a mutant that
breaks saving or loading cannot leave a wrong base for the next one, and no mutant spends seconds fine-tuning it again.
"""
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

# the functions of agentrl/substrate/sandbox.py that run inside the worker process
WORKER_FUNCTIONS = ('call_with_line_budget', 'screen', 'grade', '_limit_this_process', '_cpu_limit_for_next_job',
                    '_serve')
MODULE = 'agentrl.substrate.sandbox'

_ORIGINAL_INIT = subprocess.Popen.__init__
_MUTMUT_ONLY = None


def _mutmut_only_folder():
    """A folder holding only links to the installed mutmut package and its metadata (what the trampolines import)."""
    global _MUTMUT_ONLY
    if _MUTMUT_ONLY is None:
        import importlib.metadata
        import importlib.util

        folder = Path(tempfile.mkdtemp(prefix='agentrl-mutmut-only-'))
        package = Path(importlib.util.find_spec('mutmut').submodule_search_locations[0]).resolve()
        (folder / 'mutmut').symlink_to(package, target_is_directory=True)
        metadata = Path(importlib.metadata.distribution('mutmut')._path).resolve()  # mutmut-<version>.dist-info
        (folder / metadata.name).symlink_to(metadata, target_is_directory=True)
        _MUTMUT_ONLY = str(folder)
    return _MUTMUT_ONLY


def _active_mutant():
    """The mutant under test if it is a real mutant's name (not 'stats', 'fail' or empty), else ''."""
    name = os.environ.get('MUTANT_UNDER_TEST', '')
    return name if '__mutmut_' in name else ''


def _bootstrap(sandbox_path):
    """Python code that loads sandbox.py from `sandbox_path` as module agentrl.substrate.sandbox (alias sandbox)."""
    return ('import sys as _s, importlib.util as _u\n'
            f'_s.path.append({_mutmut_only_folder()!r})\n'
            f'_spec = _u.spec_from_file_location({MODULE!r}, {str(sandbox_path)!r})\n'
            '_m = _u.module_from_spec(_spec)\n'
            f'_s.modules[{MODULE!r}] = _s.modules["sandbox"] = _m\n'
            '_spec.loader.exec_module(_m)\n'
            'del _s, _u, _spec, _m\n')


def _sandbox_path():
    from agentrl.paths import PACKAGE  # mutants/agentrl in a mutation run

    return (PACKAGE / 'substrate' / 'sandbox.py').resolve()


def _rewrite(args):
    """The command to run instead of `args` (a list), or None if it does not run the sandbox with `python -S`."""
    if not isinstance(args, (list, tuple)) or len(args) < 3 or args[0] != sys.executable or '-S' not in args[1:3]:
        return None
    args = [str(a) for a in args]
    flags = [a for a in args[1:] if a in ('-S', '-s')]
    rest = args[1 + len(flags):]
    path = _sandbox_path()
    if rest and Path(rest[0]).resolve() == path:  # the worker as a script: sandbox.py MEMORY CPU
        code = _bootstrap(path) + 'import sys\nsys.modules["sandbox"]._serve(int(sys.argv[1]), int(sys.argv[2]))\n'
        return [args[0], *flags, '-c', code, *rest[1:]]
    if len(rest) >= 2 and rest[0] == '-c' and 'sandbox' in rest[1]:  # trusted code that imports the worker
        return [args[0], *flags, '-c', _bootstrap(path) + rest[1], *rest[2:]]
    return None


def _record_worker_coverage():
    from mutmut.stats import record_trampoline_hit

    for name in WORKER_FUNCTIONS:
        record_trampoline_hit(f'{MODULE}.x_{name}')


def _popen_init(self, args, *positional, **keywords):
    command = _rewrite(args)
    if command is not None:
        args = command
        env = keywords.get('env')
        env = dict(os.environ if env is None else env)
        env['MUTANT_UNDER_TEST'] = _active_mutant()
        keywords['env'] = env
        if os.environ.get('MUTANT_UNDER_TEST') == 'stats':
            _record_worker_coverage()
    _ORIGINAL_INIT(self, args, *positional, **keywords)


_PRIVATE_BASE = None


def _quick_base_dir():
    """tests/substrate_fixtures.quick_base_dir in a mutation run: the shared clean base, or this mutant's copy of it."""
    global _PRIVATE_BASE
    from agentrl.paths import REPO  # mutants/ in a mutation run

    shared = REPO / '.quick-base'
    if not _active_mutant():
        shared.mkdir(exist_ok=True)
        return shared
    if _PRIVATE_BASE is None:
        _PRIVATE_BASE = Path(tempfile.mkdtemp(prefix='agentrl-mutant-base-'))
        if shared.is_dir():
            shutil.copytree(shared, _PRIVATE_BASE, dirs_exist_ok=True)
    return _PRIVATE_BASE


def pytest_configure(config):
    """Set up before any test runs (what is made here never appears inside a test's temporary folders)."""
    import torch

    _mutmut_only_folder()
    _quick_base_dir()

    if not hasattr(torch, '_agentrl_set_num_threads'):
        torch._agentrl_set_num_threads = torch.set_num_threads
        torch.set_num_threads = lambda count: torch._agentrl_set_num_threads(1)
    torch.set_num_threads(1)
    subprocess.Popen.__init__ = _popen_init
    try:
        import substrate_fixtures  # tests/ is on sys.path once tests/conftest.py is loaded
    except ImportError:
        return
    substrate_fixtures.quick_base_dir = _quick_base_dir


def pytest_unconfigure(config):
    subprocess.Popen.__init__ = _ORIGINAL_INIT
