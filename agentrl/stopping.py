"""Stopping a run cleanly on SIGINT, SIGTERM or SIGHUP: every process it started ends, and no file is left half-written.

Three pieces. `stop_processes` ends process trees (SIGTERM, then SIGKILL after a grace period), group by group, so
workers that lost their parent are found too. `exit_on_signal` makes a worker (a notebook kernel, a training or
measurement process) leave at once on SIGTERM, except inside an `atomic_output` block, which it finishes first (a
cache file is then whole or absent, and no temporary file stays). `die_with_parent` asks Linux to send a worker
SIGTERM when the process that started it ends, however it ends.
"""
import contextlib
import ctypes
import os
import signal
import sys
import time

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)  # what a terminal, `timeout`, `kill` or a CI cancel sends
GRACE_SECONDS = 2.0  # how long stop_processes waits after SIGTERM before SIGKILL
_PR_SET_PDEATHSIG = 1  # prctl option (linux/prctl.h)


class Stopped(BaseException):
    """Raised in the main thread by a stop signal (a BaseException, like KeyboardInterrupt, so `except Exception`
    blocks let it through and every `finally` block runs)."""

    def __init__(self, signum):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum

    @property
    def name(self):
        return signal.Signals(self.signum).name

    @property
    def exit_code(self):
        """The shell's code for a process ended by the signal: 128 + its number."""
        return 128 + self.signum


# --- the processes of a run -------------------------------------------------------------------------------------

def _stat(pid):
    """(state, parent pid, process group) of a live process from /proc, or None if it is gone (or a zombie)."""
    try:
        with open(f'/proc/{pid}/stat', 'rb') as file:
            fields = file.read().rsplit(b')', 1)[1].split()
    except OSError:
        return None
    state, ppid, pgid = fields[0].decode(), int(fields[1]), int(fields[2])
    return None if state in ('Z', 'X') else (state, ppid, pgid)


def _table():
    """{pid: (parent pid, process group)} of every live process (Linux: read from /proc)."""
    table = {}
    for name in os.listdir('/proc'):
        if name.isdigit():
            stat = _stat(int(name))
            if stat is not None:
                table[int(name)] = stat[1:]
    return table


def descendants(pid, table=None):
    """Pids of every live process below pid (children, their children, ...), nearest first."""
    table = _table() if table is None else table
    found, frontier = [], [pid]
    while frontier:
        frontier = [child for child, (parent, _) in table.items() if parent in frontier]
        found += frontier
    return found


def children(pid=None):
    """Pids of the live children of pid (default: this process)."""
    pid = os.getpid() if pid is None else pid
    return [child for child, (parent, _) in _table().items() if parent == pid]


def _members(roots, seen=()):
    """The live processes of the trees under roots, of the process groups the roots or their descendants lead (so
    orphans of a dead root are found too), and those of `seen` still alive."""
    table = _table()
    tree = {pid for root in roots if root in table for pid in [root, *descendants(root, table)]}
    groups = ({pid for pid in tree if table[pid][1] == pid} | set(roots)) - {os.getpgrp()}
    return (tree | {pid for pid, (_, group) in table.items() if group in groups}
            | {pid for pid in seen if pid in table}) - {os.getpid()}


def alive(pid):
    return _stat(pid) is not None


def stop_processes(roots, grace=GRACE_SECONDS):
    """End the processes under `roots` (pids) and the groups they lead: SIGTERM, then SIGKILL for what is left after
    `grace` seconds -> the pids that were running. Never signals this process or its own group."""
    roots = list(roots)
    if not sys.platform.startswith('linux'):  # no /proc: the roots and the groups they lead only
        for root in roots:
            with contextlib.suppress(OSError):
                os.killpg(root, signal.SIGKILL) if os.getpgid(root) == root else os.kill(root, signal.SIGKILL)
        return roots
    seen, terminated = set(), set()
    deadline = time.monotonic() + grace
    while True:  # SIGTERM to each process once (new ones too) until all are gone or the grace is over
        members = _members(roots, seen)
        for pid in members - terminated:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGTERM)
        seen |= members
        terminated |= members
        if not members or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    deadline = time.monotonic() + 2.0  # SIGKILL cannot be refused: this only waits for the kernel to end them
    while members and time.monotonic() < deadline:
        for pid in members:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.05)
        members = _members(roots, seen)
        seen |= members
    return sorted(seen)


