"""make html: every notebook, the README, MAINTAINING.md and REPRODUCTION.md as pages, an index, links and images
that resolve offline, every formula typeset as MathML by the build, nothing fetched from outside the site."""
import re
from pathlib import Path

import nbformat
import pytest
from bs4 import BeautifulSoup

from agentrl.paths import MAINTAINING, NOTEBOOKS, README, REPRODUCTION
from machinery import site, site_tex

REFERENCE = re.compile(r'(?:href|src)="([^"]*)"')


@pytest.fixture(scope='module')
def built(tmp_path_factory):
    out = tmp_path_factory.mktemp('site') / 'site'
    return out, site.build(out)


def local_targets(page):
    """The references of a page that must resolve inside the site (not web addresses, data or in-page anchors)."""
    for target in REFERENCE.findall(page.read_text()):
        target = target.split('#', 1)[0].split('?', 1)[0]
        if target and not re.match(r'^(https?:|data:|mailto:|javascript:)', target):
            yield target


def soup_of(path):
    return BeautifulSoup(path.read_text(), 'html.parser')


def test_every_notebook_the_readme_the_maintainers_guide_and_the_report_have_a_page_and_the_index_lists_them(built):
    out, written = built
    stems = [stem for stem, _, _ in site.pages()]
    assert sorted(written) == sorted([f'{stem}.html' for stem in stems]
                                     + [site.INDEX, site.REPORT, site.README_PAGE, site.MAINTAINING_PAGE])
    index = (out / site.INDEX).read_text()
    assert 'What the chapter argues' in index and 'src="figures/ch10-entropy-curves.svg"' in index  # the README first
    for stem in stems:
        assert f'href="{stem}.html"' in index, f'the index does not link {stem}'
    assert f'href="{site.REPORT}"' in index and f'href="{site.README_PAGE}"' in index
    readme = (out / site.README_PAGE).read_text()
    assert f'href="{site.MAINTAINING_PAGE}"' in index and f'href="{site.MAINTAINING_PAGE}"' in readme


def test_every_local_link_and_image_resolves(built):
    out, written = built
    for name in written:
        for target in local_targets(out / name):
            assert (out / target).is_file(), f'{name} refers to {target}, which the site does not have'


def test_every_in_page_link_has_its_anchor(built):
    out, written = built
    for name in written:
        soup = soup_of(out / name)
        ids = {element['id'] for element in soup.find_all(id=True)}
        for link in soup.find_all('a', href=re.compile(r'^#.')):
            assert link['href'][1:] in ids, f'{name}: {link["href"]} points at no element of the page'


def test_no_page_links_to_a_notebook_or_markdown_file(built):
    out, written = built
    for name in written:
        text = (out / name).read_text()
        assert not re.search(r'href="(?!https?:)[^"]*\.(ipynb|md)"', text), f'{name} still links a .ipynb or .md file'


def test_link_texts_name_what_they_open(built):
    """A link's text names no file the site does not open ('REPRODUCTION.md' opening reproduction.html), and one
    that says README opens the README's page."""
    out, written = built
    for name in written:
        for link in soup_of(out / name).find_all('a', href=True):
            text, target = ' '.join(link.get_text().split()), link['href']
            if target.startswith(('http:', 'https:', '#')):
                continue
            assert not re.search(r'\.(md|ipynb)\b', text), f'{name}: the link "{text}" names a file but opens {target}'
            if 'README' in text:
                assert target.split('#')[0] == site.README_PAGE, f'{name}: "{text}" opens {target}'


def test_figures_of_the_notebooks_are_inside_their_pages(built):
    out, _ = built
    for stem in ('01_bandit_closed_form', '03_loss_gradients', '05_forward_reverse'):
        page = (out / f'{stem}.html').read_text()
        assert '<svg' in page or 'data:image/png;base64' in page or 'data:image/svg+xml;base64' in page, \
            f'{stem}: its figure is not in the page'


