"""Side runs: a notebook executed with other parameters than its committed ones writes its results and figures aside.

However the notebook is executed (papermill, nbclient, JupyterLab after an edit of its `parameters` cell, the
project's runner), the first code cell after its parameters calls

    side_runs.route_outputs(NOTEBOOK, seed=seed)

with every parameter the notebook has. With the committed values (those the notebook file's `parameters` cell assigns,
read with papermill's inspection) it does nothing and prints nothing. With any other value the process becomes a side run: whatever would have gone to the
committed results/ or figures/ goes to side_runs_dir()/<notebook>-<name>=<value>/ instead (a folder chosen
explicitly, such as the runner's --output or $AGENTRL_RESULTS_DIR, is kept), and one line says where.
"""
import ast
import contextlib
import os
import re
from pathlib import Path

from agentrl import paths

# Set by the runner while a kernel writes into its staging folder: where the staged files will be published.
DESTINATIONS = {'results': 'AGENTRL_RESULTS_DESTINATION', 'figures': 'AGENTRL_FIGURES_DESTINATION'}


# Parameters that say how a notebook computes, not what: each run trains single-threaded in its worker, so the number
# of workers never changes a result, and another value is not a side run.
HOW_NOT_WHAT = frozenset({'processes'})


def committed_parameters(notebook, folder=None):
    """{name: value} as the `parameters` cell of notebooks/<notebook>.ipynb assigns them, in order.

    The file on disk is the committed one: an edit of the cell inside a running kernel, or a run with papermill's -p,
    leaves it alone. A notebook that is not there raises KeyError naming the notebooks that are.
    """
    import papermill  # the kernel of every notebook has it; imported here so the package loads without it

    folder = Path(folder or paths.NOTEBOOKS)
    path = folder / f'{notebook}.ipynb'
    if not path.is_file():
        known = sorted(p.stem for p in folder.glob('*.ipynb') if not p.name.startswith('.'))  # not a run's temporary
        raise KeyError(f'no notebook {notebook!r} in {shown(folder)}/ to read committed parameters from; there are: '
                       f'{", ".join(known) or "none"}')
    return {name: ast.literal_eval(found['default'])
            for name, found in papermill.inspect_notebook(str(path)).items()}


def changed_parameters(notebook, values, committed=None):
    """{name: value} of the values that differ from the notebook's committed ones (HOW_NOT_WHAT's never do).

    Compared by repr, so 1.0 differs from 1 and a tuple from a list; a notebook that is not in notebooks/ has no
    committed values, so every value given counts as changed.
    """
    if committed is None:
        try:
            committed = committed_parameters(notebook)
        except KeyError:
            committed = {}
    return {name: value for name, value in values.items()
            if name not in HOW_NOT_WHAT and (name not in committed or repr(value) != repr(committed[name]))}


def folder_name(notebook, changed):
    """'02_estimator_moments-seed=1': the notebook and its changed parameters, as a folder name."""
    parts = [f'{name}={re.sub(r"[^A-Za-z0-9.,+_-]", "", repr(value))}' for name, value in changed.items()]
    return '-'.join([notebook, *parts])


def side_folder(notebook, changed):
    """The folder of a side run: side_runs_dir()/folder_name(notebook, changed)."""
    return paths.side_runs_dir() / folder_name(notebook, changed)


@contextlib.contextmanager
def aside(notebook, parameters):
    """Within the block, this process is a side run if parameters differ from the notebook's committed ones."""
    changed = changed_parameters(notebook, parameters)
    before = paths.side_folder()
    paths.use_side_folder(side_folder(notebook, changed) if changed else before)
    try:
        yield
    finally:
        paths.use_side_folder(before)


def shown(path):
    """A path as the one line prints it: relative to the repository when inside it."""
    path = Path(path).resolve()
    return str(path.relative_to(paths.REPO)) if path.is_relative_to(paths.REPO) else str(path)


def destinations():
    """(results folder, figures folder) where this process's results and figures end up (after staging, if any)."""
    return tuple(Path(os.environ.get(DESTINATIONS[kind]) or default())
                 for kind, default in (('results', paths.results_dir), ('figures', paths.figures_dir)))


def route_outputs(notebook, **values):
    """Make this process a side run if the values differ from the notebook's committed parameters.

    Pass every parameter of the notebook by name. With the committed values: no side run, nothing printed (and
    nothing returned, so the call can end a cell). Otherwise one line names the changed values and where the
    results and figures go.
    """
    committed = committed_parameters(notebook)
    if list(values) != list(committed):
        raise TypeError(f'route_outputs({notebook!r}, ...) got the parameters {", ".join(values) or "none"}; '
                        f'pass exactly the notebook\'s parameters, in order: {", ".join(committed)}')
    changed = changed_parameters(notebook, values, committed)
    if not changed:
        paths.use_side_folder(None)
        return
    paths.use_side_folder(side_folder(notebook, changed))
    results, figures = destinations()
    if results.parent == figures.parent and (results.name, figures.name) == ('results', 'figures'):
        place = f'{shown(results.parent)}/ (results/, figures/)'
    else:
        place = f'{shown(results)} and {shown(figures)}'
    now = ', '.join(f'{name}={value!r}' for name, value in changed.items())
    before = ', '.join(f'{name}={committed[name]!r}' for name in changed)
    print(f'side run ({now}; committed: {before}): results and figures go to {place}')
