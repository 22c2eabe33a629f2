"""The notebook runner refuses mistakes before a kernel starts, and every failure names the notebook and the cell
(as a reader counts them), leaves the destination byte-identical and leaves no temporary file."""
import os
from pathlib import Path

import nbformat
import papermill
import pytest

from machinery.notebook_runner import NotebookFailed, execute_notebook, main

KERNELSPEC = {'name': 'agentrl-ch10', 'display_name': 'Python (agentrl ch10)', 'language': 'python'}
COMMITTED = b'{"committed": "copy"}\n'  # what a destination holds before a run; a failure must leave it so


def write_notebook(path, cells):
    """A small notebook from (kind, source) or (kind, source, tag) tuples; kind is 'code' or 'markdown'."""
    nb = nbformat.v4.new_notebook(metadata={'kernelspec': KERNELSPEC})
    for i, (kind, source, *tags) in enumerate(cells):
        cell = nbformat.v4.new_code_cell(source) if kind == 'code' else nbformat.v4.new_markdown_cell(source)
        cell['id'] = f'c{i}'
        if tags:
            cell.metadata['tags'] = list(tags)
        nb.cells.append(cell)
    nbformat.write(nb, path)
    return path


def snapshot(folder):
    """Every file under folder (hidden ones too) with its bytes."""
    return {p.relative_to(folder): p.read_bytes() for p in sorted(folder.rglob('*')) if p.is_file()}


@pytest.fixture
def no_kernel(monkeypatch):
    """Fail the test if papermill is asked to execute anything: the refusal must come before any kernel starts."""
    def refuse(*args, **kwargs):
        raise AssertionError('papermill was called: the mistake was not refused before execution')
    monkeypatch.setattr(papermill, 'execute_notebook', refuse)


def run_cli(capsys, *argv):
    """main(argv) -> (exit code, stderr); the failure is one FAILED line and never a traceback."""
    code = main([str(a) for a in argv])
    err = capsys.readouterr().err
    if code:
        assert err.startswith('FAILED: ') and 'Traceback' not in err, err
    return code, err


PARAMETRISED = [('markdown', '# A notebook'), ('code', 'seed = 0\nsteps: int = 3', 'parameters'),
                ('markdown', 'Some prose.'), ('code', 'x = seed * steps'),
                ('code', 'assert seed == 0, f"seed is {seed}"')]


def committed_copy(tmp_path, name):
    """tmp_path/out holding a stand-in for the committed copy of notebook `name` -> the out folder."""
    out = tmp_path / 'out'
    out.mkdir()
    (out / name).write_bytes(COMMITTED)
    return out


def test_unknown_parameters_are_refused_naming_the_notebooks_parameters(tmp_path, capsys, no_kernel):
    nb = write_notebook(tmp_path / 'nb.ipynb', PARAMETRISED)
    plain = write_notebook(tmp_path / 'plain.ipynb', [('code', 'seed = 0')])  # no cell tagged parameters
    out = committed_copy(tmp_path, 'nb.ipynb')
    before = snapshot(tmp_path)
    code, err = run_cli(capsys, nb, '-p', 'sead', '1', '--output', out)
    assert code == 1
    assert ("nb.ipynb: no cell ran: unknown parameter 'sead'; the notebook's parameters "
            "(cell 2, tagged 'parameters') are: seed, steps") in err
    with pytest.raises(NotebookFailed, match=r"plain\.ipynb: no cell ran: unknown parameter 'seed'; the notebook "
                                             r"has no cell tagged 'parameters', so it takes no parameters"):
        execute_notebook(plain, out / 'plain.ipynb', {'seed': 1})
    assert snapshot(tmp_path) == before


def test_parameters_without_output_are_refused_and_the_notebook_left_alone(tmp_path, capsys, no_kernel):
    nb = write_notebook(tmp_path / 'nb.ipynb', PARAMETRISED)
    before = snapshot(tmp_path)
    code, err = run_cli(capsys, nb, '-p', 'seed', '1')
    assert code == 1
    assert 'nb.ipynb: no cell ran: refusing to overwrite' in err and '--output DIR' in err
    assert snapshot(tmp_path) == before


