"""Every Markdown table a reader meets has, in each row, as many cells as its header.

A row with a cell too few or too many is not a cosmetic slip. The forge shows the row shifted (a run time lands
under "key figure"), and mistune, which renders the offline site and nbconvert's pages, drops the whole table into
a paragraph of pipes. The documents checked are the ones a reader opens: README.md, MAINTAINING.md,
REPRODUCTION.md, TINYAGENT.md, reports/*.md, the calibration folders' READMEs, and every notebook's Markdown cells
and Markdown outputs.

Cells are split as GitHub's Markdown and mistune split them: at every pipe not escaped by a backslash, including a
pipe inside backticks or a formula (both renderers cut the cell there; `\\|` is how a table writes a pipe).
"""
import re

import nbformat
import pytest

from agentrl.paths import MAINTAINING, NOTEBOOKS, README, REPO, REPRODUCTION
from machinery import mutation_report

FENCE = re.compile(r'^ {0,3}(`{3,}|~{3,})')
DELIMITER = re.compile(r'^ {0,3}\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*$')
# a line that starts another block ends a table (GFM); any other non-blank line is one more row of it
BLOCK_START = re.compile(r'^ {0,3}(#{1,6}\s|>|[-*+]\s|\d{1,9}[.)]\s|<)')

# Broken tables in hand-written text that is not this file's owners' to edit, each (document, its header row).
# The test fails once one of them is mended and still listed here, so the list can only shrink.
KNOWN_BROKEN = set()  # (document, header row) of a table known to be broken and awaiting its fix; none today


def split_row(line):
    """The cells of one table row: split at every pipe a backslash does not escape; one outer pipe on each side is
    the row's frame, not a cell boundary."""
    text = line.strip()
    cells, current, i = [], '', 0
    while i < len(text):
        if text[i] == '\\' and i + 1 < len(text):
            current += text[i:i + 2]
            i += 2
            continue
        if text[i] == '|':
            cells.append(current)
            current = ''
        else:
            current += text[i]
        i += 1
    cells.append(current)
    if text.startswith('|'):
        cells = cells[1:]
    if len(text) > 1 and text.endswith('|') and not text.endswith('\\|'):
        cells = cells[:-1]
    return [cell.strip() for cell in cells]


def tables(text):
    """(line number of the header, header row, header cells, delimiter cells, [(line number, row, cells)]) of each
    table in text; fenced code blocks are skipped."""
    lines = text.split('\n')
    fence, i = None, 0
    while i < len(lines):
        line = lines[i]
        opened = FENCE.match(line)
        if opened:
            mark = opened.group(1)
            if fence is None:
                fence = mark
            elif mark[0] == fence[0] and len(mark) >= len(fence) and not line.strip().strip(mark[0]):
                fence = None
            i += 1
            continue
        if (fence is None and '|' in line and i + 1 < len(lines) and '|' in lines[i + 1]
                and DELIMITER.match(lines[i + 1])):
            rows, j = [], i + 2
            while j < len(lines) and lines[j].strip() and not BLOCK_START.match(lines[j]) \
                    and not FENCE.match(lines[j]):
                rows.append((j + 1, lines[j], split_row(lines[j])))
                j += 1
            yield i + 1, line.strip(), split_row(line), split_row(lines[i + 1]), rows
            i = j
            continue
        i += 1


def broken_rows(text):
    """[(line number, cells wanted, cells found, row text, header row)] of every row whose count of cells differs
    from its table's header, the delimiter row included."""
    found = []
    for number, head, header, delimiter, rows in tables(text):
        if len(delimiter) != len(header):
            found.append((number + 1, len(header), len(delimiter), '|' + '|'.join(delimiter) + '|', head))
        found += [(at, len(header), len(cells), row, head) for at, row, cells in rows if len(cells) != len(header)]
    return found


