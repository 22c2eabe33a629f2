"""The notebook runner refuses mistakes before a kernel starts, and every failure names the notebook and the cell
(as a reader counts them), leaves the destination byte-identical and leaves no temporary file; a success prints one
line, and at most one more counting what the kernel printed."""
import os
import re
import tempfile
from pathlib import Path

import nbformat
import papermill
import pytest

import agentrl.progress
from agentrl.paths import NOTEBOOKS
from agentrl.side_runs import committed_parameters
from machinery.notebook_cells import read_notebook
from machinery.notebook_runner import NotebookFailed, check_parameters, execute_notebook, main

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
    # on the committed notebooks the runner knows exactly the parameters a side run is compared on
    for path in sorted(NOTEBOOKS.glob('[0-9]*.ipynb')):
        committed = committed_parameters(path.stem)
        assert committed, path
        check_parameters(path, read_notebook(path)[0], committed)
        with pytest.raises(NotebookFailed, match=f"are: {', '.join(committed)}$"):
            check_parameters(path, read_notebook(path)[0], {**committed, 'not_a_parameter': 1})


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


# A long cell is judged by its silence, not its length: the tests scale the limit down to 1 s and the work to 3 s.
PRINTS_FOR_3_S = 'import time\nfor i in range(15):\n    print("step", i, flush=True)\n    time.sleep(0.2)'
SILENT_FOR_3_S = 'import time\ntime.sleep(3)'
# agentrl/progress.py loaded by itself, in a kernel or a worker: importing agentrl (and torch) would take seconds, longer
# than the tests' silence limit
LOADS_PROGRESS = ('import importlib.util\n'
                  f'spec = importlib.util.spec_from_file_location("progress", {agentrl.progress.__file__!r})\n'
                  'progress = importlib.util.module_from_spec(spec)\nspec.loader.exec_module(progress)\n')
# a worker process's loop, printing nothing the kernel forwards: only the heartbeat file tells the runner it works
WORKER_BEATS_FOR_3_S = LOADS_PROGRESS + 'import time\nfor _ in progress.progress(range(15)):\n    time.sleep(0.2)\n'


def test_a_long_cell_that_keeps_printing_runs_to_the_end_under_a_short_silence_limit(tmp_path, capsys):
    nb = write_notebook(tmp_path / 'nb.ipynb', [('code', PRINTS_FOR_3_S), ('code', 'done = True')])
    code, err = run_cli(capsys, nb, '--silence-limit', 1, '--output', tmp_path / 'out')
    assert code == 0, err
    outputs = nbformat.read(tmp_path / 'out' / 'nb.ipynb', as_version=4).cells[0].outputs
    assert outputs[0].text == ''.join(f'step {i}\n' for i in range(15))


def test_a_worker_making_progress_in_silence_is_heard_through_the_heartbeat(tmp_path, capsys):
    worker = tmp_path / 'worker.py'
    worker.write_text(WORKER_BEATS_FOR_3_S)
    starts = f'import subprocess, sys\n_ = subprocess.run([sys.executable, {str(worker)!r}], check=True)'
    nb = write_notebook(tmp_path / 'nb.ipynb', [('code', starts)])
    code, err = run_cli(capsys, nb, '--silence-limit', 1, '--output', tmp_path / 'out')
    assert code == 0, err
    assert nbformat.read(tmp_path / 'out' / 'nb.ipynb', as_version=4).cells[0].outputs == []  # nothing saved


def test_a_silent_cell_fails_naming_the_notebook_the_cell_and_the_silence(tmp_path, capsys):
    nb = write_notebook(tmp_path / 'nb.ipynb', [('code', 'x = 1'), ('markdown', 'then a silent wait'),
                                                ('code', SILENT_FOR_3_S), ('code', 'y = 2')])
    out = committed_copy(tmp_path, 'nb.ipynb')
    before = snapshot(tmp_path)
    code, err = run_cli(capsys, nb, '--silence-limit', 1, '--output', out)
    assert code == 1
    assert re.search(r"nb\.ipynb: cell 3 \(the 2nd code cell\), starting 'import time': silent for [12] s \(no output, "
                     r"progress line or run finished; the limit is 1 s\), taken for hung and stopped \(allow longer "
                     r"silences with --silence-limit SECONDS\)", err), err
    assert snapshot(tmp_path) == before