def test_a_file_that_is_not_a_notebook_is_named(tmp_path, capsys, no_kernel):
    (tmp_path / 'text.ipynb').write_text('not json at all\n')
    (tmp_path / 'list.ipynb').write_text('[1, 2]\n')
    out = committed_copy(tmp_path, 'text.ipynb')
    before = snapshot(tmp_path)
    code, err = run_cli(capsys, tmp_path / 'text.ipynb', '--output', out)
    assert code == 1
    assert 'text.ipynb: no cell ran: the file is not valid JSON' in err
    with pytest.raises(NotebookFailed, match=r'list\.ipynb: no cell ran: the file is not a valid notebook'):
        execute_notebook(tmp_path / 'list.ipynb', out / 'list.ipynb')
    assert snapshot(tmp_path) == before


def test_a_failing_cell_after_injected_parameters_is_counted_as_a_reader_counts(tmp_path, capsys):
    nb = write_notebook(tmp_path / 'nb.ipynb', PARAMETRISED)
    out = committed_copy(tmp_path, 'nb.ipynb')
    before = snapshot(tmp_path)
    code, err = run_cli(capsys, nb, '-p', 'seed', '1', '--output', out)
    assert code == 1
    # papermill runs it as its 7th cell (its own parameters cell comes after cell 2); a reader sees cell 5
    assert ("""nb.ipynb: cell 5 (the 3rd code cell), starting 'assert seed == 0, f"seed is {seed}"': """
            """raised AssertionError: seed is 1""") in err
    assert snapshot(tmp_path) == before


def test_a_dead_kernel_names_the_cell_that_killed_it(tmp_path):
    nb = write_notebook(tmp_path / 'nb.ipynb', [('markdown', 'intro'), ('code', 'x = 1'),
                                                ('code', 'import os; os._exit(1)'), ('code', 'y = 2')])
    dest = tmp_path / 'executed.ipynb'
    dest.write_bytes(COMMITTED)
    before = snapshot(tmp_path)
    with pytest.raises(NotebookFailed, match=r"nb\.ipynb: cell 3 \(the 2nd code cell\), starting "
                                             r"'import os; os\._exit\(1\)': the kernel died while running it"):
        execute_notebook(nb, dest)
    assert snapshot(tmp_path) == before


def test_a_cell_running_past_the_limit_fails_naming_the_cell_and_the_limit(tmp_path, capsys):
    nb = write_notebook(tmp_path / 'nb.ipynb', [('code', 'x = 1'), ('markdown', 'then a long wait'),
                                                ('code', 'import time\ntime.sleep(30)'), ('code', 'y = 2')])
    out = tmp_path / 'out'
    out.mkdir()
    (out / 'nb.ipynb').write_bytes(COMMITTED)
    before = snapshot(tmp_path)
    code, err = run_cli(capsys, nb, '--cell-timeout', 2, '--output', out)
    assert code == 1
    assert ("nb.ipynb: cell 3 (the 2nd code cell), starting 'import time': still running after the cell limit "
            "of 2 s (raise it with --cell-timeout SECONDS)") in err
    assert snapshot(tmp_path) == before