def documents():
    """{file: {part: Markdown text}} of everything a reader opens that holds Markdown; a notebook's parts are its
    Markdown cells and Markdown outputs, a Markdown file is one part."""
    paths = [README, MAINTAINING, REPRODUCTION, REPO / 'TINYAGENT.md', *sorted((REPO / 'reports').glob('*.md')),
             *sorted((REPO / 'calibration').glob('**/README.md'))]
    found = {str(path.relative_to(REPO)): {'': path.read_text(encoding='utf-8')} for path in paths}
    for path in sorted(NOTEBOOKS.glob('*.ipynb')):
        parts = found.setdefault(f'notebooks/{path.name}', {})
        for index, cell in enumerate(nbformat.read(path, as_version=4).cells):
            if cell.cell_type == 'markdown':
                parts[f' cell {index}'] = cell.source
            for k, out in enumerate(cell.get('outputs', [])):
                markdown = out.get('data', {}).get('text/markdown') if 'data' in out else None
                if markdown:
                    parts[f' cell {index} output {k}'] = markdown
    return found


DOCUMENTS = documents()


def test_the_documents_are_all_there():
    # a glob that silently matched nothing would pass every check below
    for expected in ('README.md', 'MAINTAINING.md', 'REPRODUCTION.md', 'TINYAGENT.md', 'reports/mutation.md',
                     'calibration/README.md', 'notebooks/14_real_model.ipynb'):
        assert expected in DOCUMENTS, expected
    assert any(' output ' in part for parts in DOCUMENTS.values() for part in parts), 'no Markdown output was read'
    assert sum(1 for parts in DOCUMENTS.values() for text in parts.values() for _ in tables(text)) > 50


@pytest.mark.parametrize('name', sorted(DOCUMENTS))
def test_every_row_has_the_headers_number_of_cells(name):
    known = {head for document, head in KNOWN_BROKEN if document == name}
    broken = [(part, *row) for part, text in DOCUMENTS[name].items() for row in broken_rows(text)]
    unexpected = [b for b in broken if b[5] not in known]
    assert not unexpected, '\n'.join(f'{name}{part}:{line}: {found} cells where the header has {wanted}: {row[:100]}'
                                     for part, line, wanted, found, row, _ in unexpected)
    mended = known - {b[5] for b in broken}
    assert not mended, f'{name}: this table is mended, so take it out of KNOWN_BROKEN: {sorted(mended)[0][:100]}'


def test_a_short_row_and_a_long_row_are_found():
    text = '| a | b | c |\n|---|---|---|\n| 1 | 2 | 3 |\n| 1 | 2 |\n| 1 | 2 | 3 | 4 |\n'
    assert [(line, wanted, found) for line, wanted, found, _, _ in broken_rows(text)] == [(4, 3, 2), (5, 3, 4)]


def test_a_delimiter_row_that_disagrees_with_its_header_is_found():
    assert [(line, wanted, found) for line, wanted, found, _, _ in broken_rows('| a | b |\n|---|\n| 1 | 2 |\n')] \
        == [(2, 2, 1)]


def test_escaped_pipes_do_not_split_but_pipes_in_backticks_do():
    assert split_row(r'| KL(p \|\| q) | x |') == [r'KL(p \|\| q)', 'x']
    assert split_row('| `a | b` | x |') == ['`a', 'b`', 'x']  # GitHub and mistune cut a code span here too
    assert split_row('a | b') == ['a', 'b']  # outer pipes are optional


def test_a_line_after_the_table_belongs_to_it_until_a_blank_line():
    text = '| a | b |\n|---|---|\n| 1 | 2 |\nmore words\n\n| 1 |\n'
    assert [(line, found) for line, _, found, _, _ in broken_rows(text)] == [(4, 1)]
    assert not broken_rows('| a | b |\n|---|---|\n| 1 | 2 |\n## A heading\n')


def test_tables_in_fenced_code_are_not_tables():
    assert not broken_rows('```\n| a | b |\n|---|---|\n| 1 |\n```\n')
    assert broken_rows('```\ncode\n```\n| a | b |\n|---|---|\n| 1 |\n')


def test_the_mutation_report_escapes_a_pipe_in_a_slip():
    # the hand-mutant table quotes each slip as written, and a slip may say KL(ref || pi)
    hand = {'commit': 'abc1234', 'jobs': 2, 'seconds': 60.0, 'clean_seconds': 30.0,
            'mutants': [{'path': 'agentrl/core/kl.py', 'slip': 'an estimator of KL(ref || pi)', 'status': 'killed',
                         'test': 'tests/test_math_core.py::test_x[a|b]'}]}
    lines = mutation_report.hand_lines(hand)
    assert not broken_rows('\n'.join(lines))
    assert any('KL(ref \\|\\| pi)' in line for line in lines)
