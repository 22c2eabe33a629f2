"""make html: every notebook and REPRODUCTION.md as pages, an index, links and images that resolve offline."""
import re
from pathlib import Path

import pytest

from agentrl.build import site

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


def test_every_notebook_and_the_report_have_a_page_and_the_index_lists_them(built):
    out, written = built
    stems = [stem for stem, _, _ in site.pages()]
    assert sorted(written) == sorted([f'{stem}.html' for stem in stems] + [site.INDEX, site.REPORT])
    index = (out / site.INDEX).read_text()
    for stem in stems:
        assert f'href="{stem}.html"' in index, f'the index does not link {stem}'
    assert f'href="{site.REPORT}"' in index


def test_every_local_link_and_image_resolves(built):
    out, written = built
    for name in written:
        for target in local_targets(out / name):
            assert (out / target).is_file(), f'{name} refers to {target}, which the site does not have'


def test_no_page_links_to_a_notebook_or_markdown_file(built):
    out, written = built
    for name in written:
        text = (out / name).read_text()
        assert not re.search(r'href="(?!https?:)[^"]*\.(ipynb|md)"', text), f'{name} still links a .ipynb or .md file'


def test_figures_of_the_notebooks_are_inside_their_pages(built):
    out, _ = built
    for stem in ('01_bandit_closed_form', '03_loss_gradients', '05_forward_reverse'):
        page = (out / f'{stem}.html').read_text()
        assert '<svg' in page or 'data:image/png;base64' in page, f'{stem}: its figure is not in the page'


def test_rewrite_points_links_at_pages_and_copied_figures():
    page = ('<a href="02_estimator_moments.ipynb#top">x</a><a href="../README.md">r</a>'
            '<a href="../REPRODUCTION.md">p</a><img src="../figures/ch10-seeds.svg"><a href="https://arxiv.org/x.md">w</a>')
    rewritten, figures = site.rewrite_links(page, {'02_estimator_moments'})
    assert rewritten == ('<a href="02_estimator_moments.html#top">x</a><a href="index.html">r</a>'
                         '<a href="reproduction.html">p</a><img src="figures/ch10-seeds.svg">'
                         '<a href="https://arxiv.org/x.md">w</a>')
    assert figures == {'ch10-seeds.svg'}


def test_a_failed_build_keeps_the_previous_site(tmp_path, monkeypatch):
    out = tmp_path / 'site'
    out.mkdir()
    (out / 'index.html').write_text('previous')
    monkeypatch.setattr(site, 'pages', lambda: [('99_missing', 'x', 'y')])
    with pytest.raises(FileNotFoundError, match='99_missing'):
        site.build(out)
    assert (out / 'index.html').read_text() == 'previous'
