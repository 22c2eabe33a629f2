"""Shared fixtures: notebooks executed once per test session into a temporary folder, their figures and their
recorded results redirected there too, so a test run never writes into the repository."""
import pytest

from agentrl import results
from agentrl.paths import NOTEBOOKS, REPO  # noqa: F401  (re-exported for the tests)
from machinery.notebook_runner import environment


def pytest_configure(config):
    """The marker of the snapshot tests (MAINTAINING.md, "The tests, layer by layer"); `slow` is declared in
    pyproject.toml."""
    config.addinivalue_line('markers', 'snapshot: compares a fresh run with the committed outputs, results or figures, '
                                       'bit for bit (always also slow); skipped on a machine whose arithmetic differs')


_mismatch = []  # the arithmetic check's sentence, once per session (None: this machine computes the outputs' bits)


def pytest_collection_modifyitems(config, items):
    """Skip the snapshot tests where this machine computes other bits than the committed outputs: there they would
    fail on the last digit whatever the code does. Every other test, the verdict tests included, still runs."""
    snapshots = [item for item in items if item.get_closest_marker('snapshot')]
    if not snapshots:
        return
    from machinery.arithmetic import outputs_mismatch

    _mismatch.append(outputs_mismatch())
    if _mismatch[0]:
        for item in snapshots:
            item.add_marker(pytest.mark.skip(reason='a snapshot test, and this machine computes other bits than the '
                                                    'committed outputs (the line starting "arithmetic:" says which)'))


def pytest_terminal_summary(terminalreporter, config):
    if 'not slow' in (config.getoption('markexpr') or ''):
        terminalreporter.write_line('smollm2: the tests that load SmolLM2-135M-Instruct are marked slow and were left '
                                    'out (loading it takes about 15 s); make test runs them')
    if _mismatch and _mismatch[0]:
        terminalreporter.write_line(f'arithmetic: the snapshot tests were skipped because {_mismatch[0]}')


class NotebookRuns:
    """Executes notebooks on demand into a temporary folder, once per (notebook, parameters), and caches them.

    Each execution records its results into a folder of its own (AGENTRL_RESULTS_DIR, inherited by the kernel), so
    a rerun with other parameters never overwrites another run's results.
    """

    def __init__(self, folder):
        self.folder = folder
        self.done = {}

    def _tag(self, parameters):
        return '-'.join(f'{k}{v}' for k, v in sorted(parameters.items())) or 'default'

    def run(self, name, **parameters):
        """The executed notebook `name` (file stem) with the given papermill parameters, as an nbformat node."""
        import nbformat

        from machinery.notebook_runner import execute_notebook

        key = (name, tuple(sorted(parameters.items())))
        if key not in self.done:
            where = self.folder / self._tag(parameters)
            dest = where / f'{name}.ipynb'
            with environment(AGENTRL_RESULTS_DIR=str(where / 'results')):
                execute_notebook(NOTEBOOKS / f'{name}.ipynb', dest, parameters)
            self.done[key] = nbformat.read(dest, as_version=4)
        return self.done[key]

    def results(self, name, **parameters):
        """What the notebook recorded when executed with these parameters (executing it first if needed)."""
        self.run(name, **parameters)
        return results.load(name, self.folder / self._tag(parameters) / 'results')


@pytest.fixture(scope='session')
def figures_tmp(tmp_path_factory):
    """A temporary figures folder that executed notebooks write to instead of the repository's figures/."""
    folder = tmp_path_factory.mktemp('figures')
    with environment(AGENTRL_FIGURES_DIR=str(folder)):
        yield folder


@pytest.fixture(scope='session')
def notebook_runs(tmp_path_factory, figures_tmp):
    """Session-wide executor of notebooks into a temporary folder (figures go to figures_tmp, results beside each
    executed notebook)."""
    return NotebookRuns(tmp_path_factory.mktemp('executed'))


@pytest.fixture(scope='session', autouse=True)
def results_tmp(tmp_path_factory):
    """Anything a test records goes to a temporary folder, never to the committed results/ (tests that read the
    committed results name agentrl.paths.RESULTS explicitly)."""
    folder = tmp_path_factory.mktemp('results')
    with environment(AGENTRL_RESULTS_DIR=str(folder)):
        yield folder


@pytest.fixture(scope='session')
def smollm2():
    """SmolLM2-135M-Instruct, loaded once for the whole session (agentrl.pretrained.loader); the tests that take it
    are marked slow, so `make test-fast` leaves them out."""
    from agentrl.pretrained.loader import load_smollm2

    return load_smollm2()
