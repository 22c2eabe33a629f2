"""Progress bars for long loops, for a person watching: a tqdm bar at a terminal, a bar in the notebook in Jupyter;
and a heartbeat for the notebook runner, which shows no bars but must tell a long computation from a hang.

Nothing is shown when AGENTRL_PROGRESS is '0' (the notebook runner sets it, so saved notebooks and CI logs hold no
bars), in CI, or when stderr is neither a terminal nor a Jupyter kernel's. The heartbeat is a file outside the notebook
(so it never changes a saved notebook), named by AGENTRL_HEARTBEAT, which only the runner sets: every step of a
progress() loop touches it, in the kernel and in the worker processes it starts (they inherit the variable).
"""
import html
import json
import os
import sys

HEARTBEAT = 'AGENTRL_HEARTBEAT'  # the variable naming the file the notebook runner watches for signs of life


def beat(**event):
    """Tell the notebook runner, if one watches, that work goes on: touch its heartbeat file, or with keywords (run=...,
    seconds=...) append them to it as one line of JSON. Does nothing when AGENTRL_HEARTBEAT is unset."""
    path = os.environ.get(HEARTBEAT)
    if not path:
        return
    try:
        if event:
            with open(path, 'a') as file:  # one short write per line: lines from several processes do not mix
                file.write(json.dumps(event) + '\n')
        else:
            os.utime(path)
    except OSError:  # the runner has gone, and its folder with it: nobody listens
        pass


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


def _beating(iterable):
    for item in iterable:
        yield item
        beat()


def progress(iterable, desc=None, total=None):
    """`iterable`, with a bar naming `desc` and counting steps where a person can see it, and a heartbeat after each
    step under the notebook runner; else unchanged."""
    shown, steps = where_shown(), iterable
    if shown == 'notebook':
        steps = _notebook_iter(iterable, desc, total)
    elif shown == 'terminal':
        from tqdm import tqdm
        steps = tqdm(iterable, desc=desc, total=total, leave=False)
    return _beating(steps) if os.environ.get(HEARTBEAT) else steps
