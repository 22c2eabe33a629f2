"""Progress bars for long loops, for a person watching: a tqdm bar at a terminal, a bar in the notebook in Jupyter.

Nothing is shown when AGENTRL_PROGRESS is '0' (the notebook runner sets it, so saved notebooks and CI logs hold no
bars), in CI, or when stderr is neither a terminal nor a Jupyter kernel's.
"""
import html
import os
import sys


def where_shown():
    """'terminal', 'notebook' or None: where progress() would draw its bar now."""
    if os.environ.get('AGENTRL_PROGRESS') == '0' or os.environ.get('CI'):
        return None
    if 'ipykernel' in sys.modules:
        try:
            from IPython import get_ipython
        except ImportError:
            return None
        shell = get_ipython()
        return 'notebook' if shell is not None and getattr(shell, 'kernel', None) is not None else None
    return 'terminal' if hasattr(sys.stderr, 'isatty') and sys.stderr.isatty() else None


def interactive():
    """True when progress() draws a bar (a terminal or a Jupyter notebook, and AGENTRL_PROGRESS is not '0')."""
    return where_shown() is not None


class NotebookBar:
    """A one-line bar in a notebook output: '<desc>: step i of n', redrawn in place through a display handle."""

    def __init__(self, desc, total):
        from IPython.display import display
        self.desc, self.total, self.done = desc or 'working', total, 0
        self.handle = display(self._bundle(), raw=True, display_id=True)

    def _bundle(self):
        text = f'{self.desc}: step {self.done} of {self.total}' if self.total else f'{self.desc}: step {self.done}'
        bar = f'<progress value="{self.done}" max="{self.total}" style="width: 16em"></progress> ' if self.total else ''
        return {'text/plain': text, 'text/html': f'<div>{bar}<code>{html.escape(text)}</code></div>'}

    def advance(self):
        self.done += 1
        self.handle.update(self._bundle(), raw=True)


def _notebook_iter(iterable, desc, total):
    if total is None and hasattr(iterable, '__len__'):
        total = len(iterable)
    bar = NotebookBar(desc, total)
    for item in iterable:
        yield item
        bar.advance()


def progress(iterable, desc=None, total=None):
    """`iterable`, with a bar naming `desc` and counting steps where a person can see it; else unchanged."""
    shown = where_shown()
    if shown == 'notebook':
        return _notebook_iter(iterable, desc, total)
    if shown == 'terminal':
        from tqdm import tqdm
        return tqdm(iterable, desc=desc, total=total, leave=False)
    return iterable
