"""Deterministic SVG figures: fixed hash salt, no date metadata, atomic writes."""
import matplotlib

matplotlib.use('svg')
import matplotlib.pyplot as plt  # noqa: E402

from agentrl.atomic import atomic_output  # noqa: E402
from agentrl.paths import figures_dir  # noqa: E402

COLORS = {'none': '#e66101', 'k1': '#4575b4', 'k2': '#1a9850', 'k3': '#d73027', 'k3+': '#984ea3'}
STYLE = {'figure.dpi': 100, 'font.size': 9, 'axes.grid': True, 'grid.alpha': 0.3, 'axes.spines.top': False,
         'axes.spines.right': False, 'legend.frameon': False, 'svg.fonttype': 'path'}


def new_figure(ncols=1, nrows=1, width=4.0, height=3.2, sharex=False):
    """A figure with the project style and an nrows x ncols grid of axes of the given size in inches each."""
    with plt.rc_context(STYLE):
        return plt.subplots(nrows, ncols, figsize=(width * ncols, height * nrows), sharex=sharex,
                            squeeze=False, layout='constrained')


def save_svg(fig, name, close=True):
    """Write fig as figures_dir()/name.svg, byte-identical on every run (hash salt = name, no date) -> path."""
    if not name.replace('-', '').replace('_', '').isalnum():
        raise ValueError(f'figure name {name!r} must contain only letters, digits, "-" and "_"')
    out = figures_dir() / f'{name}.svg'
    with atomic_output(out, '.svg') as tmp, plt.rc_context({**STYLE, 'svg.hashsalt': name}):
        fig.savefig(tmp, format='svg', metadata={'Date': None})
    if close:
        plt.close(fig)
    return out



PNG_DPI = 100  # the PNG twin is drawn at the figure's display size


def png_bytes(fig, dpi=PNG_DPI):
    """fig rendered by Agg as an 8-bit RGB PNG, written here (fixed filter, zlib level 9, no metadata) -> bytes."""
    import struct
    import zlib

    import numpy
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)
    saved_dpi = fig.dpi
    fig.set_dpi(dpi)
    try:
        canvas.draw()
        width, height = canvas.get_width_height()
        rgb = numpy.asarray(canvas.buffer_rgba())[:, :, :3]  # [H, W, 3]: the figure is opaque, alpha dropped
    finally:
        fig.set_dpi(saved_dpi)
    rows = numpy.concatenate([numpy.zeros((height, 1), numpy.uint8), rgb.reshape(height, 3 * width)], axis=1)
    rows = rows.tobytes()  # each row starts with filter type 0 (none)

    def chunk(kind, data):
        return struct.pack('>I', len(data)) + kind + data + struct.pack('>I', zlib.crc32(kind + data) & 0xffffffff)

    header = struct.pack('>IIBBBBB', width, height, 8, 2, 0, 0, 0)  # 8-bit RGB, no interlace
    return b'\x89PNG\r\n\x1a\n' + chunk(b'IHDR', header) + chunk(b'IDAT', zlib.compress(bytes(rows), 9)) + chunk(b'IEND', b'')


def show(fig, name):
    """Save fig as figures/<name>.svg and display it as SVG with a PNG twin (returns None: nothing echoes a path).

    JupyterLab shows the SVG when a notebook is trusted and the PNG when it is not (a notebook opened before it is
    run, or on a forge's viewer), so a committed figure is visible either way.
    """
    import base64

    from IPython.display import display

    path = save_svg(fig, name, close=False)  # the SVG first: drawing with Agg shifts its layout by rounding
    png = png_bytes(fig)
    width, height = fig.get_size_inches() * PNG_DPI
    plt.close(fig)
    bundle = {'text/plain': f'<figure {path.name}>', 'image/svg+xml': path.read_text(),
              'image/png': base64.b64encode(png).decode('ascii')}
    display(bundle, raw=True, metadata={'image/png': {'width': int(round(width)), 'height': int(round(height))}})
