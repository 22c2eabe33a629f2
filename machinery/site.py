"""A static site of the companion: every notebook as committed, the README, MAINTAINING.md, REPRODUCTION.md and an
index, readable offline, with every formula typeset by the build.

Usage: python -m machinery.site [--out site]

Pages are rendered with nbconvert from the committed notebooks (nothing is executed), so the site shows exactly
what the repository holds. Every formula (`$...$`, `$$...$$`, `\\(...\\)`, `\\[...\\]`) in the Markdown cells, the
computed Markdown outputs, the README, MAINTAINING.md, REPRODUCTION.md and the index is converted to MathML by the
pinned latex2mathml, which browsers render natively: a page fetches nothing, no script and no font from outside
`site/`. A formula the converter cannot take, or a `$` left in a page's text, stops the build with the notebook and
the cell. Links between notebooks (`02_estimator_moments.ipynb`), to `../README.md`, `../MAINTAINING.md` and
`../REPRODUCTION.md` are rewritten to the matching page; figures referenced from Markdown are copied beside the
pages; outputs' figures are embedded in the page itself, each with its caption as alternative text. The folder is
written next to itself and swapped in whole, so an interrupted build leaves the previous site (or none), never half
of one.
"""
import argparse
import base64
import html
import posixpath
import re
import shutil
import sys
from pathlib import Path

from agentrl.chapter import BEYOND, SECTIONS
from agentrl.paths import MAINTAINING, README, REPO, REPRODUCTION
from machinery.site_style import PRINT_SCRIPT, SITE_CSS
from machinery.site_tex import FormulaError, plain_text, render_inline, render_markdown

INDEX, REPORT, README_PAGE, MAINTAINING_PAGE = 'index.html', 'reproduction.html', 'readme.html', 'maintaining.html'
LINK = re.compile(r'(?P<attr>href|src)="(?P<target>[^"#?]*)(?P<rest>[#?][^"]*)?"')

# The math font every formula is set in, shipped in site/fonts/ with its licence and notice: Latin Modern Math
# (GUST Font License), kept in machinery/site_fonts/. A browser sets MathML from the font's OpenType MATH table:
# its script shifts, and the glyph pieces a stretched brace is built of, which a text font's table lacks.
FONTS = Path(__file__).with_name('site_fonts')
MATH_FONT, MATH_FONT_LICENSE, MATH_FONT_NOTICE = 'latinmodern-math.otf', 'GUST-FONT-LICENSE.txt', \
    'README-Latin-Modern-Math.txt'


# --- pages ----------------------------------------------------------------------------------------------------------

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


def svg_description(svg):
    """What an SVG figure says of itself, as Markdown: its <title> and <desc>, else the words it shows (matplotlib
    writes each text of a figure as a comment before its glyphs), tick labels left out; '' if it says nothing."""
    said = [' '.join(html.unescape(re.sub(r'<[^>]*>', '', text)).split())
            for text in re.findall(r'<(?:title|desc)\b[^>]*>(.*?)</(?:title|desc)>', svg, flags=re.S)]
    if not any(said):
        said = [' '.join(html.unescape(text).split()) for text in re.findall(r'<!--(.*?)-->', svg, flags=re.S)]
        said = [text for text in said if re.search(r'[^\W\d_]', text)]  # a tick label has no letter
    return '; '.join(dict.fromkeys(text for text in said if text))


def figure_captions(nb):
    """{index of a code cell: its figures' caption as Markdown} for every cell whose outputs hold an image.

    The caption is the italic paragraph starting 'Figure' that opens the next Markdown cell. A figure without one
    is described by what its SVG says of itself (svg_description), else by the heading of the section it stands in.
    """
    captions, heading = {}, ''
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == 'markdown':
            headings = re.findall(r'^#+\s+(.+?)\s*#*\s*$', cell.source, flags=re.M)
            heading = headings[-1] if headings else heading
            continue
        data = [output.get('data', {}) for output in cell.get('outputs', [])]
        if not any(key.startswith('image/') for bundle in data for key in bundle):
            continue
        following = next((c for c in nb.cells[i + 1:] if c.cell_type == 'markdown'), None)
        opening = re.split(r'\n\s*\n', following.source.strip(), maxsplit=1)[0] if following else ''
        match = re.fullmatch(r'([*_])(Figure\b.*)\1', opening.strip(), flags=re.S)
        said = '; '.join(filter(None, (svg_description(bundle.get('image/svg+xml', '')) for bundle in data)))
        names = [m for bundle in data for m in re.findall(r'<figure (\S+)>', bundle.get('text/plain', ''))]
        if match:
            captions[i] = match.group(2)
        elif said:  # a heading names the section, not what the figure shows
            captions[i] = f'Figure{f" ({names[0]})" if names else ""}, which shows: {said}'
        else:
            captions[i] = heading if heading.startswith('Figure') else f'Figure: {heading}' if heading else 'Figure'
    return captions