def test_every_image_has_its_caption_as_alternative_text(built):
    out, written = built
    for name in written:
        for image in soup_of(out / name).find_all('img'):
            alt = image.get('alt', '')
            assert alt and 'No description' not in alt, f'{name}: an image without a description'
            assert '$' not in alt and '\\' not in alt, f'{name}: TeX in an alternative text: {alt[:80]}'
    alts = [image['alt'] for image in soup_of(out / '03_loss_gradients.html').find_all('img')]
    assert alts and alts[0].startswith('Figure 10.1 (ch10-kl-estimators.svg). The three estimators'), alts
    assert 'k₁, dotted, is drawn on top of k₃' in alts[0]


def test_a_figure_without_a_caption_is_described_by_its_section():
    figure = nbformat.v4.new_code_cell('show()')
    figure.outputs = [nbformat.v4.new_output('display_data', data={'image/png': 'iVBORw0KGgo=', 'text/plain': 'x'})]
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell('## Figure 10.3: how the runs got there\n\nText.'), figure,
                nbformat.v4.new_markdown_cell('## Next\n\nText.'), figure,
                nbformat.v4.new_markdown_cell('*Figure 10.4 (f.svg). The $k_1$ curve.*\n\nMore.')]
    assert site.figure_captions(nb) == {1: 'Figure 10.3: how the runs got there', 3: 'Figure 10.4 (f.svg). The $k_1$ curve.'}


SVG_FIGURE = ('<svg xmlns="http://www.w3.org/2000/svg">{said}<g id="text_1"><!-- 0.5 --><path d="M0 0"/></g>'
              '<g id="text_2"><!-- policy-token entropy (nats) --></g><g id="text_3"><!-- $k_3$ loss --></g></svg>')


def figure_cell(svg):
    """A code cell that shows one figure as plotting.show does: SVG, PNG twin and its name as text."""
    cell = nbformat.v4.new_code_cell('plotting.show(fig, "f")')
    cell.outputs = [nbformat.v4.new_output('display_data', data={
        'image/svg+xml': svg, 'image/png': 'iVBORw0KGgo=', 'text/plain': '<figure f.svg>'})]
    return cell


def test_a_figures_alternative_text_describes_the_figure_not_its_section(tmp_path, monkeypatch):
    """Its caption when the cell under it has one; else its SVG's <title> and <desc>; else the words the figure
    shows (numbers, its tick labels, left out); never the heading of the section it stands in."""
    caption = '*Figure 10.4 (f.svg). The $k_1$ curve lies on top of the $k_3$ curve.*'
    titled = SVG_FIGURE.format(said='<title>Entropy per step</title><desc>One curve per setting.</desc>')
    untitled = SVG_FIGURE.format(said='')
    out = fake_repository(tmp_path, monkeypatch, [
        nbformat.v4.new_markdown_cell('# probe\n\n## One run, watched'), figure_cell(untitled),
        nbformat.v4.new_markdown_cell(f'{caption}\n\nMore.'), figure_cell(titled),
        nbformat.v4.new_markdown_cell('## Figure 10.3: how the runs got there'), figure_cell(untitled),
        nbformat.v4.new_markdown_cell('## Next')])
    site.build(out)
    svg_alts = [image['alt'] for image in soup_of(out / '99_probe.html').find_all('img')
                if image['src'].startswith('data:image/svg')]
    assert svg_alts == ['Figure 10.4 (f.svg). The k₁ curve lies on top of the k₃ curve.',
                        'Figure (f.svg), which shows: Entropy per step; One curve per setting.',
                        'Figure (f.svg), which shows: policy-token entropy (nats); k₃ loss']


# --- formulas -------------------------------------------------------------------------------------------------------

def formulas_in(markdown):
    """How many formulas a Markdown text holds, counted without the site's parser: code removed, then each
    $$...$$, \\[...\\], \\(...\\) and $...$ once."""
    text = re.sub(r'^(```|~~~).*?^\1', ' ', markdown, flags=re.M | re.S)
    text = re.sub(r'(`+)(?!`).+?(?<!`)\1(?!`)', ' ', text, flags=re.S)
    count = 0
    for pattern in (r'\$\$.+?\$\$', r'\\\[.+?\\\]', r'\\\(.+?\\\)', r'\$[^$]+?\$'):
        count += len(re.findall(pattern, text, flags=re.S))
        text = re.sub(pattern, ' ', text, flags=re.S)
    return count


