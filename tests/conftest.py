"""Shared fixtures: the chapter text, and notebooks executed once per test session into a temporary folder."""
import os
from pathlib import Path

import pytest

from agentrl.report import CHAPTER, chapter_blocks, collapse

REPO = Path(__file__).resolve().parents[1]
NOTEBOOKS = REPO / 'notebooks'


def chapter_outputs():
    """{section number like '10.3': [output lines]} from the chapter's 'Output:' blocks, white space collapsed."""
    if not CHAPTER.is_file():
        pytest.fail(f'the chapter text is missing: expected it at {CHAPTER}')
    return {section: [line for block in blocks for line in block] for section, blocks in chapter_blocks().items()}


def stream_lines(nb):
    """Every line a notebook printed to stdout, white space collapsed."""
    lines = []
    for cell in nb.cells:
        for out in cell.get('outputs', []):
            if out.output_type == 'stream' and out.name == 'stdout':
                lines.extend(collapse(line) for line in out.text.splitlines() if line.strip())
    return lines


class NotebookRuns:
    """Executes notebooks on demand into a temporary folder, once per (notebook, parameters), and caches them."""

    def __init__(self, folder):
        self.folder = folder
        self.done = {}

    def run(self, name, **parameters):
        """The executed notebook `name` (file stem) with the given papermill parameters, as an nbformat node."""
        import nbformat

        from agentrl.notebook_runner import execute_notebook

        key = (name, tuple(sorted(parameters.items())))
        if key not in self.done:
            tag = '-'.join(f'{k}{v}' for k, v in sorted(parameters.items())) or 'default'
            dest = self.folder / tag / f'{name}.ipynb'
            execute_notebook(NOTEBOOKS / f'{name}.ipynb', dest, parameters)
            self.done[key] = nbformat.read(dest, as_version=4)
        return self.done[key]


@pytest.fixture(scope='session')
def figures_tmp(tmp_path_factory):
    """A temporary figures folder that executed notebooks write to instead of the repository's figures/."""
    folder = tmp_path_factory.mktemp('figures')
    old = os.environ.get('AGENTRL_FIGURES_DIR')
    os.environ['AGENTRL_FIGURES_DIR'] = str(folder)
    yield folder
    if old is None:
        os.environ.pop('AGENTRL_FIGURES_DIR', None)
    else:
        os.environ['AGENTRL_FIGURES_DIR'] = old


@pytest.fixture(scope='session')
def notebook_runs(tmp_path_factory, figures_tmp):
    """Session-wide executor of notebooks into a temporary folder (figures go to figures_tmp)."""
    return NotebookRuns(tmp_path_factory.mktemp('executed'))