# --- a worker's side --------------------------------------------------------------------------------------------

_writing = 0  # atomic_output blocks running in this process
_pending = None  # the stop signal that arrived during one of them


def _exit_now(signum, frame):
    global _pending
    if _writing:
        _pending = signum  # finish the file first (writing()'s exit leaves)
        return
    os._exit(128 + signum)


def exit_on_signal(signals=(signal.SIGTERM,)):
    """Leave at once on each of `signals` (exit status 128 + its number), or, inside an atomic write, right after it.

    os._exit runs no handler and prints nothing: for processes whose parent reports the stop (a kernel, a pool
    worker). Only in the main thread (signal handlers live there)."""
    for sig in signals:
        signal.signal(sig, _exit_now)


@contextlib.contextmanager
def writing():
    """A block that a stop signal handled by exit_on_signal does not cut: it leaves when the block ends."""
    global _writing
    _writing += 1
    try:
        yield
    finally:
        _writing -= 1
        if not _writing and _pending is not None:
            os._exit(128 + _pending)


def die_with_parent(signum=signal.SIGTERM):
    """Ask Linux to send this process `signum` when the thread that started it ends (prctl PR_SET_PDEATHSIG)
    -> whether that is armed (False off Linux). If the parent is already gone, the signal comes at once."""
    if not sys.platform.startswith('linux'):
        return False
    parent = os.getppid()
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_PDEATHSIG, int(signum), 0, 0, 0) != 0:
        return False
    if os.getppid() != parent:
        os.kill(os.getpid(), signum)
    return True


def start_worker():
    """Initializer of a worker process (a notebook kernel, a pool's `initializer`): it ends with its parent and
    leaves at once on SIGTERM, finishing an atomic write first (and quiet_resource_tracker)."""
    exit_on_signal()
    die_with_parent()
    quiet_resource_tracker()


def quiet_resource_tracker():
    """The resource tracker multiprocessing starts from this process (it removes the semaphores of pools whose owner
    a stop ended) does so without a warning on stderr: the filter is passed on to it as -W."""
    quiet = 'ignore::UserWarning:multiprocessing.resource_tracker'
    if quiet not in sys.warnoptions:
        sys.warnoptions.append(quiet)


# --- a command's side -------------------------------------------------------------------------------------------

def die_by(signum):
    """End this process by signal `signum` with its default action, after a clean stop (a calling shell or make then
    sees the signal, as it would have without the clean-up), flushing stdout and stderr first."""
    sys.stdout.flush()
    sys.stderr.flush()
    signal.signal(signum, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, [signum])
    os.kill(os.getpid(), signum)
    os._exit(128 + signum)  # not reached

class _Guard:
    signum = None  # the first stop signal received
    held = 0  # hold() blocks running


def _raise_stopped(signum, frame):
    if _Guard.signum is not None:
        return  # already stopping
    _Guard.signum = signum
    if not _Guard.held:
        raise Stopped(signum)


@contextlib.contextmanager
def raise_on_signals(signals=SIGNALS):
    """Within the block, the first of `signals` raises Stopped in the main thread (later ones are ignored while the
    stop proceeds); the previous handlers come back after it."""
    previous = {sig: signal.signal(sig, _raise_stopped) for sig in signals}
    _Guard.signum = None
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        _Guard.signum = None


@contextlib.contextmanager
def hold():
    """A block a stop signal does not cut (publishing finished files): Stopped is raised when it ends."""
    _Guard.held += 1
    try:
        yield
    finally:
        _Guard.held -= 1
    if not _Guard.held and _Guard.signum is not None:
        raise Stopped(_Guard.signum)