def rewrite_links(page_html, stems, base='notebooks'):
    """Point links at pages and copied figures instead of .ipynb/.md files -> (html, figure file names used).

    A relative target is read from `base`, the folder of the page's source in the repository (notebooks/ for a
    notebook and the index, the top for the README and the report): '../README.md' from a notebook is the README's
    page, 'calibration/README.md' from the README is not. Other targets are left as they are (finish_page unlinks a
    link to a file the site does not hold).
    """
    figures = set()

    def fix(match):
        target, rest = match.group('target'), match.group('rest') or ''
        if not target or re.match(r'^([a-z][a-z0-9+.-]*:|//)', target, flags=re.I):  # web, data, mailto, anchors
            return match.group(0)
        path = posixpath.normpath(posixpath.join(base, target))
        folder, _, name = path.rpartition('/')
        if path == 'README.md':
            target = README_PAGE
        elif path == 'REPRODUCTION.md':
            target = REPORT
        elif path == 'MAINTAINING.md':
            target = MAINTAINING_PAGE
        elif folder == 'notebooks' and name.endswith('.ipynb') and name[:-len('.ipynb')] in stems:
            target = name[:-len('.ipynb')] + '.html'
        elif folder == 'figures':
            figures.add(name)
            target = f'figures/{name}'
        return f'{match.group("attr")}="{target}{rest}"'
    return LINK.sub(fix, page_html), figures


def markdown_page(text, title):
    """A notebook holding one Markdown cell (rendered by the same exporter as the notebooks)."""
    import nbformat
    nb = nbformat.v4.new_notebook()
    nb.cells.append(nbformat.v4.new_markdown_cell(text, id='content'))  # not a random id: same text, same page
    nb.metadata['title'] = title
    return nb


def index_markdown(readme, entries):
    """The index page: the README (what a reader meets first, with the notebook map's thumbnails), then every page of
    the site, one row per notebook (an HTML table: Markdown tables break on '|' inside formulas), then the README,
    the maintainers' guide and the report. Links are relative to the repository's root. entries: (stem, label,
    title, summary as inline HTML)."""
    rows = ''.join(f'<tr><td>{label}</td><td><a href="notebooks/{stem}.ipynb">{html.escape(title)}</a></td>'
                   f'<td>{summary}</td></tr>' for stem, label, title, summary in entries)
    return '\n'.join([
        readme.rstrip(), '', '## The pages of this site', '',
        'Each page is a notebook of the repository as committed (outputs included), rendered without running it. '
        'Sections 10.1-10.8 come first, then what goes beyond the book.', '',
        f'<table><thead><tr><th>section</th><th>page</th><th>what it shows</th></tr></thead><tbody>{rows}</tbody></table>',
        '', "The chapter's tables beside ours: [the reproduction report](REPRODUCTION.md). The README on a page of "
        "its own: [README](README.md); how it is built, tested and measured: [the maintainers' "
        'guide](MAINTAINING.md).', '',
        'Built by `make html` from the committed notebooks, formulas typeset as MathML by the build; `make` '
        'regenerates the notebooks themselves.'])


FULL_SIZE = 'full'  # the folder of the site that holds each output figure as a file of its own, to open full size
DATA_IMAGE = re.compile(r'^data:image/(?P<kind>svg\+xml|png);base64,(?P<data>.*)$', re.S)


# The lab template without what it would fetch from the web (require.js, MathJax, mermaid: nothing here needs them),
# with the site's CSS last in the head (it overrides the lab's), and with each figure's caption as alternative text.
TEMPLATE = """{%- extends 'index.html.j2' -%}
{%- block html_head_js -%}{%- endblock html_head_js -%}
{%- block html_head_js_mathjax -%}{%- endblock html_head_js_mathjax -%}
{%- block html_head_js_mermaidjs -%}{%- endblock html_head_js_mermaidjs -%}
{%- block html_head_css -%}<style type="text/css">{{ resources.site_css }}</style>{%- endblock html_head_css -%}
{% block data_svg scoped -%}
<div class="jp-RenderedSVG jp-OutputArea-output {{ extra_class }}" data-mime-type="image/svg+xml">
<img src="data:image/svg+xml;base64,{{ output.data['image/svg+xml'] | text_base64 | escape_html }}" alt="{{ output.metadata.site_alt | e }}">
</div>
{%- endblock data_svg %}
{% block data_png scoped -%}
<div class="jp-RenderedImage jp-OutputArea-output {{ extra_class }}">
<img src="data:image/png;base64,{{ output.data['image/png'] | escape_html }}" alt="{{ output.metadata.site_alt | e }}">
</div>
{%- endblock data_png %}
"""


