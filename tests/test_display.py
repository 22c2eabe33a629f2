"""What a reader sees outside a trusted, running kernel: figures with a PNG twin, progress bars only for people."""
import base64
import json
import struct
import zlib
from pathlib import Path

import pytest

from agentrl import plotting, progress

NOTEBOOKS = Path(__file__).resolve().parents[1] / 'notebooks'


def test_show_displays_the_saved_svg_with_a_png_of_the_same_size(tmp_path, monkeypatch):
    monkeypatch.setenv('AGENTRL_FIGURES_DIR', str(tmp_path))
    shown = []
    monkeypatch.setattr('IPython.display.display', lambda obj, **kw: shown.append((obj, kw)))
    fig, axes = plotting.new_figure(ncols=2, width=3.0, height=2.0)
    axes[0, 0].plot([0, 1], [1, 0])
    assert plotting.show(fig, 'twin') is None  # a bare call at the end of a cell echoes nothing
    (bundle, kwargs), = shown
    assert bundle['image/svg+xml'] == (tmp_path / 'twin.svg').read_text() and kwargs['raw'] is True
    png = base64.b64decode(bundle['image/png'])
    width, height = struct.unpack('>II', png[16:24])
    assert (width, height) == (600, 200) == (kwargs['metadata']['image/png']['width'],
                                             kwargs['metadata']['image/png']['height'])
    length = struct.unpack('>I', png[33:37])[0]
    rows = zlib.decompress(png[41:41 + length])
    assert len(rows) == height * (1 + 3 * width)  # one filter byte and RGB per row
    assert set(rows[1:1 + 3 * width]) == {255}  # the top row of the figure is white background


def test_show_keeps_the_svg_identical_to_save_svg(tmp_path, monkeypatch):
    monkeypatch.setenv('AGENTRL_FIGURES_DIR', str(tmp_path))
    monkeypatch.setattr('IPython.display.display', lambda *a, **k: None)

    def figure():
        fig, axes = plotting.new_figure()
        axes[0, 0].plot([0, 1, 3], label='a')
        axes[0, 0].legend()
        return fig
    alone = plotting.save_svg(figure(), 'same').read_bytes()
    plotting.show(figure(), 'same')
    assert (tmp_path / 'same.svg').read_bytes() == alone


@pytest.mark.parametrize('path', sorted(NOTEBOOKS.glob('[0-9][0-9]_*.ipynb')), ids=lambda p: p.stem)
def test_every_committed_figure_output_has_a_png_an_untrusted_viewer_shows(path):
    nb = json.loads(path.read_text())
    for index, cell in enumerate(nb['cells']):
        for out in cell.get('outputs', []):
            data = out.get('data', {})
            if 'image/svg+xml' in data:
                assert 'image/png' in data, f'{path.name}: cell {index} shows an SVG without a PNG twin'
            assert 'IPython.core.display.SVG object' not in str(data.get('text/plain', '')), \
                f'{path.name}: cell {index} has a figure that shows as text when untrusted'


class FakeHandle:
    def __init__(self, log):
        self.log = log

    def update(self, bundle, raw):
        self.log.append(bundle['text/plain'])


def test_a_notebook_bar_names_the_work_and_counts_steps(monkeypatch):
    log = []
    monkeypatch.setattr(progress, 'where_shown', lambda: 'notebook')
    monkeypatch.setattr('IPython.display.display',
                        lambda bundle, raw, display_id: (log.append(bundle['text/plain']), FakeHandle(log))[1])
    assert list(progress.progress(range(3), desc="run 'none'")) == [0, 1, 2]
    assert log == ["run 'none': step 0 of 3", "run 'none': step 1 of 3", "run 'none': step 2 of 3",
                   "run 'none': step 3 of 3"]


def test_no_bar_when_the_runner_or_ci_says_so(monkeypatch):
    monkeypatch.setenv('AGENTRL_PROGRESS', '0')
    assert progress.where_shown() is None
    items = range(4)
    assert progress.progress(items, desc='x') is items
    monkeypatch.delenv('AGENTRL_PROGRESS')
    monkeypatch.setenv('CI', 'true')
    assert progress.where_shown() is None
