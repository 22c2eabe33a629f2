"""Side runs: a notebook executed with other parameters than its committed ones writes no tracked file, however it
is executed (papermill, nbclient, the runner), and says in one line where its results and figures went."""
import ast
import os
import subprocess
import sys

import nbformat
import pytest

from agentrl import paths, plotting, results
from agentrl import side_runs
from machinery.notebook_runner import PARAMETERS_TAG, execute_notebook, first_tagged
from conftest import NOTEBOOKS, REPO

ALL_NOTEBOOKS = sorted(p.stem for p in NOTEBOOKS.glob('[0-9][0-9]_*.ipynb'))
REDIRECTIONS = ('AGENTRL_RESULTS_DIR', 'AGENTRL_FIGURES_DIR', 'AGENTRL_SIDE_RUNS_DIR', *side_runs.DESTINATIONS.values())


@pytest.fixture
def committed_homes(monkeypatch, tmp_path):
    """No folder redirected (results and figures would go to the committed ones), side runs under tmp_path/side."""
    for name in REDIRECTIONS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv('AGENTRL_SIDE_RUNS_DIR', str(tmp_path / 'side'))
    monkeypatch.setattr(paths, '_side_folder', None)  # and back to no side run after the test
    return tmp_path / 'side'


def parameters_cell(name):
    nb = nbformat.read(NOTEBOOKS / f'{name}.ipynb', as_version=4)
    return nb, first_tagged(nb, PARAMETERS_TAG)


@pytest.mark.parametrize('name', ALL_NOTEBOOKS)
def test_the_committed_parameters_are_what_the_notebooks_parameters_cell_assigns(name):
    nb, index = parameters_cell(name)
    assigned = {statement.targets[0].id: ast.literal_eval(statement.value)
                for statement in ast.parse(nb.cells[index].source).body}
    assert list(assigned.items()) == list(side_runs.committed_parameters(name).items()), \
        f'{name}: its parameters cell and what papermill reads of it differ'


@pytest.mark.parametrize('name', ALL_NOTEBOOKS)
def test_each_notebook_routes_its_outputs_in_the_cell_after_its_parameters(name):
    nb, index = parameters_cell(name)
    following = next(cell for cell in nb.cells[index + 1:] if cell.cell_type == 'code')
    tree = ast.parse(following.source)
    calls = [node for node in ast.walk(tree) if isinstance(node, ast.Call) and ast.unparse(node.func) ==
             'side_runs.route_outputs']
    assert len(calls) == 1, f'{name}: the cell after the parameters calls side_runs.route_outputs {len(calls)} times'
    names = list(side_runs.committed_parameters(name))
    assert ast.unparse(calls[0]) == f'side_runs.route_outputs(NOTEBOOK, {", ".join(f"{n}={n}" for n in names)})'
    writes = [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Attribute)
              and isinstance(node.value, ast.Name) and node.value.id in ('results', 'plotting')]
    assert all(line > calls[0].lineno for line in writes), f'{name}: results or figures written before the routing'


def test_committed_values_leave_the_committed_folders_and_print_nothing(committed_homes, capsys):
    side_runs.route_outputs('09_seeds', **side_runs.committed_parameters('09_seeds'))  # the committed values, [0, 1, 2, 3, 4]
    assert (paths.results_dir(), paths.figures_dir()) == (paths.RESULTS, paths.FIGURES)
    assert capsys.readouterr().out == ''