def exporter():
    """nbconvert's HTMLExporter (lab template) with the site's template and the formulas typeset as MathML.

    Before each page, set `.source` (what an error names: 'notebooks/03_loss_gradients.ipynb'), `.name_cells` (False
    for a page made of one Markdown file) and `.formulas` (a list that collects the TeX of every formula the page
    typesets)."""
    import jinja2
    from nbconvert import HTMLExporter

    class SiteExporter(HTMLExporter):
        source, formulas, name_cells = '', [], True

        @jinja2.pass_context
        def markdown2html(self, context, source):
            cell, nb = context.get('cell', {}), context.get('nb')
            where = self.source
            if nb is not None and self.name_cells:
                index = next(i for i, c in enumerate(nb.cells) if c is cell)
                kind = 'Markdown cell' if cell.cell_type == 'markdown' else 'Markdown output of code cell'
                where = f'{self.source}, {kind} {index} (id {cell.get("id", "?")})'
            path = context.get('resources', {}).get('metadata', {}).get('path', '')
            return render_markdown(source, where, self.formulas, attachments=cell.get('attachments', {}),
                                   embed_images=self.embed_images, path=path,
                                   anchor_link_text=self.anchor_link_text,
                                   exclude_anchor_links=self.exclude_anchor_links, **self.lexer_options)

    return SiteExporter(template_name='lab', template_file='site.html.j2',
                        extra_loaders=[jinja2.DictLoader({'site.html.j2': TEMPLATE})])


def finish_page(page_html, name, site_files, full_size=None):
    """The exported page made ready to read offline: tables in a box that scrolls, '\\|' in a table's code shown
    as GitHub shows it, in-page links that resolve, a link to a repository file the site does not hold (site_files:
    what it holds) left as its text, the inlined style sheets without comments (they cite web addresses), each
    output figure a link to itself as a file (collected in full_size: {site path: bytes}), each <pre> marked with
    its longest line (print sizes its font by it), and the print script."""
    from bs4 import BeautifulSoup
    soup = BeautifulSoup(page_html, 'html.parser')
    full_size = {} if full_size is None else full_size
    stem = name.rsplit('.', 1)[0]
    for image in soup.select('.jp-OutputArea-output img[src^="data:image/"]'):
        match = DATA_IMAGE.match(image['src'])
        if not match:
            continue
        target = f'{FULL_SIZE}/{stem}-{len(full_size) + 1}.{"svg" if match["kind"] == "svg+xml" else "png"}'
        full_size[target] = base64.b64decode(match['data'])
        site_files = site_files | {target}
        image.wrap(soup.new_tag('a', attrs={'href': target, 'class': 'figure-full',
                                            'title': 'open the figure full size'}))
    for pre in soup.find_all('pre'):
        columns = max((len(line) for line in pre.get_text().split('\n')), default=0)
        pre['style'] = f'--columns: {max(columns, 1)}'
    for table in soup.find_all('table'):
        if 'table-scroll' not in (table.parent.get('class') or []):
            table.wrap(soup.new_tag('div', attrs={'class': 'table-scroll scroll-hint'}))
    for code in soup.select('td code, th code'):  # GitHub's tables show an escaped pipe in a code span as '|'
        for text in code.find_all(string=True):
            if '\\|' in text:
                text.replace_with(text.replace('\\|', '|'))
    for link in soup.find_all('a', href=True):
        target = link['href'].split('#', 1)[0].split('?', 1)[0]
        if target and not re.match(r'^([a-z][a-z0-9+.-]*:|//)', target, flags=re.I) and target not in site_files:
            link.unwrap()  # e.g. calibration/README.md: its text names the file; it opens nothing here
    for image in soup.find_all('img', src=True):
        target = image['src']
        if not re.match(r'^([a-z][a-z0-9+.-]*:|//)', target, flags=re.I) and target not in site_files:
            raise FileNotFoundError(f'{name} shows {target}, which the site does not hold')
    ids = {element['id'] for element in soup.find_all(id=True)}
    by_case = {anchor.lower(): anchor for anchor in sorted(ids)}
    for link in soup.find_all('a', href=re.compile(r'^#.')):
        anchor = link['href'][1:]
        if anchor not in ids:
            if anchor.lower() not in by_case:
                raise ValueError(f'{name}: a link to #{anchor}, which the page does not have')
            link['href'] = f'#{by_case[anchor.lower()]}'  # GitHub's anchors are lower case, nbconvert's are not
    for style in soup.find_all('style'):
        style.string = re.sub(r'/\*.*?\*/', '', style.string or '', flags=re.S)
    script = soup.new_tag('script')
    script.string = PRINT_SCRIPT
    (soup.body or soup).append(script)
    return str(soup)