def markdown_of(nb):
    """Every Markdown text of a notebook: its Markdown cells and the Markdown its code cells computed."""
    for cell in nb.cells:
        if cell.cell_type == 'markdown':
            yield cell.source
        for output in cell.get('outputs', []):
            if 'text/markdown' in output.get('data', {}):
                yield output.data['text/markdown']


def formulas_expected():
    """{page: number of formulas its sources hold}."""
    expected = {site.README_PAGE: formulas_in(README.read_text()), site.REPORT: formulas_in(REPRODUCTION.read_text()),
                site.MAINTAINING_PAGE: formulas_in(MAINTAINING.read_text())}
    expected[site.INDEX] = 0
    for stem, _, _ in site.pages():
        nb = nbformat.read(NOTEBOOKS / f'{stem}.ipynb', as_version=4)
        expected[f'{stem}.html'] = sum(formulas_in(text) for text in markdown_of(nb))
        expected[site.INDEX] += formulas_in(site.first_line(nb))
    return expected


def test_every_formula_of_the_sources_is_typeset_on_its_page(built):
    out, written = built
    expected = formulas_expected()
    typeset = {name: len(soup_of(out / name).find_all('math')) for name in written}
    assert typeset == expected, 'formulas in the sources vs MathML formulas on the pages'
    assert written == expected, 'formulas in the sources vs formulas the build says it typeset'
    assert sum(expected.values()) > 400  # the chapter is mostly mathematics: a count of 0 would prove nothing


def visible_text(path):
    """What a reader reads on a page, without code (cells' input, code spans, printed output) and formulas."""
    soup = soup_of(path)
    for element in soup.select('.jp-CodeCell .jp-InputArea'):  # a Markdown cell's text is in its input area too
        element.decompose()
    for element in soup.find_all(['script', 'style', 'pre', 'code', 'math']):
        element.decompose()
    return soup.get_text(' ')


def test_no_tex_is_left_in_the_text_a_reader_sees(built):
    out, written = built
    for name in written:
        text = visible_text(out / name)
        match = re.search(r'\$|\\\(|\\\[|\\[A-Za-z]+', text)
        assert not match, f'{name}: TeX left in the text: "{text[max(0, match.start() - 50):match.end() + 50]}"'


def test_no_formula_failed_to_convert(built):
    out, written = built
    for name in written:
        for formula in soup_of(out / name).find_all('math'):
            assert not formula.find('merror'), f'{name}: a converter error in {formula}'
            assert '\\' not in formula.get_text(), f'{name}: a TeX command passed through as text: {formula}'


def test_nothing_is_fetched_from_outside_the_site(built):
    """The only web addresses of a page are links a reader may follow (<a href>): no script, style sheet, font or
    image comes from the web, and the one script is the print handler, written into the page (MathML needs none)."""
    out, written = built
    for name in written:
        page = (out / name).read_text()
        scripts = soup_of(out / name).find_all('script')
        assert [script.get_text() for script in scripts] == [site.PRINT_SCRIPT], f'{name} holds another script'
        assert not any(script.get('src') for script in scripts), f'{name} loads a script'
        rest = re.sub(r'(<a\b[^>]*?\bhref=")https?://[^"]*"', r'\1"', page)
        match = re.search(r'https?://|(?:src|href)="//|url\(\s*["\']?//|@import', rest)
        assert not match, f'{name} refers to {rest[match.start():match.start() + 100]}'
        for url in re.findall(r'url\(\s*["\']?([^)"\']*)', page):
            assert url.startswith('data:') or (out / url).is_file(), f'{name}: CSS url({url[:60]}) is not in the site'