def test_a_silence_limit_that_is_not_a_positive_whole_number_of_seconds_is_refused(tmp_path, capsys, no_kernel):
    nb = write_notebook(tmp_path / 'nb.ipynb', [('code', 'x = 1')])
    for bad in ('0', '-5', 'ten', '1.5'):
        with pytest.raises(SystemExit):
            main([str(nb), '--silence-limit', bad])
        err = capsys.readouterr().err
        assert (f"argument --silence-limit: expected a positive whole number of seconds (the longest a cell may go "
                f"without output or progress, default 600), got '{bad}'") in err, err
    with pytest.raises(ValueError, match=r'silence_limit must be a positive number of seconds, not 0$'):
        execute_notebook(nb, tmp_path / 'out.ipynb', silence_limit=0)


# what agentrl.ch10.live.ready_runs reports through the heartbeat: two runs loaded, one trained (and then loaded again
# by a later cell, which still counts it as trained)
REPORTS_RUNS = LOADS_PROGRESS + ('progress.beat(run="run-a.pt", seconds=None)\n'
                                 'progress.beat(run="run-b.pt", seconds=None)\nprogress.beat(run="run-c.pt", seconds=12.5)')


def test_the_runs_loaded_and_trained_are_counted_in_one_line_and_never_saved_into_the_notebook(tmp_path, capsys):
    loads_again = LOADS_PROGRESS + 'progress.beat(run="run-c.pt", seconds=None)'
    nb = write_notebook(tmp_path / 'nb.ipynb', [('code', REPORTS_RUNS), ('code', loads_again)])
    assert main([str(nb), '--output', str(tmp_path / 'out')]) == 0
    out, err = capsys.readouterr()
    assert err == '', err
    lines = out.splitlines()[1:]  # after the line naming --output's folders
    assert re.fullmatch(rf'{re.escape(str(nb))}: \d+\.\d s', lines[0]), out
    assert lines[1:] == ['  runs: 2 loaded from the run cache, 1 trained and saved to it'], out
    assert all(cell.outputs == [] for cell in nbformat.read(tmp_path / 'out' / 'nb.ipynb', as_version=4).cells)


def test_a_failed_run_says_how_many_runs_a_rerun_will_find_in_the_cache(tmp_path, capsys):
    nb = write_notebook(tmp_path / 'nb.ipynb', [('code', REPORTS_RUNS), ('code', 'raise ValueError("half-way")')])
    code, err = run_cli(capsys, nb, '--output', tmp_path / 'out')
    assert code == 1
    assert err.splitlines()[1] == ('  runs before it ended: 2 loaded from the run cache, 1 trained and saved to it; '
                                   'a re-run loads these 3 from the run cache'), err



