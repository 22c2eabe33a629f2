"""Execute notebooks headlessly with papermill and commit their outputs only when they succeed.

Usage: python -m machinery.notebook_runner NOTEBOOK.ipynb [...] [-p NAME VALUE ...] [--output DIR]
       [--silence-limit SECONDS]

Each notebook runs into a temporary file beside its destination; what changes from run to run
(papermill and nbclient timings, paths, the injected cell's random id) is stripped; only then is the
destination replaced. Mistakes are refused before a kernel starts: a parameter the notebook's
`parameters` cell does not assign, or parameters without --output (which would overwrite the committed
notebook). A run with other parameters than the committed ones publishes its results and figures aside
(agentrl.side_runs), never over the committed ones. Any failure (a cell raising, the kernel dying, the
kernel silent for longer than the silence limit, a file that is not a notebook) leaves the destination untouched, and
the command exits 1 with one line naming the notebook and the cell as a reader counts it: "cell 7 (the 4th
code cell), starting '...'", and leaves the committed results and figures as they were too (the kernel writes
them into a staging folder that is published only when the whole notebook succeeded).

A cell may run as long as it keeps showing signs of life: output, a display update, or a beat of the heartbeat file
that agentrl.progress touches on every training step (in the kernel or its workers) and on every run loaded or trained.
Only a kernel silent for the silence limit is taken for hung and stopped. The runs a notebook loaded from the run cache
and trained are counted in one line under its summary (and under a FAILED or STOPPED line: every run trained before
is saved, so a re-run starts from them).

A successful run prints one line per notebook, its name and how long it took, under it the runs count if it used any,
and at most one line counting what the kernel printed outside the notebook (its own stdout and stderr, captured into a
file: a training worker's warning, a C library's message) and the warnings the run logged; a failed run prints that
captured output in full under its FAILED line. The kernel talks to the runner over IPC sockets in a private temporary
folder, not over TCP.

SIGINT, SIGTERM or SIGHUP stops the run: the kernel, its training workers and their grading workers end within a few
seconds (agentrl.stopping), no temporary file or staging folder stays, the destination, results and figures are left
as they were, and one line says so (exit status 128 + the signal's number).
"""
import argparse
import ast
import contextlib
import os
import sys
import tempfile
import time
from pathlib import Path

from agentrl import stopping
from agentrl.atomic import atomic_output
from agentrl.side_runs import DESTINATIONS, aside
from agentrl.paths import figures_dir, results_dir
from machinery.notebook_kernel import (ENGINE, KernelSilent, RunningKernel, collected_warnings, failure_detail,
                                     register_engine, runs_line, stop_kernels, warnings_line)
from machinery.make_clock import note_notebook
from machinery.notebook_cells import PARAMETERS_TAG, first_tagged, read_notebook, where
from machinery.notebook_outputs import cache_rebuilds, strip_volatile

KERNEL = 'agentrl-ch10'
SILENCE_LIMIT = 600  # seconds a cell may run with no sign of life before it is taken for hung: a training step, or
#   a run's final evaluation, takes far less even on a busy laptop, and a hang is caught in ten minutes, not hours


class NotebookFailed(RuntimeError):
    """A notebook could not be run to the end; the message names the notebook and the cell concerned."""


# --- parameters ---------------------------------------------------------------------------------------------------

def check_parameters(src, nb, parameters):
    """Refuse any parameter the notebook's `parameters` cell does not assign, naming the ones it does.

    The cell is read with papermill's inspection, as agentrl.side_runs reads the committed values: the runner accepts
    exactly the names a side run is compared on.
    """
    if not parameters:
        return
    import papermill

    index = first_tagged(nb, PARAMETERS_TAG)
    known = list(papermill.inspect_notebook(str(src)))
    unknown = [name for name in parameters if name not in known]
    if not unknown:
        return
    named = f"unknown parameter{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))}"
    if index is None:
        raise NotebookFailed(f"{src}: no cell ran: {named}; the notebook has no cell tagged '{PARAMETERS_TAG}', "
                             f"so it takes no parameters")
    raise NotebookFailed(f"{src}: no cell ran: {named}; the notebook's parameters (cell {index + 1}, tagged "
                         f"'{PARAMETERS_TAG}') are: {', '.join(known) or 'none'}")