def test_formulas_are_set_in_the_shipped_math_font_which_can_set_them(built):
    """The math font is in the site with its licence, every formula asks for it first (a reader without a math font
    of their own gets it), and its MATH table has what MathML needs: scripts shifted off the baseline, and braces
    built to any width."""
    from fontTools.ttLib import TTFont
    out, _ = built
    for name in (site.MATH_FONT, site.MATH_FONT_LICENSE, site.MATH_FONT_NOTICE):
        assert (out / 'fonts' / name).read_bytes() == (site.FONTS / name).read_bytes(), f'fonts/{name} not shipped'
    soup = soup_of(out / site.INDEX)
    css = soup.find_all('style')[-1].get_text()
    face = re.search(r'@font-face\s*\{[^}]*font-family:\s*"([^"]+)";[^}]*url\("([^"]+)"\)', css)
    assert face and face.group(2) == f'fonts/{site.MATH_FONT}', 'no @font-face for the shipped math font'
    families = dict(screen_rules(soup))['math']['font-family']
    assert families.split(',')[0].strip() == f'"{face.group(1)}"', f'formulas ask for {families} first'
    table = TTFont(out / 'fonts' / site.MATH_FONT)['MATH'].table
    assert table.MathConstants.SubscriptShiftDown.Value > 0 and table.MathConstants.SuperscriptShiftUp.Value > 0
    cmap = TTFont(out / 'fonts' / site.MATH_FONT).getBestCmap()
    stretched = set(table.MathVariants.HorizGlyphCoverage.glyphs)
    assert {cmap[ord('⏟')], cmap[ord('⏞')]} <= stretched, 'the font cannot build a brace to the width of a term'


def test_the_index_renders_the_markdown_of_its_summaries(built):
    out, _ = built
    index = soup_of(out / site.INDEX)
    pages = index.find_all('table')[-1]  # the site's own list of pages, after the README's notebook map
    row = next(tr for tr in pages.find_all('tr') if tr.find('a', href='03_loss_gradients.html'))
    assert row.find('em', string='forward'), 'the summary of 10.3 does not show *forward* in italics'
    assert row.find('math') and '*' not in row.get_text()


def test_wide_tables_scroll_inside_their_box(built):
    out, written = built
    for name in written:
        soup = soup_of(out / name)
        for table in soup.find_all('table'):
            assert 'table-scroll' in table.parent.get('class', []), f'{name}: a table outside a scrolling box'
    assert re.search(r'\.table-scroll\s*\{[^}]*overflow-x:\s*auto', (out / site.INDEX).read_text())


def screen_rules(soup):
    """(selector, {property: value}) for every rule of the site's own style sheet (the page's last) that a screen
    applies: the print rules and @font-face left out."""
    css = soup.find_all('style')[-1].get_text().split('@media print', 1)[0]
    for selectors, body in re.findall(r'([^{}@]+)\{([^{}]*)\}', re.sub(r'@font-face\s*\{[^}]*\}', '', css)):
        declarations = dict(re.findall(r'([\w-]+)\s*:\s*((?:"[^"]*"|[^;"])+?)\s*(?:;|$)', body))  # ';' in a url
        for selector in selectors.split(','):
            yield selector.strip(), declarations


def style_of(soup, element):
    """What the site's screen rules set on an element, later rules over earlier ones."""
    style = {}
    for selector, declarations in screen_rules(soup):
        if '::' in selector:  # a pseudo-element (a scroll bar) styles no element of the page
            continue
        if element in soup.select(selector):
            style.update(declarations)
    return style


def test_code_output_and_preformatted_text_scroll_sideways_instead_of_being_cut_or_wrapped(tmp_path, monkeypatch):
    """A long line of code, a printed table and a <pre> of Markdown keep their lines and scroll inside their box;
    the lab's flex items around them may shrink to the screen (else the box grows past the page and is cut)."""
    code = nbformat.v4.new_code_cell('print(f"{name:<16} | {value:>12.3f} | " + "long line " * 20)')
    code.outputs = [nbformat.v4.new_output('stream', name='stdout', text='setting          | entropy 0-4 -> 35-39\n')]
    out = fake_repository(tmp_path, monkeypatch, [nbformat.v4.new_markdown_cell('# probe\n\n```\nmake html\n```'),
                                                  code])
    site.build(out)
    soup = soup_of(out / '99_probe.html')
    blocks = {'code': soup.select_one('.jp-InputArea-editor pre'),
              'output': soup.select_one('.jp-OutputArea-output pre'),
              'markdown': soup.select_one('.jp-RenderedMarkdown pre')}
    for kind, block in blocks.items():
        assert block is not None, f'no {kind} block on the page'
        style = style_of(soup, block)
        assert style.get('overflow-x') == 'auto' and style.get('white-space') == 'pre', f'{kind}: {style}'
        assert style.get('word-break', 'normal') == 'normal', f'{kind} breaks mid-token: {style}'
    for area in ('.jp-InputArea-editor', '.jp-OutputArea-output'):
        assert style_of(soup, soup.select_one(area)).get('min-width') == '0', f'{area} cannot shrink to the screen'


