"""What a reader sees in every notebook: clean committed outputs and the opening and closing scaffolding."""
import re

import nbformat
import pytest

from conftest import NOTEBOOKS

STEMS = sorted(path.stem for path in NOTEBOOKS.glob('[0-9][0-9]_*.ipynb'))
# notebook -> (link to the previous one, link to the next one) that its closing cell must hold; the first notebook
# links back to the README, the last one on to the report
NEIGHBOURS = {stem: (f'{STEMS[i - 1]}.ipynb' if i else '../README.md',
                     f'{STEMS[i + 1]}.ipynb' if i + 1 < len(STEMS) else '../REPRODUCTION.md')
              for i, stem in enumerate(STEMS)}
NEGATIVE_ZERO = re.compile(r'(?<![\d.])-0\.0+(?![0-9])')  # -0.0, -0.0000, ... but not -0.0001
INTERNAL_WORDS = re.compile(r'\[\s*(NOT )?held\]|\bthe tests? asserts?\b|\[\s*not run\]', re.IGNORECASE)
WIDTH = 110


def notebook(name):
    return nbformat.read(NOTEBOOKS / f'{name}.ipynb', as_version=4)


def shown_texts(nb):
    """(cell index, kind, text) of what a reader sees: printed streams, rendered Markdown, and plain-text results
    that have no richer form."""
    for index, cell in enumerate(nb.cells):
        for out in cell.get('outputs', []):
            if out.output_type == 'stream':
                yield index, 'stream', out.text
            elif out.output_type in ('display_data', 'execute_result'):
                data = out.get('data', {})
                if 'text/markdown' in data:
                    yield index, 'markdown', data['text/markdown']
                elif 'text/html' in data:
                    yield index, 'html', data['text/html']
                elif 'text/plain' in data and 'image/png' not in data:
                    yield index, 'plain', data['text/plain']


@pytest.mark.parametrize('name', NEIGHBOURS)
def test_outputs_have_no_negative_zero_and_no_internal_vocabulary(name):
    for index, kind, text in shown_texts(notebook(name)):
        assert not NEGATIVE_ZERO.search(text), f'{name}: cell {index} shows a negative zero in its {kind} output'
        assert not INTERNAL_WORDS.search(text), f'{name}: cell {index} shows test vocabulary in its {kind} output'


@pytest.mark.parametrize('name', NEIGHBOURS)
def test_printed_lines_fit_in_110_columns(name):
    for index, kind, text in shown_texts(notebook(name)):
        if kind in ('stream', 'plain'):
            wide = [line for line in text.splitlines() if len(line) > WIDTH]
            assert not wide, f'{name}: cell {index} prints lines wider than {WIDTH} columns: {wide[:1]}'


@pytest.mark.parametrize('name', NEIGHBOURS)
def test_every_code_cell_ran_without_error(name):
    for index, cell in enumerate(notebook(name).cells):
        if cell.cell_type == 'code':
            assert not [o for o in cell.outputs if o.output_type == 'error'], f'{name}: cell {index} failed'


@pytest.mark.parametrize('name', NEIGHBOURS)
def test_opening_says_what_it_shows_needs_and_how_long_it_runs(name):
    opening = notebook(name).cells[0]
    assert opening.cell_type == 'markdown'
    for says, labels in (('what it shows', ('**Shows**', 'This notebook')),
                         ('what it needs', ('**Needs**', '**What it needs.**')),
                         ('how long it runs', ('**Runs in**', '**How long.**'))):
        assert any(label in opening.source for label in labels), f'{name}: the opening cell does not say {says}'
    assert 'RUNTIME' not in opening.source, f'{name}: the measured runtime was never filled in'


# a duration written into prose: "10 s", "about 5 s", "2 min", "15 to 20 minutes", "a quarter of an hour"
TYPED_DURATION = re.compile(r'\b\d+(?:[.,]\d+)?\s*(?:s|sec|seconds?|min|minutes?|h|hours?)\b|quarter of an hour',
                            re.IGNORECASE)


def time_row(source):
    """The text of the opening's '**Runs in**' row ('' if it has none)."""
    return next((line for line in source.splitlines() if '**Runs in**' in line), '')


def test_typed_duration_pattern_catches_the_old_estimates():
    for typed in ('about 5 s on a laptop CPU', 'under 10 s through the runner', '2 min here', '15 to 20 minutes',
                  'a quarter of an hour or more'):
        assert TYPED_DURATION.search(typed), typed
    assert not TYPED_DURATION.search("the README's notebook map gives its time; 600 Adam steps, 40-step runs")


@pytest.mark.parametrize('name', NEIGHBOURS)
def test_the_opening_types_no_run_time_and_points_to_the_measured_one(name):
    """A time typed into a notebook drifts from the machine and the code; the measured times live in the README's
    notebook map (and notebook 14 prints its own), so the opening only says what takes the time."""
    row = time_row(notebook(name).cells[0].source)
    assert row, f'{name}: the opening has no **Runs in** row'
    assert not TYPED_DURATION.search(row), f'{name}: the opening types a run time: {TYPED_DURATION.search(row)[0]!r}'
    assert 'notebook map' in row, f"{name}: the opening does not point to the README's notebook map for its time"


@pytest.mark.parametrize('name', NEIGHBOURS)
def test_closing_summarises_and_links_both_neighbours(name):
    """The notebook ends with its '## Summary' section: a Markdown cell, optionally the code cell that writes the
    findings from the record, and the links to both neighbours, last."""
    cells = notebook(name).cells
    summaries = [i for i, cell in enumerate(cells) if cell.cell_type == 'markdown' and '## Summary' in cell.source]
    assert summaries, f'{name}: no "## Summary" section'
    closing = cells[summaries[-1]:]
    assert len(closing) <= 3 and closing[-1].cell_type == 'markdown', \
        f'{name}: the summary section should close the notebook and end on its links'
    links = ''.join(cell.source for cell in closing if cell.cell_type == 'markdown')
    previous, following = NEIGHBOURS[name]
    assert f']({previous})' in links and f']({following})' in links, \
        f'{name}: the closing section does not link {previous} and {following}'


@pytest.mark.parametrize('name', STEMS)
def test_no_sentence_is_said_twice_in_one_cell(name):
    """A sentence pasted twice into one written Markdown cell reads as a slip. (Generated readings may repeat a
    reading for related claims on purpose, so outputs are not checked.)"""
    texts = [(index, 'markdown', cell.source) for index, cell in enumerate(notebook(name).cells)
             if cell.cell_type == 'markdown']
    for index, kind, text in texts:
        sentences = [' '.join(s.split()) for s in re.split(r'(?<=[.!?])\s+', text) if len(s.split()) >= 8]
        repeated = {s for s in sentences if sentences.count(s) > 1}
        assert not repeated, f'{name} cell {index} ({kind}) repeats: {sorted(repeated)[0][:120]}'