def execute_notebook(src, dest, parameters=None, kernel=KERNEL, silence_limit=SILENCE_LIMIT):
    """Run notebook src with papermill (cwd = its folder) and atomically write the stripped result to dest.

    Raises NotebookFailed, leaving dest as it was, for an unknown parameter, for parameters with dest = src, for a
    file that is not a notebook, and for a cell that raises, kills the kernel or shows no sign of life (output, a
    heartbeat) for silence_limit s.
    A stopping.Stopped raised meanwhile (a signal, under main) ends the kernel's processes and propagates with
    `written` (whether dest was replaced) and `where` (the cell running, or None) set; dest is as it was unless written.
    Afterwards, successful or not, RunningKernel.output holds what the kernel printed outside the notebook and
    RunningKernel.warnings what the run logged, RunningKernel.runs the runs it loaded or trained.
    """
    import nbformat
    import papermill
    from jupyter_client.kernelspec import NoSuchKernel
    from nbclient.exceptions import DeadKernelError

    RunningKernel.output, RunningKernel.warnings, RunningKernel.rebuilt, RunningKernel.runs = '', [], [], []
    src, dest, parameters = Path(src), Path(dest), dict(parameters or {})
    if not src.is_file():
        raise FileNotFoundError(f'no notebook at {src}')
    if isinstance(silence_limit, bool) or not isinstance(silence_limit, (int, float)) or not silence_limit > 0:
        raise ValueError(f'silence_limit must be a positive number of seconds, not {silence_limit!r}')
    nb, reason = read_notebook(src)
    if nb is None:
        raise NotebookFailed(f'{src}: no cell ran: the file is {reason}')
    check_parameters(src, nb, parameters)
    if parameters and dest.resolve() == src.resolve():
        settings = ' '.join(f'{k}={v!r}' for k, v in parameters.items())
        raise NotebookFailed(f'{src}: no cell ran: refusing to overwrite the committed notebook with a run on '
                             f'{settings}; pass --output DIR to write the run elsewhere')
    register_engine()
    made = [folder for folder in (dest.parent, *dest.parent.parents) if not folder.exists()]  # deepest first
    written = False
    RunningKernel.cell, RunningKernel.managers = None, []
    try:
        with contextlib.ExitStack() as finishing, atomic_output(dest, '.ipynb') as tmp, aside(src.stem, parameters), \
                staged_outputs() as publish:
            before = set(stopping.children())
            try:  # AGENTRL_PROGRESS=0: no progress bars in the saved outputs (they are for a reader in JupyterLab)
                with environment(AGENTRL_PROGRESS='0'), collected_warnings(RunningKernel.warnings):
                    papermill.execute_notebook(str(src), str(tmp), parameters=parameters, kernel_name=kernel,
                                               engine_name=ENGINE, cwd=str(src.parent), progress_bar=False,
                                               log_output=False, silence_limit=silence_limit)
            except stopping.Stopped as stop:  # end the kernel and its workers before the staging folder goes
                stop.where = None if RunningKernel.cell is None else where(nb, parameters, RunningKernel.cell)
                stop_kernels(before)  # (the Client did, unless the signal came while the kernel started)
                raise
            except papermill.PapermillExecutionError as err:
                raise NotebookFailed(f'{src}: {where(nb, parameters, err.cell_index)}: '
                                     f'raised {err.ename}: {err.evalue}') from None
            except DeadKernelError as err:
                raise NotebookFailed(f'{src}: {where(nb, parameters, getattr(err, "executed_index", None))}: '
                                     f'the kernel died while running it') from None
            except KernelSilent as err:
                raise NotebookFailed(f'{src}: {where(nb, parameters, getattr(err, "executed_index", None))}: '
                                     f'silent for {err.seconds} s (no output, progress line or run finished; the '
                                     f'limit is {silence_limit:g} s), taken for hung and stopped (allow longer '
                                     f'silences with --silence-limit SECONDS)') from None
            except NoSuchKernel:
                raise NotebookFailed(f'{src}: no cell ran: no Jupyter kernel named {kernel!r} is installed') from None
            except Exception as err:  # anything else papermill or nbclient raises: still say where it happened
                index = getattr(err, 'executed_index', None)
                place = 'no cell ran' if index is None else where(nb, parameters, index)
                raise NotebookFailed(f'{src}: {place}: {type(err).__name__}: {err}') from err
            finishing.enter_context(stopping.hold())  # from here on a stop waits until dest is replaced
            nb = nbformat.read(tmp, as_version=4)
            RunningKernel.rebuilt = cache_rebuilds(nb)  # said under the summary line, kept out of the committed file
            nb = strip_volatile(nb)
            nbformat.write(nb, tmp)
            publish()  # the run succeeded: its results and figures replace the committed ones
            written = True
    except (NotebookFailed, stopping.Stopped) as err:
        if isinstance(err, stopping.Stopped):
            err.written, err.where = written, getattr(err, 'where', None)
        for folder in made:  # leave no trace, not even the --output folder made for this run
            if folder.is_dir() and not any(folder.iterdir()):
                folder.rmdir()
        raise
    return dest