def test_other_values_write_aside_and_say_where_in_one_line(committed_homes, capsys):
    side_runs.route_outputs('09_seeds', seed=0, seeds=[0, 1], processes=2)
    folder = committed_homes / '09_seeds-seeds=0,1'
    assert capsys.readouterr().out == (f'side run (seeds=[0, 1]; committed: seeds=[0, 1, 2, 3, 4]): results and figures '
                                       f'go to {folder}/ (results/, figures/)\n')
    results.record('09_seeds', 'probe', 1)
    fig, _ = plotting.new_figure()
    written = plotting.save_svg(fig, 'ch10-side-probe')
    assert written == folder / 'figures' / 'ch10-side-probe.svg' and written.is_file()
    assert results.load('09_seeds', folder / 'results') == {'probe': 1}
    assert not (paths.FIGURES / 'ch10-side-probe.svg').exists()
    side_runs.route_outputs('09_seeds', **side_runs.committed_parameters('09_seeds'))  # back to the committed values
    assert (paths.results_dir(), paths.figures_dir()) == (paths.RESULTS, paths.FIGURES)


def test_a_value_of_another_type_is_another_value(committed_homes, capsys):
    side_runs.route_outputs('02_estimator_moments', seed=0.0)
    assert paths.results_dir() == committed_homes / '02_estimator_moments-seed=0.0' / 'results'


def test_a_folder_chosen_explicitly_is_kept_and_named(committed_homes, monkeypatch, tmp_path, capsys):
    monkeypatch.setenv('AGENTRL_RESULTS_DIR', str(tmp_path / 'mine'))
    side_runs.route_outputs('02_estimator_moments', seed=1)
    assert paths.results_dir() == tmp_path / 'mine'
    assert paths.figures_dir() == committed_homes / '02_estimator_moments-seed=1' / 'figures'
    assert capsys.readouterr().out.endswith(f'go to {tmp_path / "mine"} and '
                                            f'{committed_homes / "02_estimator_moments-seed=1" / "figures"}\n')


def test_a_staged_run_names_where_its_files_will_be_published(committed_homes, monkeypatch, tmp_path, capsys):
    monkeypatch.setenv('AGENTRL_RESULTS_DIR', str(tmp_path / 'staging' / 'results'))
    monkeypatch.setenv(side_runs.DESTINATIONS['results'], str(tmp_path / 'out' / 'results'))
    monkeypatch.setenv(side_runs.DESTINATIONS['figures'], str(tmp_path / 'out' / 'figures'))
    side_runs.route_outputs('02_estimator_moments', seed=1)
    assert capsys.readouterr().out.endswith(f'go to {tmp_path / "out"}/ (results/, figures/)\n')


def test_route_outputs_wants_exactly_the_notebooks_parameters(committed_homes):
    with pytest.raises(TypeError, match=r"got the parameters seed; pass exactly the notebook's parameters, in "
                                        r"order: seed, seeds, processes"):
        side_runs.route_outputs('07_tinyagent_comparison', seed=0)
    with pytest.raises(KeyError, match=r"no notebook 'nb' in notebooks/ to read committed parameters from; there are: "
                                       r"01_bandit_closed_form, "):
        side_runs.route_outputs('nb', seed=0)


def test_the_runner_publishes_a_run_on_other_parameters_aside(committed_homes, tmp_path):
    nb = nbformat.v4.new_notebook(metadata={'kernelspec': {'name': 'agentrl-ch10', 'language': 'python',
                                                           'display_name': 'Python (agentrl ch10)'}})
    nb.cells = [nbformat.v4.new_code_cell('seed = 0', metadata={'tags': [PARAMETERS_TAG]}),
                nbformat.v4.new_code_cell('import os, pathlib\n'
                                          'folder = pathlib.Path(os.environ["AGENTRL_RESULTS_DIR"])\n'
                                          '(folder / "side_probe.json").write_text(str(seed))')]
    src = tmp_path / 'side_probe.ipynb'
    nbformat.write(nb, src)
    try:
        execute_notebook(src, tmp_path / 'out' / 'side_probe.ipynb', {'seed': 1})
        assert (committed_homes / 'side_probe-seed=1' / 'results' / 'side_probe.json').read_text() == '1'
        assert not (paths.RESULTS / 'side_probe.json').exists(), 'the side run was published over results/'
    finally:
        (paths.RESULTS / 'side_probe.json').unlink(missing_ok=True)
    assert paths.side_folder() is None, 'the runner left its process in the side run'