def test_a_stopped_run_says_how_many_runs_a_rerun_will_find_in_the_cache(tmp_path):
    import signal
    import subprocess
    import sys

    stops = 'import os, signal, time\nos.kill(os.getppid(), signal.SIGTERM)  # the runner, as `kill` would\ntime.sleep(30)'
    nb = write_notebook(tmp_path / 'nb.ipynb', [('code', REPORTS_RUNS), ('code', stops)])
    done = subprocess.run([sys.executable, '-m', 'machinery.notebook_runner', str(nb), '--output', str(tmp_path / 'out')],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == -signal.SIGTERM, done.stderr
    lines = done.stderr.splitlines()
    assert lines[0].startswith(f"STOPPED by SIGTERM: {nb} was interrupted in cell 2 (the 2nd code cell)"), done.stderr
    assert lines[1:] == ['  runs before it ended: 2 loaded from the run cache, 1 trained and saved to it; '
                         'a re-run loads these 3 from the run cache'], done.stderr

def test_ready_runs_tells_the_runner_each_run_it_loaded_or_trained(tmp_path, monkeypatch):
    from agentrl.ch10 import experiments, live
    from agentrl.progress import HEARTBEAT
    from machinery.notebook_kernel import read_runs, runs_line

    heartbeat = tmp_path / 'heartbeat'
    heartbeat.touch()
    monkeypatch.setenv(HEARTBEAT, str(heartbeat))
    specs = [experiments.arm(name, seed=0) for name in ('a', 'b', 'c')]
    saved = {'a'}  # a is in the run cache; b and c are trained (here: pretended, and without an RL base to hash)
    monkeypatch.setattr(experiments, 'run_path', lambda spec: tmp_path / f'run-{spec.name}.pt')
    monkeypatch.setattr(experiments, 'load_run', lambda spec: {'name': spec.name} if spec.name in saved else None)
    monkeypatch.setattr(experiments, 'ensure_run', lambda spec: {'name': spec.name})

    def train_runs(todo, processes, executor, done):
        for spec in todo:
            saved.add(spec.name)
            done(spec.name, 3.0)
    monkeypatch.setattr(experiments, 'train_runs', train_runs)
    live.ready_runs(specs, processes=1, show=False)
    events = read_runs(heartbeat)
    assert [(e['run'], e['seconds']) for e in events] == [('run-a.pt', None), ('run-b.pt', 3.0), ('run-c.pt', 3.0)]
    assert runs_line(events, finished=True) == '  runs: 1 loaded from the run cache, 2 trained and saved to it'


# The kernel answers papermill's closing kernel_info request, then takes a while to finish handling it: an interrupt
# sent at shutdown lands there, and the kernel logs "ERROR | KeyboardInterrupt caught in kernel." on its stderr.
SLOW_TO_FINISH = ('import time\nkernel = get_ipython().kernel\n'
                  'answer = kernel.shell_handlers["kernel_info_request"]\n\n\n'
                  'async def answer_then_tidy_up(*args):\n    await answer(*args)\n    time.sleep(1)\n\n\n'
                  'kernel.shell_handlers["kernel_info_request"] = answer_then_tidy_up')


def test_a_successful_run_prints_one_line_naming_the_notebook_and_its_time(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(tempfile, 'tempdir', str(tmp_path / 'tmp'))  # where the kernel's folder goes
    (tmp_path / 'tmp').mkdir()
    where = ('from ipykernel.kernelapp import IPKernelApp\n'
             'app = IPKernelApp.instance()\nprint(app.transport, app.connection_file)')
    nb = write_notebook(tmp_path / 'nb.ipynb', [('markdown', 'intro'), ('code', where), ('code', SLOW_TO_FINISH)])
    assert main([str(nb)]) == 0
    out, err = capsys.readouterr()
    assert re.fullmatch(rf'{re.escape(str(nb))}: \d+\.\d s\n', out), out
    assert 'TCP' not in out + err and 'ERROR' not in out + err, out + err
    assert err == '', err  # no TCP warning, no KeyboardInterrupt caught at shutdown, nothing else
    transport, connection_file = nbformat.read(nb, as_version=4).cells[1].outputs[0].text.split()
    assert transport == 'ipc' and connection_file.startswith(str(tmp_path / 'tmp' / 'agentrl-kernel-'))
    assert sorted(p.name for p in tmp_path.iterdir()) == ['nb.ipynb', 'tmp']
    assert list((tmp_path / 'tmp').iterdir()) == []  # the kernel's connection file, sockets and output are gone


def test_what_the_kernel_prints_is_counted_in_one_line(tmp_path, capsys):
    # a worker process and a C library write to the kernel's stderr (a run under make showed them); what the cell
    # writes to sys.stderr is the notebook's output, not the kernel's
    warns = ('import os, subprocess, sys\n'
             'print("a notebook output", file=sys.stderr)\n'
             'subprocess.run([sys.executable, "-c", "import warnings; warnings.warn(\'a worker warns\')"])\n'
             'os.write(2, b"a C library complains\\n")')
    nb = write_notebook(tmp_path / 'nb.ipynb', [('code', warns)])
    assert main([str(nb), '--output', str(tmp_path / 'out')]) == 0
    out, err = capsys.readouterr()
    assert err == '', err
    lines = out.splitlines()[1:]  # after the line naming --output's folders
    assert len(lines) == 2 and re.fullmatch(rf'{re.escape(str(nb))}: \d+\.\d s', lines[0]), out
    assert lines[1] == '  2 warnings from the kernel (first: <string>:1: UserWarning: a worker warns)', out
    assert 'C library' not in out
    outputs = nbformat.read(tmp_path / 'out' / 'nb.ipynb', as_version=4).cells[0].outputs
    assert outputs[0].name == 'stderr' and outputs[0].text.startswith('a notebook output\n')


def test_a_rebuilt_cache_file_is_said_in_the_summary_and_never_saved_into_the_notebook(tmp_path, capsys):
    # the words agentrl.verified_cache warns with when a saved run is damaged, naming the machine's folder
    damaged = ('import warnings\n'
               f'warnings.warn("saved run {tmp_path}/run-1.pt is unusable (checksum mismatch); it will be recomputed")\n'
               'print("the run, rebuilt")')
    nb = write_notebook(tmp_path / 'nb.ipynb', [('code', damaged)])
    assert main([str(nb), '--output', str(tmp_path / 'out')]) == 0
    out, _ = capsys.readouterr()
    assert '  1 cached file was stale or damaged and rebuilt (first: saved run ' in out, out
    assert out.rstrip().endswith('run-1.pt is unusable (checksum mismatch); it will be recomputed)'), out
    outputs = nbformat.read(tmp_path / 'out' / 'nb.ipynb', as_version=4).cells[0].outputs
    saved = ''.join(out.get('text', '') for out in outputs)
    assert saved == 'the run, rebuilt\n' and len(outputs) == 1  # the warning and the folder it names are gone


def test_no_committed_file_names_a_folder_of_the_machine_that_wrote_it():
    import subprocess

    from agentrl.paths import REPO
    listed = subprocess.run(['git', 'ls-files'], cwd=REPO, capture_output=True, text=True, check=True).stdout.split()
    homes = ('home', 'Users', 'root', 'work')  # joined below, so this file does not name them itself
    marks = (str(REPO) + '/', *(f'/{home}/' for home in homes))
    found = []
    for name in listed:
        path = REPO / name
        if not path.is_file() or path.suffix in ('.db', '.pt', '.png', '.woff2', '.otf'):
            continue
        text = path.read_text(encoding='utf-8', errors='ignore')
        found += [f'{name}: {mark}' for mark in marks if mark in text]
    assert not found, found


def test_a_failed_run_shows_what_the_kernel_printed(tmp_path, capsys):
    nb = write_notebook(tmp_path / 'nb.ipynb', [('code', 'import os\nos.write(2, b"last words\\n")\nos._exit(3)')])
    code, err = run_cli(capsys, nb, '--output', tmp_path / 'out')
    assert code == 1
    assert err.splitlines()[:3] == [f"FAILED: {nb}: cell 1 (the 1st code cell), starting 'import os': the kernel "
                                    "died while running it", "  the kernel's stdout and stderr:", '    last words']


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


def test_only_the_cells_tagged_as_this_machines_lose_their_outputs():
    import nbformat

    from machinery.notebook_outputs import MACHINE_TAG
    from machinery.notebook_runner import strip_volatile

    def printed(tags):
        return nbformat.v4.new_code_cell('print(1)', metadata={'tags': tags},
                                         outputs=[nbformat.v4.new_output('stream', name='stdout', text='took 3 s\n')])

    nb = strip_volatile(nbformat.v4.new_notebook(cells=[printed([MACHINE_TAG]), printed([])]))
    assert nb.cells[0].outputs == [] and nb.cells[0].source == 'print(1)'
    assert [o.text for o in nb.cells[1].outputs] == ['took 3 s\n']
