"""A static site of the companion: every notebook as committed, REPRODUCTION.md and an index, readable offline.

Usage: python -m agentrl.build.site [--out site]

Pages are rendered with nbconvert from the committed notebooks (nothing is executed), so the site shows exactly
what the repository holds. Links between notebooks (`02_estimator_moments.ipynb`), to `../README.md` and to
`../REPRODUCTION.md` are rewritten to the matching page; figures referenced from Markdown are copied beside the
pages; outputs' figures are embedded in the page itself. The folder is written next to itself and swapped in
whole, so an interrupted build leaves the previous site (or none), never half of one.
"""
import argparse
import html
import re
import shutil
import sys
from pathlib import Path

from agentrl.build.registry import BEYOND, SECTIONS
from agentrl.paths import REPO

INDEX, REPORT = 'index.html', 'reproduction.html'
LINK = re.compile(r'(?P<attr>href|src)="(?P<target>[^"#?]*)(?P<rest>[#?][^"]*)?"')


def pages():
    """(notebook stem, section label, title) for every notebook, in reading order."""
    listed = [(s.notebook, f'§{s.number}', s.title) for s in SECTIONS]
    listed += [(stem, 'beyond the book', title) for stem, title, _ in BEYOND]
    return listed


def first_line(nb):
    """The line a reader sees first: the 'Shows' row of the opening table, else the first sentence of prose."""
    for cell in nb.cells:
        if cell.cell_type != 'markdown':
            continue
        for line in cell.source.splitlines():
            match = re.match(r'\|\s*\*\*Shows\*\*\s*\|\s*(.+?)\s*\|\s*$', line)
            if match:
                return match.group(1)
        sentences = [sentence for paragraph in re.split(r'\n\s*\n', cell.source)
                     for text in [' '.join(paragraph.split())]
                     if text and not text.startswith(('#', '|', '*', '>', '-', '<', '$$'))
                     for sentence in re.split(r'(?<=[.!?])\s', text)]
        about = [sentence for sentence in sentences if sentence.startswith('This notebook')]
        if about or sentences:
            return (about or sentences)[0].rstrip(':')
    return ''


def rewrite_links(page_html, stems):
    """Point links at pages and copied figures instead of .ipynb/.md files -> (html, figure file names used)."""
    figures = set()

    def fix(match):
        target = match.group('target')
        rest = match.group('rest') or ''
        name = target.rsplit('/', 1)[-1]
        if target.endswith('.ipynb') and name[:-len('.ipynb')] in stems:
            target = name[:-len('.ipynb')] + '.html'
        elif name == 'README.md':
            target = INDEX
        elif name == 'REPRODUCTION.md':
            target = REPORT
        elif '/figures/' in f'/{target}' and not target.startswith(('http:', 'https:', 'data:')):
            figures.add(name)
            target = f'figures/{name}'
        return f'{match.group("attr")}="{target}{rest}"'
    return LINK.sub(fix, page_html), figures


def markdown_page(text, title):
    """A notebook holding one Markdown cell (rendered by the same exporter as the notebooks)."""
    import nbformat
    nb = nbformat.v4.new_notebook()
    nb.cells.append(nbformat.v4.new_markdown_cell(text))
    nb.metadata['title'] = title
    return nb


def index_markdown(entries):
    """The index page: what the site is, then one row per notebook (an HTML table: Markdown tables break on '|'
    inside formulas), then the report."""
    rows = ''.join(f'<tr><td>{label}</td><td><a href="{stem}.ipynb">{html.escape(title)}</a></td>'
                   f'<td>{html.escape(summary)}</td></tr>' for stem, label, title, summary in entries)
    return '\n'.join([
        '# KL, entropy and regularisation: the runnable companion to chapter 10', '',
        'Each page is a notebook of the repository as committed (outputs included), rendered without running it. '
        'Sections 10.1-10.8 come first, then what goes beyond the book.', '',
        f'<table><thead><tr><th>section</th><th>page</th><th>what it shows</th></tr></thead><tbody>{rows}</tbody></table>',
        '', "The chapter's tables beside ours: [REPRODUCTION.md](../REPRODUCTION.md).", '',
        'Built by `make html` from the committed notebooks; `make` regenerates the notebooks themselves.'])


def build(out):
    """Render the site into folder `out` (replaced whole) -> list of the page files written."""
    import nbformat
    from nbconvert import HTMLExporter

    exporter = HTMLExporter(template_name='lab')
    out = Path(out)
    stems = {stem for stem, _, _ in pages()}
    staging = out.with_name(f'.{out.name}.building')
    if staging.exists():
        shutil.rmtree(staging)
    (staging / 'figures').mkdir(parents=True)
    figures, written, entries = set(), [], []
    for stem, label, title in pages():
        path = REPO / 'notebooks' / f'{stem}.ipynb'
        if not path.is_file():
            raise FileNotFoundError(f'{path}: listed in agentrl/build/registry.py but missing')
        nb = nbformat.read(path, as_version=4)
        nb.metadata['title'] = f'{label} · {title}'
        entries.append((stem, label, title, first_line(nb)))
        body, used = rewrite_links(exporter.from_notebook_node(nb)[0], stems)
        figures |= used
        (staging / f'{stem}.html').write_text(body)
        written.append(f'{stem}.html')
    report = REPO / 'REPRODUCTION.md'
    for name, nb in ((REPORT, markdown_page(report.read_text(), 'The chapter beside ours')),
                     (INDEX, markdown_page(index_markdown(entries), 'Chapter 10 companion'))):
        body, used = rewrite_links(exporter.from_notebook_node(nb)[0], stems)
        figures |= used
        (staging / name).write_text(body)
        written.append(name)
    for name in sorted(figures):
        source = REPO / 'figures' / name
        if not source.is_file():
            raise FileNotFoundError(f'a page shows figures/{name}, which does not exist')
        shutil.copyfile(source, staging / 'figures' / name)
    if out.exists():
        shutil.rmtree(out)
    staging.rename(out)
    return written


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--out', default=str(REPO / 'site'), help='folder to write (replaced whole; default site/)')
    args = parser.parse_args(argv)
    written = build(args.out)
    print(f'{len(written)} pages in {args.out}; open {Path(args.out) / INDEX}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