def test_an_escaped_pipe_in_a_tables_code_reads_as_on_github(built):
    out, _ = built
    cells = [code.get_text() for code in soup_of(out / site.REPORT).select('td code')]
    assert any(' | KL ' in text for text in cells), "the report's table cells lost their pipes"
    assert not any('\\|' in text for text in cells), 'a table cell of the report shows \\| instead of |'


def test_the_same_tree_builds_the_same_bytes(built, tmp_path):
    out, _ = built
    again = tmp_path / 'site'
    site.build(again)
    files = sorted(path.relative_to(out) for path in out.rglob('*') if path.is_file())
    assert files == sorted(path.relative_to(again) for path in again.rglob('*') if path.is_file())
    for path in files:
        assert (out / path).read_bytes() == (again / path).read_bytes(), f'{path} differs between two builds'


@pytest.mark.parametrize('tex, reason', [
    (r'\foo x', r'unknown command \\foo'),
    (r'\frac{1}{2', r'1 "\{" never closed'),
    (r'a}', r'a "\}" closes no group'),
    (r'\frac{1}', 'missing argument'),
    (r'x^', 'latex2mathml cannot parse it'),
    (r'\begin{aligned}a &= b\end{aligned}', r'alignment \(&\)'),
    (' ', 'empty formula'),
])
def test_a_formula_the_converter_cannot_take_is_an_error(tex, reason):
    with pytest.raises(site_tex.FormulaError, match=reason):
        site_tex.typeset(tex)


def test_formulas_read_as_tex_sets_them():
    """What tidy_mathml mends in latex2mathml's output."""
    assert '<mo stretchy="false">∼</mo>' in site_tex.typeset(r'y \sim \pi')  # \sim: an operator, not the identifier '~'
    assert '<munder><mo>∑</mo>' in site_tex.typeset(r'\mathbb{E}\Big[\sum_t k_t\Big]', display=True)  # limits below
    assert '<mi>KL</mi>' in site_tex.typeset(r'\mathrm{KL}')  # one upright name, not two letters
    spaced = site_tex.typeset(r'\beta \log \pi')
    assert re.search(r'<mi>β</mi><mspace width="0.167em" /><mi>log</mi><mspace width="0.167em" /><mi>π</mi>', spaced)
    assert '<mi>log</mi><mo stretchy="false">(</mo>' in site_tex.typeset(r'\log(x)')  # no space before a parenthesis
    assert '<mo form="prefix">−</mo>' in site_tex.typeset(r'a = -b')  # a sign after a relation
    assert 'class="tex-overline"' in site_tex.typeset(r'\overline{\log\pi}')
    assert 'minsize' not in site_tex.typeset(r'\binom{n}{k}')  # parentheses stretched to the fraction
    assert '<mo lspace="0" rspace="0">,</mo>' in site_tex.typeset(r'k_{1,s}')  # no space inside a script


def test_an_underbrace_is_drawn_along_the_whole_of_its_term(tmp_path, monkeypatch):
    """\\underbrace and \\overbrace: the braced element holds the term's whole MathML and its label sits under (over)
    it; the brace is drawn by the site's CSS along that element (Chromium paints a brace glyph stretched to a term
    only in part), so no brace glyph is left."""
    term = r'\mathbb{E}\Big[\sum_t \nabla\log\pi(y_t)\,\mathrm{sg}\Big(\sum_{s>t} k_{1,s}\Big)\Big]'
    cell = f'$$a = \\underbrace{{{term}}}_{{\\text{{future KL}}}} + \\overbrace{{{term}}}^{{x}}$$'
    out = fake_repository(tmp_path, monkeypatch, [nbformat.v4.new_markdown_cell('# probe'),
                                                  nbformat.v4.new_markdown_cell(cell)])
    site.build(out)
    soup = soup_of(out / '99_probe.html')
    formula = soup.find('math')
    whole_term = BeautifulSoup(site_tex.typeset(term), 'html.parser').find('math').find('mrow')
    for name, script, label in (('tex-underbrace', 'munder', 'future KL'), ('tex-overbrace', 'mover', 'x')):
        braced = formula.find('mrow', class_=name)
        assert braced is not None and str(braced.find('mrow')) == str(whole_term), f'{name} does not hold the term'
        assert braced.parent.name == script, f'{name}: its label is not set {script[1:]} it'
        assert braced.parent.find_all(recursive=False)[1].get_text().replace('\xa0', ' ') == label
        style = style_of(soup, braced)
        assert style.get(f'padding-{"bottom" if script == "munder" else "top"}') == '0.5em'
        assert style.get('background', '').count('no-repeat') == 5, f'{name}: the brace is not drawn: {style}'
    assert '⏟' not in str(formula) and '⏞' not in str(formula)