def parse_value(text):
    """A parameter value from the command line: a Python literal if it parses as one, else the string."""
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def positive_seconds(text):
    """--silence-limit's value: a positive whole number of seconds."""
    try:
        seconds = int(text)
    except ValueError:
        seconds = 0
    if seconds <= 0:
        raise argparse.ArgumentTypeError(f'expected a positive whole number of seconds (the longest a cell may go '
                                         f'without output or progress, default {SILENCE_LIMIT}), got {text!r}')
    return seconds


@contextlib.contextmanager
def environment(**variables):
    """Set environment variables (inherited by the kernels started meanwhile) for the block, then restore them."""
    saved = {name: os.environ.get(name) for name in variables}
    os.environ.update(variables)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@contextlib.contextmanager
def side_run_folders(output):
    """With --output DIR, the kernels write results and figures under DIR, never over the committed ones."""
    if output is None:
        yield
        return
    chosen = {name: os.environ.get(name) or str((output / folder).resolve())
              for name, folder in (('AGENTRL_RESULTS_DIR', 'results'), ('AGENTRL_FIGURES_DIR', 'figures'))}
    print(f'results and figures of this run go to {chosen["AGENTRL_RESULTS_DIR"]} and '
          f'{chosen["AGENTRL_FIGURES_DIR"]}', flush=True)
    with environment(**chosen):
        yield


@contextlib.contextmanager
def staged_outputs():
    """The kernel writes results and figures into a staging folder; calling the yielded publish() puts them in place.

    A notebook records its results key by key as it runs, so without staging a run that fails half-way would leave
    a mix of new and old results. A failed run never calls publish(): the committed files stay as they were. The
    staging folder starts with a copy of every notebook's results, so a notebook can still read the others'. The
    kernel learns where its files will be published from the variables of side_runs.DESTINATIONS.
    """
    homes = dict(results=results_dir(), figures=figures_dir())
    with tempfile.TemporaryDirectory(prefix='agentrl-run-') as staging:
        staged = {kind: Path(staging) / kind for kind in homes}
        for folder in staged.values():
            folder.mkdir()
        copied = {}  # name -> bytes of each results file as the run found it
        if homes['results'].is_dir():
            for path in homes['results'].glob('*.json'):
                copied[path.name] = path.read_bytes()
                (staged['results'] / path.name).write_bytes(copied[path.name])

        def publish():
            for kind, home in homes.items():
                for path in sorted(p for p in staged[kind].iterdir() if p.is_file()):
                    data, target = path.read_bytes(), home / path.name
                    if kind == 'results' and copied.get(path.name) == data:
                        continue  # not written by this run: another notebook may have replaced it meanwhile
                    if target.is_file() and target.read_bytes() == data:
                        continue  # unchanged: leave the file (and its time stamp) alone
                    with atomic_output(target, path.suffix) as temporary:
                        temporary.write_bytes(data)

        with environment(AGENTRL_RESULTS_DIR=str(staged['results']), AGENTRL_FIGURES_DIR=str(staged['figures']),
                         **{DESTINATIONS[kind]: str(home) for kind, home in homes.items()}):
            yield publish


