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


def index_markdown(entries):
    """The index page: what the site is, then one row per notebook (an HTML table: Markdown tables break on '|'
    inside formulas), then the README, the maintainers' guide and the report. entries: (stem, label, title, summary
    as inline HTML)."""
    rows = ''.join(f'<tr><td>{label}</td><td><a href="{stem}.ipynb">{html.escape(title)}</a></td>'
                   f'<td>{summary}</td></tr>' for stem, label, title, summary in entries)
    return '\n'.join([
        '# KL, entropy and regularisation: the runnable companion to chapter 10', '',
        'Each page is a notebook of the repository as committed (outputs included), rendered without running it. '
        'Sections 10.1-10.8 come first, then what goes beyond the book.', '',
        f'<table><thead><tr><th>section</th><th>page</th><th>what it shows</th></tr></thead><tbody>{rows}</tbody></table>',
        '', "The chapter's tables beside ours: [the reproduction report](../REPRODUCTION.md). How to run, test and "
        'rebuild everything: [the README](../README.md); how it is built, tested and measured: [the maintainers\' '
        'guide](../MAINTAINING.md).', '',
        'Built by `make html` from the committed notebooks, formulas typeset as MathML by the build; `make` '
        'regenerates the notebooks themselves.'])


def brace_css(name, side):
    """CSS drawing a TeX brace along the `side` ('bottom' or 'top') of an element of class `name`: curled ends and a
    tip of fixed size (SVG pieces, base64 so the page names no web address) joined by rules, as wide as the element."""
    def piece(path, width):
        if side == 'top':  # the over-brace is the under-brace upside down
            path = re.sub(r'(-?[\d.]+) (-?[\d.]+)', lambda m: f'{m[1]} {10 - float(m[2]):g}', path)
        svg = (f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} 10" preserveAspectRatio="none">'
               f'<path d="{path}" fill="none" stroke="{BRACE_COLOUR}" stroke-width="1.2"/></svg>')
        return f'url("data:image/svg+xml;base64,{base64.b64encode(svg.encode()).decode()}")'
    rule = f'linear-gradient({BRACE_COLOUR}, {BRACE_COLOUR})'
    return (f'.{name} {{ padding-{side}: 0.5em; print-color-adjust: exact; -webkit-print-color-adjust: exact;\n'
            f'  background: {piece("M0.6 0 Q0.6 5 6 5 L10 5", 10)} left {side} / 0.5em 0.5em no-repeat,\n'
            f'    {piece("M0 5 L4 5 Q9.4 5 10 10 Q10.6 5 16 5 L20 5", 20)} center {side} / 1em 0.5em no-repeat,\n'
            f'    {piece("M0 5 L4 5 Q9.4 5 9.4 0", 10)} right {side} / 0.5em 0.5em no-repeat,\n'
            f'    {rule} left 0.5em {side} 0.22em / calc(50% - 1em) 0.06em no-repeat,\n'
            f'    {rule} right 0.5em {side} 0.22em / calc(50% - 1em) 0.06em no-repeat; }}\n')