def test_math_text_writes_a_formula_for_an_alternative_text():
    def alt(tex):
        return site_tex.plain_text(site_tex.typeset(tex))
    assert alt(r'\pi_{\text{ref}} = [0.05, 0.45]') == 'π_ref = [0.05, 0.45]'
    assert alt(r'k_1') == 'k₁' and alt(r'e^{r/\beta}') == 'e^(r/β)' and alt(r'\tfrac12') == '1/2'


# --- errors name the notebook and the cell -------------------------------------------------------------------------

def fake_repository(tmp_path, monkeypatch, cells, readme='# README.md\n'):
    """A repository of one notebook (cells as given), a README and a REPRODUCTION.md, for site.build."""
    (tmp_path / 'notebooks').mkdir()
    nb = nbformat.v4.new_notebook()
    nb.cells = cells
    for i, cell in enumerate(nb.cells):
        cell.id = f'cell-{i:02d}'
    nbformat.write(nb, tmp_path / 'notebooks' / '99_probe.ipynb')
    (tmp_path / 'README.md').write_text(readme)
    (tmp_path / 'REPRODUCTION.md').write_text('# REPRODUCTION.md\n')
    (tmp_path / 'MAINTAINING.md').write_text('# MAINTAINING.md\n')
    monkeypatch.setattr(site, 'REPO', tmp_path)
    monkeypatch.setattr(site, 'README', tmp_path / 'README.md')
    monkeypatch.setattr(site, 'MAINTAINING', tmp_path / 'MAINTAINING.md')
    monkeypatch.setattr(site, 'REPRODUCTION', tmp_path / 'REPRODUCTION.md')
    monkeypatch.setattr(site, 'pages', lambda: [('99_probe', '§0', 'probe')])
    return tmp_path / 'site'


def test_a_bad_formula_in_a_markdown_cell_names_the_notebook_and_the_cell(tmp_path, monkeypatch):
    out = fake_repository(tmp_path, monkeypatch, [nbformat.v4.new_markdown_cell('# probe\n\n$k_1$ fine'),
                                                  nbformat.v4.new_markdown_cell('then $\\mathbf{x} + \\foo$')])
    with pytest.raises(site.FormulaError, match=r'notebooks/99_probe\.ipynb, Markdown cell 1 \(id cell-01\): '
                                                r'cannot typeset \$\\mathbf\{x\} \+ \\foo\$: unknown command \\foo'):
        site.build(out)
    assert not out.exists()


def test_a_bad_formula_in_a_computed_markdown_output_names_its_code_cell(tmp_path, monkeypatch):
    code = nbformat.v4.new_code_cell('display(Markdown(text))')
    code.outputs = [nbformat.v4.new_output('display_data', data={'text/markdown': 'the loss $\\frac{1}{2$'})]
    out = fake_repository(tmp_path, monkeypatch, [nbformat.v4.new_markdown_cell('# probe'), code])
    with pytest.raises(site.FormulaError, match=r'99_probe\.ipynb, Markdown output of code cell 1 \(id cell-01\)'):
        site.build(out)


def test_a_formula_inside_raw_html_is_an_error_not_raw_tex_on_the_page(tmp_path, monkeypatch):
    out = fake_repository(tmp_path, monkeypatch, [
        nbformat.v4.new_markdown_cell('# probe'),
        nbformat.v4.new_markdown_cell('<table><tr><td>$\\beta$</td></tr></table>')])
    with pytest.raises(site.FormulaError, match=r'Markdown cell 1 \(id cell-01\): TeX left untypeset'):
        site.build(out)


