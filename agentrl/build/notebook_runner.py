"""Execute notebooks headlessly with papermill and commit their outputs only when they succeed.

Usage: python -m agentrl.build.notebook_runner NOTEBOOK.ipynb [...] [-p NAME VALUE ...] [--output DIR]

Each notebook runs into a temporary file beside its destination; what changes from run to run
(papermill and nbclient timings, paths, the injected cell's random id) is stripped; only then is the
destination replaced. A failing notebook leaves the destination untouched, and the command exits 1
naming the notebook and the failing cell.
"""
import argparse
import ast
import sys
from pathlib import Path

from agentrl.atomic import atomic_output

KERNEL = 'agentrl-ch10'
VOLATILE_CELL_METADATA = ('papermill', 'execution', 'ExecuteTime', 'collapsed', 'scrolled')


class NotebookFailed(RuntimeError):
    """A notebook raised while executing; the message names the notebook and the failing cell."""


def strip_volatile(nb):
    """Remove run-dependent metadata from an executed notebook and join split stream outputs, in place -> nb."""
    nb.metadata.pop('papermill', None)
    for cell in nb.cells:
        if cell.cell_type == 'code':
            cell.outputs = coalesce_streams(cell.outputs)
        for key in VOLATILE_CELL_METADATA:
            cell.metadata.pop(key, None)
        if 'injected-parameters' in cell.metadata.get('tags', []):
            cell['id'] = 'injected-parameters'  # papermill gives it a random id on every run
    return nb


def coalesce_streams(outputs):
    """Join consecutive outputs of the same stream: how the kernel splits printed text depends on timing."""
    joined = []
    for out in outputs:
        if out.output_type == 'stream' and joined and joined[-1].output_type == 'stream' and joined[-1].name == out.name:
            joined[-1].text += out.text
        else:
            joined.append(out)
    return joined


def execute_notebook(src, dest, parameters=None, kernel=KERNEL):
    """Run notebook src with papermill (cwd = its folder) and atomically write the stripped result to dest."""
    import nbformat
    import papermill

    src, dest = Path(src), Path(dest)
    if not src.is_file():
        raise FileNotFoundError(f'no notebook at {src}')
    with atomic_output(dest, '.ipynb') as tmp:
        try:
            papermill.execute_notebook(str(src), str(tmp), parameters=parameters or {}, kernel_name=kernel,
                                       cwd=str(src.parent), progress_bar=False, log_output=False)
        except papermill.PapermillExecutionError as err:
            first_line = err.source.strip().splitlines()[0] if err.source.strip() else ''
            raise NotebookFailed(f'{src}: cell {err.cell_index} (execution count {err.exec_count}, '
                                 f'starting {first_line!r}) raised {err.ename}: {err.evalue}') from None
        nb = strip_volatile(nbformat.read(tmp, as_version=4))
        nbformat.write(nb, tmp)
    return dest


def parse_value(text):
    """A parameter value from the command line: a Python literal if it parses as one, else the string."""
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def main(argv=None):
    """Command-line entry: execute each notebook in place (or into --output), exit 1 on the first failure."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('notebooks', nargs='+', type=Path)
    parser.add_argument('-p', '--parameter', nargs=2, action='append', default=[], metavar=('NAME', 'VALUE'))
    parser.add_argument('--output', type=Path, help='write executed notebooks here instead of in place')
    args = parser.parse_args(argv)
    parameters = {name: parse_value(value) for name, value in args.parameter}
    for path in args.notebooks:
        dest = path if args.output is None else args.output / path.name
        print(f'executing {path}', flush=True)
        try:
            execute_notebook(path, dest, parameters)
        except (NotebookFailed, FileNotFoundError) as err:
            print(f'FAILED: {err}', file=sys.stderr)
            return 1
    return 0


if __name__ == '__main__':
    sys.exit(main())

