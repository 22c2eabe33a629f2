"""Progress bars for long loops, shown only to a person at a terminal (never in notebooks or CI logs)."""
import os
import sys


def interactive():
    """True when stderr is a terminal, outside Jupyter and CI, and AGENTRL_PROGRESS is not '0'."""
    if os.environ.get('AGENTRL_PROGRESS') == '0' or os.environ.get('CI'):
        return False
    if 'ipykernel' in sys.modules:
        return False
    return hasattr(sys.stderr, 'isatty') and sys.stderr.isatty()


def progress(iterable, desc=None, total=None):
    """`iterable` wrapped in a tqdm bar when interactive(), else returned unchanged (no timing text in logs)."""
    if not interactive():
        return iterable
    from tqdm import tqdm
    return tqdm(iterable, desc=desc, total=total, leave=False)