def test_rewrite_points_links_at_pages_and_copied_figures():
    page = ('<a href="02_estimator_moments.ipynb#top">x</a><a href="../README.md">r</a>'
            '<a href="../REPRODUCTION.md">p</a><img src="../figures/ch10-seeds.svg"><a href="https://arxiv.org/x.md">w</a>')
    rewritten, figures = site.rewrite_links(page, {'02_estimator_moments'})
    assert rewritten == ('<a href="02_estimator_moments.html#top">x</a><a href="readme.html">r</a>'
                         '<a href="reproduction.html">p</a><img src="figures/ch10-seeds.svg">'
                         '<a href="https://arxiv.org/x.md">w</a>')
    assert figures == {'ch10-seeds.svg'}


def test_links_are_read_from_the_folder_of_their_source():
    page = '<a href="calibration/README.md">c</a><a href="README.md#x">r</a><a href="notebooks/02_x.ipynb">n</a>'
    rewritten, _ = site.rewrite_links(page, {'02_x'}, base='')
    assert rewritten == '<a href="calibration/README.md">c</a><a href="readme.html#x">r</a><a href="02_x.html">n</a>'


def test_a_link_to_a_file_the_site_does_not_hold_is_left_as_its_text(tmp_path, monkeypatch):
    readme = '# README\n\nSee [calibration/README.md](calibration/README.md) and [the report](REPRODUCTION.md).\n'
    out = fake_repository(tmp_path, monkeypatch, [nbformat.v4.new_markdown_cell('# probe')], readme=readme)
    site.build(out)
    page = soup_of(out / site.README_PAGE)
    assert 'See calibration/README.md and the report.' in ' '.join(page.get_text().split())
    assert [link['href'] for link in page.select('.jp-RenderedMarkdown a:not(.anchor-link)')] == [site.REPORT]


def test_a_failed_build_keeps_the_previous_site(tmp_path, monkeypatch):
    out = tmp_path / 'site'
    out.mkdir()
    (out / 'index.html').write_text('previous')
    monkeypatch.setattr(site, 'pages', lambda: [('99_missing', 'x', 'y')])
    with pytest.raises(FileNotFoundError, match='99_missing'):
        site.build(out)
    assert (out / 'index.html').read_text() == 'previous'


def test_main_reports_a_bad_formula_without_a_traceback(tmp_path, monkeypatch, capsys):
    out = fake_repository(tmp_path, monkeypatch, [nbformat.v4.new_markdown_cell('# probe $\\foo$')])
    assert site.main(['--out', str(out)]) == 1
    assert 'make html: notebooks/99_probe.ipynb' in capsys.readouterr().err
    assert not Path(out).exists()


def test_a_worked_answer_collapsed_in_jupyterlab_shows_on_the_site(tmp_path, monkeypatch):
    heading = nbformat.v4.new_markdown_cell('### Worked answer')
    heading.metadata['jp-MarkdownHeadingCollapsed'] = True  # JupyterLab hides the cells under it until opened
    answer = nbformat.v4.new_code_cell('print(6 * 7)')
    answer.outputs = [nbformat.v4.new_output('stream', name='stdout', text='forty-two\n')]
    out = fake_repository(tmp_path, monkeypatch, [
        nbformat.v4.new_markdown_cell('# probe\n\n## Exercise\n\nThe question.'), nbformat.v4.new_code_cell(''),
        heading, nbformat.v4.new_markdown_cell('The argument of the answer.'), answer])
    site.build(out)
    soup = soup_of(out / '99_probe.html')
    text = ' '.join(soup.get_text(' ').split())
    assert 'Worked answer' in text and 'The argument of the answer.' in text and 'forty-two' in text
    for element in soup.find_all(string=re.compile('The argument of the answer|forty-two')):
        for parent in element.parents:
            assert 'hidden' not in ' '.join(parent.get('class') or []), f'hidden by {parent.name}.{parent["class"]}'
            assert 'display:none' not in (parent.get('style') or '').replace(' ', '')


# --- a phone's screen and print ---------------------------------------------------------------------------------