def git(folder, *args):
    return subprocess.run(['git', *args], cwd=folder, check=True, capture_output=True, text=True).stdout


@pytest.mark.slow
def test_papermill_and_nbclient_on_other_parameters_leave_git_status_clean(tmp_path, monkeypatch):
    """The notebook run as papermill's documentation shows, and as JupyterLab runs it after an edit of the
    parameters cell, in a committed copy of this tree whose package the kernel imports."""
    from nbclient import NotebookClient

    tree = tmp_path / 'tree'
    tree.mkdir()
    listed = git(REPO, 'ls-files', '-z', '--cached', '--others', '--exclude-standard').split('\0')
    for relative in filter(None, listed):
        if (REPO / relative).is_file():
            (tree / relative).parent.mkdir(parents=True, exist_ok=True)
            (tree / relative).write_bytes((REPO / relative).read_bytes())
    git(tree, 'init', '-q')
    git(tree, 'add', '-A')
    git(tree, '-c', 'user.name=test', '-c', 'user.email=test@example.org', 'commit', '-qm', 'the tree')
    for name in REDIRECTIONS:  # nothing redirected: without the side run, the copy's results/ would be written
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv('PYTHONPATH', str(tree))  # the kernels import the copy's agentrl: its REPO is the copy
    repo_status = git(REPO, 'status', '--porcelain')

    subprocess.run([sys.executable, '-m', 'papermill', 'notebooks/02_estimator_moments.ipynb',
                    str(tmp_path / 'out.ipynb'), '-p', 'seed', '1', '--log-level', 'ERROR'],
                   cwd=tree, check=True, capture_output=True)
    folder = tree / 'side-runs' / '02_estimator_moments-seed=1'
    side = results.load('02_estimator_moments', folder / 'results')
    assert side['estimator_moments'] != results.load('02_estimator_moments', paths.RESULTS)['estimator_moments']
    said = [out.text for cell in nbformat.read(tmp_path / 'out.ipynb', as_version=4).cells
            if cell.cell_type == 'code' for out in cell.outputs if 'side run' in out.get('text', '')]
    assert said == ['side run (seed=1; committed: seed=0): results and figures go to '
                    'side-runs/02_estimator_moments-seed=1/ (results/, figures/)\n']

    nb = nbformat.read(tree / 'notebooks' / '03_loss_gradients.ipynb', as_version=4)
    cell = nb.cells[first_tagged(nb, PARAMETERS_TAG)]
    cell.source = cell.source.replace('seed = 0', 'seed = 2', 1)  # the parameters cell, edited as a reader would
    NotebookClient(nb, kernel_name='agentrl-ch10', resources={'metadata': {'path': str(tree / 'notebooks')}}).execute()
    assert (tree / 'side-runs' / '03_loss_gradients-seed=2' / 'figures' / 'ch10-kl-estimators.svg').is_file()
    assert git(tree, 'status', '--porcelain') == '', 'a side run changed a tracked file of the copy'
    assert git(REPO, 'status', '--porcelain') == repo_status, 'a side run in the copy touched this tree'


def test_the_worker_count_is_not_a_side_run_and_none_means_one_per_core():
    from agentrl.executors import worker_count

    committed = side_runs.committed_parameters('07_tinyagent_comparison')
    assert committed['processes'] is None  # a reader's machine uses all its cores
    assert side_runs.changed_parameters('07_tinyagent_comparison', {**committed, 'processes': 7}) == {}
    assert side_runs.changed_parameters('07_tinyagent_comparison', {**committed, 'seed': 1}) == {'seed': 1}
    assert worker_count(None) == len(os.sched_getaffinity(0)) and worker_count(3) == 3
    for bad in (0, -1, 2.0, True, '2'):
        with pytest.raises(ValueError, match='processes must be a whole number >= 1, or None'):
            worker_count(bad)