BRACE_COLOUR = 'rgba(0,0,0,0.87)'  # the lab's text colour, which the formulas are set in
SITE_CSS = """
/* Formulas are MathML written by the build, set in the math font shipped in fonts/ (Latin Modern Math) whatever
   the reader's system has: a system math font may be missing, or lack the script shifts and stretchy braces. */
@font-face { font-family: "Companion Math"; src: url("fonts/latinmodern-math.otf") format("opentype"); }
math { font-family: "Companion Math", math; }
.tex-overline { border-top: 0.06em solid; padding-top: 0.12em; }
""" + brace_css('tex-underbrace', 'bottom') + brace_css('tex-overbrace', 'top') + """
.display-formula { display: block; margin: 0.6em 0; padding: 0.15em 0; overflow-x: auto; overflow-y: hidden; }
/* A box that scrolls sideways says so: a shadow at an edge with more beyond it (the white covers, scrolled with the
   content, hide the shadow once that edge is reached), and a scroll bar that stays visible where the browser lets
   a page style it. A formula cut at the screen's edge otherwise looks complete. */
.scroll-hint {
  background: linear-gradient(to right, white 40%, rgba(255,255,255,0)) left center / 1.5em 100% no-repeat local,
    linear-gradient(to left, white 40%, rgba(255,255,255,0)) right center / 1.5em 100% no-repeat local,
    radial-gradient(farthest-side at 0 50%, rgba(0,0,0,0.45), rgba(0,0,0,0)) left center / 0.9em 100% no-repeat scroll,
    radial-gradient(farthest-side at 100% 50%, rgba(0,0,0,0.45), rgba(0,0,0,0)) right center / 0.9em 100% no-repeat
    scroll; }
.scroll-hint::-webkit-scrollbar { height: 0.35em; }
.scroll-hint::-webkit-scrollbar-thumb { background: rgba(0,0,0,0.3); border-radius: 0.2em; }
/* Below 760 px the lab's style sheet makes each input and output area a table row, which cannot scroll: what
   passes its edge is hidden by the box around it. As blocks they scroll again. */
@media only screen and (max-width: 760px) {
  .jp-OutputArea-child .jp-OutputArea-output, .jp-InputArea-editor { display: block; }
}
/* Code names in a collapsible section (notebook 12's map) are long and have no spaces: they wrap where they must
   rather than pass the edge of a phone's screen. */
details code { overflow-wrap: anywhere; }
/* An output figure opens full size (a link to its file): ten panels at phone width cannot be read. */
a.figure-full { display: block; }
/* a wide table scrolls inside its box instead of widening the page */
.table-scroll { max-width: 100%; overflow-x: auto; margin-bottom: 1em; }
.table-scroll > table { margin-bottom: 0; }
img { max-width: 100%; height: auto; }
/* Code, printed output and preformatted text keep their lines (a table printed in text stays aligned) and scroll
   sideways inside their box: the lab's cells hide what passes their edge, and its output wraps mid-token. A flex
   item gives its width up to the screen only with min-width 0. */
.jp-InputArea-editor, .jp-OutputArea-output { min-width: 0; }
.jp-InputArea-editor pre, .jp-OutputArea-output pre, .jp-RenderedHTMLCommon pre, pre {
  overflow-x: auto; white-space: pre; word-break: normal; overflow-wrap: normal; }
@media print {
  .jp-InputPrompt, .jp-OutputPrompt, .jp-InputArea-prompt, .jp-OutputArea-prompt { display: none; }
  .jp-Notebook { padding: 0; }
  .jp-InputArea, .jp-InputArea-editor, .jp-OutputArea-output { overflow: visible; }
  /* A block of text keeps its lines, so a table printed in text stays aligned: its font is made small enough for
     its longest line (--columns, written by the build; a monospace character is about 0.6 em wide) to fit the
     cell. Wrapping is left only for a browser without container units. */
  .jp-Cell { container-type: inline-size; }
  .jp-InputArea-editor pre, .jp-OutputArea-output pre, .jp-RenderedHTMLCommon pre, pre {
    font-size: 85%; white-space: pre-wrap; overflow-wrap: anywhere; overflow: visible; }
  .jp-InputArea-editor pre, .jp-OutputArea-output pre, .jp-RenderedHTMLCommon pre, pre {
    font-size: min(11px, calc(100cqi / (var(--columns, 80) * 0.62))); }
  pre, table { break-inside: avoid; }
  /* Collapsed sections print open: the page's print script opens them, and where the browser has the pseudo-element
     for a section's content this shows it even without scripts. */
  details::details-content { content-visibility: visible; display: block; }
  details > summary { font-weight: bold; }
  .scroll-hint { background: none; }
  .jp-RenderedImage, .jp-RenderedSVG, .display-formula, tr { break-inside: avoid; }
  td, th { overflow-wrap: anywhere; }
  h1, h2, h3 { break-after: avoid; }
  .table-scroll, .display-formula { overflow: visible; }
  .display-formula { font-size: 85%; }  /* the widest formulas fit a printed line */
}
"""

# Printing opens every closed <details> (notebook 12's map, what each seed measured), which would otherwise print as
# its summary line alone, and closes them again afterwards. The page's only script; it fetches nothing.
PRINT_SCRIPT = """(function () {
  var opened = [];
  window.addEventListener('beforeprint', function () {
    opened = Array.prototype.slice.call(document.querySelectorAll('details:not([open])'));
    opened.forEach(function (section) { section.open = true; });
  });
  window.addEventListener('afterprint', function () {
    opened.forEach(function (section) { section.open = false; });
    opened = [];
  });
})();"""
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
    write(INDEX, markdown_page(index_markdown(entries), 'Chapter 10 companion'), 'the index')
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
