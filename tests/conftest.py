"""Shared fixtures: notebooks executed once per test session into a temporary folder, their figures and their
recorded results redirected there too, so a test run never writes into the repository."""
import pytest

from agentrl import results
from agentrl.paths import NOTEBOOKS, REPO  # noqa: F401  (re-exported for the tests)
from machinery.notebook_runner import environment


def pytest_configure(config):
    """The markers of the snapshot and verdict tests (MAINTAINING.md, "The tests, layer by layer", and "Same numbers
    on every machine"); `slow` is declared in pyproject.toml."""
    config.addinivalue_line('markers', 'snapshot: compares a fresh run with the committed outputs, results or figures, '
                                       'bit for bit (always also slow); skipped on a machine whose arithmetic differs, '
                                       'where the verdict tests judge the fresh runs in its place')
    config.addinivalue_line('markers', 'verdict: holds a fresh run to what the committed one printed and decided, on '
                                       'every machine: the exact notebooks\' printed lines, every verdict the training '
                                       'notebooks record except those labelled tied or fragile (always also slow)')


_mismatch = []  # the arithmetic check's sentence, once per session (None: this machine computes the outputs' bits)
_skipped = []  # the snapshot tests skipped for it
# What the verdict tests checked, one dict per test (kind 'lines' or 'verdicts', notebook, counts, the exempt ones):
# the terminal summary says it, so that a run whose snapshots were skipped says what was judged in their place.
VERDICT_RECORD = []
PROBES_TO_RECORD = []  # (file to record, its text) for an arithmetic no probe of this CPU vendor is recorded for


@pytest.hookimpl(trylast=True)  # after -k and -m have deselected: only the tests that run are counted and probed for
def pytest_collection_modifyitems(config, items):
    """Skip the snapshot tests where this machine computes other bits than the committed outputs: there they would
    fail on the last digit whatever the code does. The verdict tests run everywhere: where the bits differ they are
    what judges a fresh run (they execute the same notebooks the snapshot tests would, once each)."""
    if not any(item.get_closest_marker('snapshot') or item.get_closest_marker('verdict') for item in items):
        return
    from machinery.arithmetic import outputs_mismatch

    _mismatch.append(outputs_mismatch())
    _skipped.extend(skip_snapshots(items, _mismatch[0]))


def skip_snapshots(items, mismatch):
    """Mark the snapshot tests among items skipped if mismatch (the arithmetic check's sentence) says this machine
    computes other bits; -> the items skipped. A verdict test is never skipped here."""
    if not mismatch:
        return []
    snapshots = [item for item in items if item.get_closest_marker('snapshot')]
    for item in snapshots:
        item.add_marker(pytest.mark.skip(reason='a snapshot test, and this machine computes other bits than the '
                                                'committed outputs (the line starting "arithmetic:" says which, and '
                                                'what the verdict tests checked in its place)'))
    return snapshots


def verdict_summary(record):
    """The lines saying what the verdict tests checked (record: VERDICT_RECORD's dicts; one with 'failed' is a
    notebook whose execution failed, so nothing of it was judged)."""
    lines = [entry for entry in record if entry['kind'] == 'lines' and not entry.get('failed')]
    verdicts = [entry for entry in record if entry['kind'] == 'verdicts' and not entry.get('failed')]
    failed = {entry['notebook']: entry['failed'] for entry in record if entry.get('failed')}
    said = []
    if lines:
        same = sum(entry['checked'] for entry in lines)
        said.append(f'the lines printed by {len(lines)} exact notebooks ({", ".join(e["notebook"][:2] for e in lines)}'
                    f'): {same} equal to the committed ones'
                    + ''.join(f'; {e["notebook"][:2]}: {len(e["moved"])} differ' for e in lines if e['moved']))
    if verdicts:
        held = sum(entry['checked'] for entry in verdicts)
        moved = [f'{where} ({before} -> {after})' for e in verdicts for where, before, after in e['moved']]
        exempt = [f'{where} ({why})' for e in verdicts for where, why in e['exempt']]
        silent = [e['notebook'][:2] for e in verdicts if not e['checked'] and not e['exempt'] and not e['moved']]
        said.append(f'the verdicts recorded by {len(verdicts)} executed notebooks '
                    f'({", ".join(e["notebook"][:2] for e in verdicts)}): {held} equal to the committed ones'
                    + (f', {len(moved)} moved: ' + '; '.join(moved) if moved else '')
                    + (f'; {len(exempt)} exempt, not compared: ' + '; '.join(exempt)
                       if exempt else '; none exempt')
                    + (f'; notebooks recording no verdict, only executed: {", ".join(silent)}' if silent else ''))
    if failed:
        said.append('nothing of ' + '; '.join(f'{name} ({why})' for name, why in failed.items())
                    + ': its execution failed')
    return said


