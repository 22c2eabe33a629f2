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


def save_svg(fig, name):
    """Write fig as figures_dir()/name.svg, byte-identical on every run (hash salt = name, no date) -> path."""
    if not name.replace('-', '').replace('_', '').isalnum():
        raise ValueError(f'figure name {name!r} must contain only letters, digits, "-" and "_"')
    out = figures_dir() / f'{name}.svg'
    with atomic_output(out, '.svg') as tmp, plt.rc_context({**STYLE, 'svg.hashsalt': name}):
        fig.savefig(tmp, format='svg', metadata={'Date': None})
    plt.close(fig)
    return out

