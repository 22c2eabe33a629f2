"""The #@save convention: every function a notebook saves is, character for character, the package's source."""
import ast
import inspect
import textwrap
from pathlib import Path

import nbformat
import pytest

import agentrl as arl

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / 'notebooks').glob('[0-9][0-9]_*.ipynb'))


def saved_definitions(path):
    """[(notebook, name, source)] for every top-level def or class in the notebook's '#@save' cells."""
    found = []
    for cell in nbformat.read(path, as_version=4).cells:
        if cell.cell_type != 'code' or not cell.source.startswith('#@save'):
            continue
        code = cell.source.split('\n', 1)[1] if '\n' in cell.source else ''
        for node in ast.parse(code).body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                found.append((path.name, node.name, ast.get_source_segment(code, node)))
            elif not isinstance(node, (ast.Import, ast.ImportFrom)):
                pytest.fail(f'{path.name}: a #@save cell may hold only imports and definitions, '
                            f'found {type(node).__name__} at line {node.lineno}')
    return found


SAVED = [item for path in NOTEBOOKS for item in saved_definitions(path)]


def test_notebooks_save_something():
    names = {name for _, name, _ in SAVED}
    assert {'estimator_moments', 'expected_loss_grad', 'kl_grads', 'kl_estimate'} <= names


@pytest.mark.parametrize('notebook,name,source', SAVED, ids=[f'{nb}:{name}' for nb, name, _ in SAVED])
def test_saved_cell_equals_package_source(notebook, name, source):
    assert hasattr(arl, name), f'{notebook} saves {name}, but agentrl does not export it'
    package_source = textwrap.dedent(inspect.getsource(getattr(arl, name))).rstrip('\n')
    assert source.rstrip('\n') == package_source, (
        f'{notebook}: the #@save cell of {name} differs from {inspect.getsourcefile(getattr(arl, name))}')