def build(out):
    """Render the site into folder `out` (replaced whole) -> {page file: number of formulas it typesets}."""
    import nbformat

    export = exporter()
    out = Path(out)
    stems = {stem for stem, _, _ in pages()}
    staging = out.with_name(f'.{out.name}.building')
    if staging.exists():
        shutil.rmtree(staging)
    (staging / 'figures').mkdir(parents=True)
    (staging / 'fonts').mkdir()
    (staging / FULL_SIZE).mkdir()
    figures, written, entries = set(), {}, []
    page_names = {f'{stem}.html' for stem in stems} | {README_PAGE, MAINTAINING_PAGE, REPORT, INDEX}

    def write(name, nb, source, name_cells=False, base='notebooks'):
        export.source, export.formulas, export.name_cells = source, [], name_cells
        body, _ = export.from_notebook_node(nb, resources={'site_css': SITE_CSS})
        body, used = rewrite_links(body, stems, base)
        figures.update(used)
        site_files = page_names | {f'figures/{figure}' for figure in used}
        full_size = {}
        (staging / name).write_text(finish_page(body, name, site_files, full_size))
        for target, data in full_size.items():
            (staging / target).write_bytes(data)
        written[name] = len(export.formulas)

    index_formulas = []
    for stem, label, title in pages():
        path = REPO / 'notebooks' / f'{stem}.ipynb'
        if not path.is_file():
            raise FileNotFoundError(f'{path}: listed in agentrl/chapter.py but missing')
        nb = nbformat.read(path, as_version=4)
        nb.metadata['title'] = f'{label} · {title}'
        source = f'notebooks/{stem}.ipynb'
        for i, caption in figure_captions(nb).items():
            alt = plain_text(render_markdown(caption, f'{source}, the caption of cell {i}', []))
            for output in nb.cells[i].outputs:
                output.setdefault('metadata', {})['site_alt'] = alt
        write(f'{stem}.html', nb, source, name_cells=True)
        summary = render_inline(first_line(nb), f'the index (the summary of {source})', index_formulas)
        entries.append((stem, label, title, summary))
    write(README_PAGE, markdown_page(README.read_text(), 'README · the chapter 10 companion'), 'README.md', base='')
    write(MAINTAINING_PAGE, markdown_page(MAINTAINING.read_text(), 'Maintaining the chapter 10 companion'),
          'MAINTAINING.md', base='')
    write(REPORT, markdown_page(REPRODUCTION.read_text(), 'Reproduction report: the chapter beside ours'),
          'REPRODUCTION.md', base='')
    write(INDEX, markdown_page(index_markdown(README.read_text(), entries), 'Chapter 10 companion'), 'the index',
          base='')
    written[INDEX] += len(index_formulas)
    for name in sorted(figures):
        source = REPO / 'figures' / name
        if not source.is_file():
            raise FileNotFoundError(f'a page shows figures/{name}, which does not exist')
        shutil.copyfile(source, staging / 'figures' / name)
    for name in (MATH_FONT, MATH_FONT_LICENSE, MATH_FONT_NOTICE):
        shutil.copyfile(FONTS / name, staging / 'fonts' / name)
    if out.exists():
        shutil.rmtree(out)
    staging.rename(out)
    return written


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--out', default=str(REPO / 'site'), help='folder to write (replaced whole; default site/)')
    args = parser.parse_args(argv)
    try:
        written = build(args.out)
    except FormulaError as error:
        print(f'make html: {error}', file=sys.stderr)
        return 1
    print(f'{len(written)} pages, {sum(written.values())} formulas typeset as MathML, in {args.out}; '
          f'open {Path(args.out) / INDEX}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