def test_a_side_run_writes_its_results_and_figures_beside_it_not_over_the_committed_ones(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv('AGENTRL_RESULTS_DIR', raising=False)
    monkeypatch.delenv('AGENTRL_FIGURES_DIR', raising=False)
    nb = write_notebook(tmp_path / 'nb.ipynb', [('code', 'import os\nfrom pathlib import Path\n'
                                                        'folder = Path(os.environ["AGENTRL_RESULTS_DIR"])\n'
                                                        'folder.mkdir(parents=True, exist_ok=True)\n'
                                                        '(folder / "nb.json").write_text("{}")')])
    code, err = run_cli(capsys, nb, '--output', tmp_path / 'side')
    assert code == 0, err
    assert (tmp_path / 'side' / 'results' / 'nb.json').is_file()
    assert 'AGENTRL_RESULTS_DIR' not in os.environ and 'AGENTRL_FIGURES_DIR' not in os.environ  # restored


def test_a_failed_run_leaves_the_committed_results_and_figures_as_they_were(tmp_path, monkeypatch):
    home = tmp_path / 'home'
    (home / 'results').mkdir(parents=True)
    (home / 'results' / 'nb.json').write_text('{"old": 1}')
    (home / 'results' / 'other.json').write_text('{"other": 1}')
    monkeypatch.setenv('AGENTRL_RESULTS_DIR', str(home / 'results'))
    monkeypatch.setenv('AGENTRL_FIGURES_DIR', str(home / 'figures'))
    writes = ('import os\nfrom pathlib import Path\n'
              'results, figures = Path(os.environ["AGENTRL_RESULTS_DIR"]), Path(os.environ["AGENTRL_FIGURES_DIR"])\n'
              'assert (results / "other.json").read_text() == \'{"other": 1}\'  # the others stay readable\n'
              '(results / "nb.json").write_text(\'{"new": 2}\')\n'
              '(figures / "fig.svg").write_text("<svg/>")')
    failing = write_notebook(tmp_path / 'failing.ipynb', [('code', writes), ('code', 'raise ValueError("half-way")')])
    with pytest.raises(NotebookFailed, match='half-way'):
        execute_notebook(failing, tmp_path / 'out' / 'failing.ipynb')
    assert (home / 'results' / 'nb.json').read_text() == '{"old": 1}' and not (home / 'figures').exists()
    passing = write_notebook(tmp_path / 'passing.ipynb', [('code', writes)])
    execute_notebook(passing, tmp_path / 'out' / 'passing.ipynb')
    assert (home / 'results' / 'nb.json').read_text() == '{"new": 2}'
    assert (home / 'figures' / 'fig.svg').read_text() == '<svg/>'
    assert (home / 'results' / 'other.json').read_text() == '{"other": 1}'


def test_publishing_leaves_alone_the_results_of_other_notebooks_that_changed_meanwhile(tmp_path, monkeypatch):
    # under make -j2 another notebook may rewrite its results while this one runs: the copy this run started
    # from must not be published over the newer file
    from machinery.notebook_runner import staged_outputs

    home = tmp_path / 'results'
    home.mkdir()
    (home / 'other.json').write_text('{"v": 1}')
    monkeypatch.setenv('AGENTRL_RESULTS_DIR', str(home))
    monkeypatch.setenv('AGENTRL_FIGURES_DIR', str(tmp_path / 'figures'))
    with staged_outputs() as publish:
        (home / 'other.json').write_text('{"v": 2}')  # the other notebook finished meanwhile
        (Path(os.environ['AGENTRL_RESULTS_DIR']) / 'mine.json').write_text('{"mine": 1}')
        publish()
    assert (home / 'other.json').read_text() == '{"v": 2}' and (home / 'mine.json').read_text() == '{"mine": 1}'


def test_the_cache_dependent_covariance_warning_is_dropped_from_stderr_and_nothing_else():
    import nbformat

    from machinery.notebook_runner import strip_volatile
    warning = ('/x/agentrl/substrate/grpo.py:208: UserWarning: clip_cov treated no token in a minibatch: cov_fraction '
               '0.01 of 152 policy tokens asks for 1, but ... (said once per run)\n'
               '  surrogate = plugin.reshape_surrogate(surrogate, logp, old_logp, advantages, mask, stats)\n')
    cell = nbformat.v4.new_code_cell('x', outputs=[
        nbformat.v4.new_output('stream', name='stderr', text=warning + 'a real problem\n  and its detail\n' + warning),
        nbformat.v4.new_output('stream', name='stdout', text='printed\n'),
        nbformat.v4.new_output('stream', name='stderr', text=warning)])
    nb = strip_volatile(nbformat.v4.new_notebook(cells=[cell]))
    assert [(o.name, o.text) for o in nb.cells[0].outputs] == [('stderr', 'a real problem\n  and its detail\n'),
                                                                ('stdout', 'printed\n')]
