"""Read a notebook and name its cells as a reader counts them: which cell a papermill run was executing when it
failed."""
from pathlib import Path

PARAMETERS_TAG = 'parameters'
INJECTED_TAG = 'injected-parameters'
ERROR_MARKER_TAG = 'papermill-error-cell-tag'  # cells papermill adds to a failed output and drops on the next run


def read_notebook(path):
    """(the notebook at path as an nbformat node, None), or (None, why not) if the file is not a valid notebook."""
    import nbformat

    try:
        nb = nbformat.reads(Path(path).read_bytes().decode('utf-8'), as_version=4)
        nbformat.validate(nb)
    except UnicodeDecodeError as err:
        return None, f'not text ({err.reason} at byte {err.start})'
    except nbformat.reader.NotJSONError:
        return None, 'not valid JSON'
    except (nbformat.ValidationError, ValueError, KeyError, TypeError, AttributeError) as err:
        return None, f'not a valid notebook ({str(err).splitlines()[0] if str(err) else type(err).__name__})'
    return nb, None


def tagged(cell, tag):
    return tag in cell.metadata.get('tags', [])


def first_tagged(nb, tag):
    """Index of the first cell carrying tag, or None."""
    return next((i for i, cell in enumerate(nb.cells) if tagged(cell, tag)), None)


def ordinal(n):
    """1 -> '1st', 2 -> '2nd', 11 -> '11th', 23 -> '23rd'."""
    suffix = 'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')
    return f'{n}{suffix}'


def describe_cell(nb, index):
    """A cell as a reader finds it: "cell 7 (the 4th code cell), starting 'history = ...'" (1-based counts)."""
    cell = nb.cells[index]
    lines = [line.strip() for line in cell.source.splitlines() if line.strip()]
    start = lines[0] if lines else ''
    start = start if len(start) <= 60 else start[:57] + '...'
    if cell.cell_type != 'code':
        return f'cell {index + 1} (a {cell.cell_type} cell), starting {start!r}'
    nth_code = sum(c.cell_type == 'code' for c in nb.cells[:index + 1])
    return f'cell {index + 1} (the {ordinal(nth_code)} code cell), starting {start!r}'


def executed_order(nb, parameters):
    """Where each cell papermill runs comes from: an index into nb.cells, or None for the cell it injects.

    Mirrors papermill: it drops the error-marker cells of an earlier failed run and, given parameters, replaces
    an earlier injected cell or else inserts one right after the `parameters` cell.
    """
    order = list(range(len(nb.cells)))
    if parameters:
        injected, params = first_tagged(nb, INJECTED_TAG), first_tagged(nb, PARAMETERS_TAG)
        if injected is not None:
            order[injected] = None
        else:
            order.insert(0 if params is None else params + 1, None)
    return [i for i in order if i is None or not tagged(nb.cells[i], ERROR_MARKER_TAG)]


def where(nb, parameters, executed_index):
    """The reader's name for the cell papermill ran as executed_index (None: no cell could be identified)."""
    order = executed_order(nb, parameters)
    if executed_index is None or not 0 <= executed_index < len(order):
        return 'an unidentified cell'
    original = order[executed_index]
    if original is not None:
        return describe_cell(nb, original)
    params = first_tagged(nb, PARAMETERS_TAG)
    after = f' after cell {params + 1}' if params is not None else ''
    return f'the parameters cell papermill injected{after}'
