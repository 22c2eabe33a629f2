"""Atomic file output: write to a temporary file beside the destination, then rename it into place."""
import os
import tempfile
from contextlib import contextmanager
from pathlib import Path

from agentrl.stopping import writing


def current_umask():
    """The process's umask (read by setting and restoring it), so temp files get ordinary permissions."""
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextmanager
def atomic_output(dest, suffix=''):
    """Yield a temporary path beside dest; if the block succeeds it replaces dest, otherwise it is removed.

    A process set up with agentrl.stopping.exit_on_signal finishes the block before it leaves on a stop signal.
    """
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    with writing():
        fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=f'.{dest.stem}.', suffix=f'.tmp{suffix}')
        os.close(fd)
        try:
            yield Path(tmp)
            os.chmod(tmp, 0o666 & ~current_umask())
            os.replace(tmp, dest)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