def pytest_terminal_summary(terminalreporter, config):
    if 'not slow' in (config.getoption('markexpr') or ''):
        terminalreporter.write_line('smollm2: the tests that load SmolLM2-135M-Instruct are marked slow and were left '
                                    'out (loading it takes about 15 s); make test runs them')
    for target, text in PROBES_TO_RECORD:
        terminalreporter.write_line(f'arithmetic: no probe of this CPU vendor is recorded for this arithmetic; '
                                    f'these rows are its record, as {target}:')
        for line in text.splitlines():
            terminalreporter.write_line(f'    {line}')
    if not _mismatch:
        return
    checked = verdict_summary(VERDICT_RECORD)
    if _mismatch[0]:
        skipped = (f'the {len(_skipped)} snapshot tests were skipped' if _skipped
                   else 'no snapshot test was selected, and any would have been skipped')
        terminalreporter.write_line(f'arithmetic: {skipped} because {_mismatch[0]}.')
        if checked:
            for line in checked:
                terminalreporter.write_line(f'arithmetic: in their place the verdict tests checked {line}')
        else:
            terminalreporter.write_line('arithmetic: and no verdict test ran in their place (deselected), so this '
                                        'session judged nothing of what the training notebooks say')
    elif checked:
        for line in checked:
            terminalreporter.write_line(f'verdicts: this machine computes the committed bits (the snapshot tests '
                                        f'compare them); the verdict tests checked {line}')


class NotebookRuns:
    """Executes notebooks on demand into a temporary folder, once per (notebook, parameters), and caches them.

    Each execution records its results into a folder of its own (AGENTRL_RESULTS_DIR, inherited by the kernel), so
    a rerun with other parameters never overwrites another run's results. A failed execution is remembered too:
    every test that asks for it fails with its message, and the notebook is not executed again (several tests read
    each notebook, and a notebook that fails after minutes would otherwise cost those minutes once per test).
    """

    def __init__(self, folder):
        self.folder = folder
        self.done = {}
        self.failed = {}  # (name, parameters) -> the first execution's failure message

    def _tag(self, parameters):
        return '-'.join(f'{k}{v}' for k, v in sorted(parameters.items())) or 'default'

    def run(self, name, **parameters):
        """The executed notebook `name` (file stem) with the given papermill parameters, as an nbformat node."""
        import nbformat

        from machinery.notebook_runner import NotebookFailed, execute_notebook

        key = (name, tuple(sorted(parameters.items())))
        if key in self.failed:
            raise NotebookFailed(f'{self.failed[key]} (failed earlier in this session; not executed again)')
        if key not in self.done:
            where = self.folder / self._tag(parameters)
            dest = where / f'{name}.ipynb'
            try:
                with environment(AGENTRL_RESULTS_DIR=str(where / 'results')):
                    execute_notebook(NOTEBOOKS / f'{name}.ipynb', dest, parameters)
            except NotebookFailed as failure:
                self.failed[key] = str(failure)
                raise
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