def main(argv=None):
    """Command-line entry: execute each notebook in place (or into --output), exit 1 on the first failure."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('notebooks', nargs='+', type=Path)
    parser.add_argument('-p', '--parameter', nargs=2, action='append', default=[], metavar=('NAME', 'VALUE'))
    parser.add_argument('--output', type=Path, metavar='DIR',
                        help='write executed notebooks here instead of in place (required with -p)')
    parser.add_argument('--silence-limit', type=positive_seconds, default=SILENCE_LIMIT, metavar='SECONDS',
                        help='fail when a running cell shows no sign of life (output, a progress step, a run '
                             'finished) for this long; a cell that keeps making progress is never stopped '
                             f'(default {SILENCE_LIMIT})')
    args = parser.parse_args(argv)
    parameters = {name: parse_value(value) for name, value in args.parameter}
    with stopping.raise_on_signals(), side_run_folders(args.output):
        path = None
        try:
            for path in args.notebooks:
                dest = path if args.output is None else args.output / path.name
                started = time.monotonic()
                try:
                    execute_notebook(path, dest, parameters, silence_limit=args.silence_limit)
                except (NotebookFailed, OSError) as err:
                    detail = failure_detail(RunningKernel.output, RunningKernel.warnings)
                    lines = [f'FAILED: {err}', runs_line(RunningKernel.runs, finished=False), detail]
                    print('\n'.join(filter(None, lines)), file=sys.stderr)
                    return 1
                summary = '\n'.join(filter(None, [runs_line(RunningKernel.runs, finished=True),
                                                  warnings_line(RunningKernel.output, RunningKernel.warnings)]))
                rebuilt = RunningKernel.rebuilt
                if rebuilt:
                    summary = '\n'.join(filter(None, [summary, f'  {len(rebuilt)} cached file'
                                                       f'{"s were" if len(rebuilt) > 1 else " was"} stale or damaged '
                                                       f'and rebuilt (first: {rebuilt[0]})']))
                took = time.monotonic() - started
                note_notebook(path, took, RunningKernel.runs)
                print(f'{path}: {took:.1f} s' + (f'\n{summary}' if summary else ''), flush=True)
        except stopping.Stopped as stop:
            RunningKernel.stopped = True
            lines = [stopped_line(stop, path, dest if path else None), runs_line(RunningKernel.runs, finished=False)]
            print('\n'.join(filter(None, lines)), file=sys.stderr, flush=True)
            return stop.exit_code
    return 0


def stopped_line(stop, path, dest):
    """The one line a stopped run prints: the signal, the notebook and what was left as it was."""
    if path is None:
        return f'STOPPED by {stop.name} before any notebook ran: nothing was written'
    if getattr(stop, 'written', False):
        return f'STOPPED by {stop.name} just after {path} was executed and written to {dest}'
    at = f' in {stop.where}' if getattr(stop, 'where', None) else ''
    kept = f'{dest} and the results and figures' if dest == path else f'{dest} and its results and figures'
    return (f'STOPPED by {stop.name}: {path} was interrupted{at}; {kept} are as they were, its kernel and '
            'workers ended')


if __name__ == '__main__':
    status = main()
    if RunningKernel.stopped:  # end by the signal itself (so a calling shell or make stops too), skipping the interpreter's
        stopping.die_by(status - 128)  # teardown, which would report the stopped kernel client's pending tasks
    sys.exit(status)