def test_printing_opens_every_collapsed_section(built):
    """A closed <details> prints as its summary alone: every page carries the script that opens them all before
    printing and closes them after, its selector finds every closed section of the page, and the print style sheet
    shows a section's content where the browser can without the script."""
    out, written = built
    assert "addEventListener('beforeprint'" in site.PRINT_SCRIPT and "addEventListener('afterprint'" in site.PRINT_SCRIPT
    selector = re.search(r"querySelectorAll\('([^']+)'\)", site.PRINT_SCRIPT).group(1)
    assert 'section.open = true' in site.PRINT_SCRIPT and 'section.open = false' in site.PRINT_SCRIPT
    sections = 0
    for name in written:
        soup = soup_of(out / name)
        assert soup.find('script', string=site.PRINT_SCRIPT), f'{name} lacks the print script'
        closed = [details for details in soup.find_all('details') if not details.has_attr('open')]
        assert closed == soup.select(selector), f'{name}: the print script misses a closed section'
        sections += len(closed)
    assert sections >= 20, 'notebook 12 has a collapsed section per topic of its map'
    printed = (out / site.INDEX).read_text().split('@media print', 1)[1]
    assert re.search(r'details::details-content\s*\{[^}]*content-visibility:\s*visible', printed)


def test_long_code_names_in_a_collapsed_section_wrap_and_narrow_outputs_are_blocks(built):
    """On a phone, notebook 12's map names code that is wider than the screen: it wraps, and below the lab's 760 px
    break an output area is a block that scrolls rather than a table row whose box hides what passes its edge."""
    out, _ = built
    soup = soup_of(out / '12_framework_options.html')
    code = soup.select_one('details code')
    assert code is not None and style_of(soup, code).get('overflow-wrap') == 'anywhere'
    css = soup.find_all('style')[-1].get_text()
    narrow = re.search(r'@media only screen and \(max-width: 760px\)\s*\{([^{}]*)\{([^{}]*)\}', css)
    assert narrow and '.jp-OutputArea-child .jp-OutputArea-output' in narrow.group(1)
    assert 'display: block' in narrow.group(2)


def test_every_display_formula_shows_that_it_scrolls(built):
    out, written = built
    formulas = 0
    for name in written:
        soup = soup_of(out / name)
        for formula in soup.select('.display-formula'):
            assert 'scroll-hint' in formula['class'], f'{name}: a display formula without the scroll hint'
            formulas += 1
    assert formulas > 0
    soup = soup_of(out / '01_bandit_closed_form.html')
    hint = style_of(soup, soup.select_one('.display-formula'))
    assert hint.get('overflow-x') == 'auto' and 'local' in hint['background'] and 'scroll' in hint['background']


def test_every_output_figure_opens_full_size(built):
    """A figure of ten panels cannot be read at a phone's width: each output figure is a link to itself as a file of
    the site, the same bytes as the figure in the page."""
    import base64
    out, written = built
    figures = 0
    for name in written:
        for image in soup_of(out / name).select('.jp-OutputArea-output img'):
            link = image.find_parent('a')
            assert link is not None, f'{name}: an output figure that does not open full size'
            target = out / link['href']
            assert target.is_file(), f'{name}: {link["href"]} is not in the site'
            data = site.DATA_IMAGE.match(image['src'])['data']
            assert target.read_bytes() == base64.b64decode(data), f'{name}: {link["href"]} is another figure'
            figures += 1
    assert figures >= 10


def test_text_blocks_print_on_their_lines_at_a_size_that_fits(built):
    """Printed, a table in text keeps its alignment: every <pre> carries its longest line, which the print style
    sheet sizes its font by, and blocks and tables are not split across pages."""
    out, written = built
    for name in written:
        for pre in soup_of(out / name).find_all('pre'):
            longest = max(len(line) for line in pre.get_text().split('\n'))
            assert pre.get('style') == f'--columns: {max(longest, 1)}', f'{name}: {pre.get("style")}'
    printed = (out / site.INDEX).read_text().split('@media print', 1)[1]
    sized = re.search(r'([^{}]*)\{\s*font-size:\s*min\([^;]*var\(--columns', printed)
    # as specific as the screen's rules for code and output, which would otherwise keep their size and scroll bar
    assert sized and {'.jp-OutputArea-output pre', '.jp-InputArea-editor pre'} <= {
        selector.strip() for selector in sized.group(1).split(',')}
    assert re.search(r'pre, table\s*\{\s*break-inside:\s*avoid', printed)
