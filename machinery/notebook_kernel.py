"""The kernel of the notebook running now: papermill's engine as the runner registers it, the private folder its IPC
sockets and captured output live in, and what it printed, turned into the runner's summary or failure lines.
"""
import contextlib
import functools
import logging
import os
import tempfile
import warnings
from pathlib import Path

from agentrl import stopping

class RunningKernel:
    """What the runner knows of the kernel of the notebook running now."""
    managers = []  # its kernel managers (each knows its connection file)
    cell = None  # the executed index of the cell papermill runs
    stopped = False  # a stop signal ended a run of this process
    output = ''  # what it printed outside the notebook (its stdout and stderr, captured into a file)
    warnings = []  # what the run logged at WARNING or above, and the warnings Python raised in this process
    rebuilt = []  # what the notebook's own output said of cached files found stale or damaged and rebuilt


def stop_kernels(started_before):
    """End this process's children that were not running in `started_before` (kernels), with their workers, and
    remove their connection files."""
    stopping.stop_processes(set(stopping.children()) - started_before)
    for manager in RunningKernel.managers:
        with contextlib.suppress(OSError, TypeError):
            os.unlink(manager.connection_file)


# --- what a run prints -----------------------------------------------------------------------------------------------

def messages(text):
    """The messages of captured output: each line that starts at the margin, with the indented lines under it (a
    warning's source line, a traceback's frames)."""
    found = []
    for line in text.splitlines():
        if not line.strip():
            continue
        if found and line[0].isspace():
            found[-1] += '\n' + line
        else:
            found.append(line)
    return found


def warnings_line(output, logged):
    """The one line under a successful run gathering what the kernel printed and the run logged, or None if nothing:
    "  2 warnings from the kernel (first: ...)"."""
    printed = messages(output)
    found = printed + list(logged)
    if not found:
        return None
    sources = ' and '.join(name for name, some in (('the kernel', printed), ('the run', logged)) if some)
    first = found[0].splitlines()[0].strip()
    first = first if len(first) <= 100 else first[:97] + '...'
    return f"  {len(found)} warning{'s' if len(found) > 1 else ''} from {sources} (first: {first})"


def failure_detail(output, logged):
    """What a failed run prints under its FAILED line: the kernel's captured output in full and what the run logged,
    indented ('' if there was none)."""
    parts = []
    if output.strip():
        parts += ["  the kernel's stdout and stderr:", *(f'    {line}' for line in output.rstrip().splitlines())]
    if logged:
        parts += ['  the run logged:', *(f'    {line}' for item in logged for line in item.splitlines())]
    return '\n'.join(parts)


class WarningCollector(logging.Handler):
    def __init__(self, found):
        super().__init__(logging.WARNING)
        self.found = found

    def emit(self, record):
        self.found.append(f'{record.name} {record.levelname.lower()}: {record.getMessage()}')


@contextlib.contextmanager
def collected_warnings(found):
    """Within the block, log records at WARNING or above (papermill's, nbclient's, jupyter_client's) and Python's
    warnings in this process are appended to `found` as text instead of being printed."""
    handler = WarningCollector(found)
    root = logging.getLogger()
    root.addHandler(handler)  # also keeps logging's last-resort handler from printing them
    try:
        with warnings.catch_warnings(record=True) as caught:
            yield
    finally:
        root.removeHandler(handler)
        found += [f'{w.category.__name__}: {w.message}' for w in caught]


@contextlib.contextmanager
def kernel_folder():
    """A private temporary folder for a kernel's connection file, its IPC sockets and its captured output."""
    # the path of an IPC socket (TMPDIR/agentrl-kernel-XXXXXXXX/k-N) must fit in 107 bytes: under a deep TMPDIR the
    # folder goes in /tmp
    parent = None if len(tempfile.gettempdir()) <= 70 else '/tmp'
    with tempfile.TemporaryDirectory(prefix='agentrl-kernel-', dir=parent) as folder:
        yield Path(folder)


# --- running --------------------------------------------------------------------------------------------------------

ENGINE = 'agentrl'
KERNEL_SETUP = "--IPKernelApp.exec_lines=__import__('agentrl.stopping').stopping.start_worker()"


@functools.lru_cache(maxsize=None)
def register_engine():
    """Register (once) papermill's nbclient engine with these changes, under the name ENGINE.

    The kernel listens on IPC sockets in a private temporary folder (kernel_folder), and its stdout and stderr go to a
    file there, read into RunningKernel.output when it has ended. Once every cell has answered, the kernel is shut down
    without the interrupt jupyter_client sends first: papermill's closing kernel_info request has been answered but
    the kernel may still be finishing it, and the interrupt would land there ("KeyboardInterrupt caught in kernel").

    An exception escaping a cell (the kernel dying, the cell timing out) carries the index of the cell papermill was
    running as `executed_index`; after a timeout the busy kernel is killed rather than asked to shut down (asked,
    it answers with a traceback of its own on stderr). On a stop signal (stopping.Stopped) the kernel and its workers
    are ended before nbclient cleans up (asked to shut down, a busy kernel is first interrupted: a KeyboardInterrupt
    traceback). The kernel leaves at once on SIGTERM, finishing a file it is writing, and when the runner ends
    (agentrl.stopping.start_worker, run by the kernel before any cell).
    """
    from jupyter_client.manager import AsyncKernelManager
    from nbclient.exceptions import CellTimeoutError
    from papermill.clientwrap import PapermillNotebookClient
    from papermill.engines import NBClientEngine, papermill_engines
    from papermill.log import logger
    from papermill.utils import remove_args

    class Manager(AsyncKernelManager):
        idle = False  # every cell has answered: at shutdown there is nothing to interrupt

        async def _async_interrupt_kernel(self):
            if not self.idle:
                await super()._async_interrupt_kernel()

        interrupt_kernel = _async_interrupt_kernel

    class Client(PapermillNotebookClient):
        folder = None  # the kernel's private folder while it runs

        def create_kernel_manager(self):
            manager = super().create_kernel_manager()
            manager.transport = 'ipc'  # over TCP the kernel warns on stderr that its traffic is not encrypted
            manager.connection_file = str(self.folder / 'kernel.json')
            manager.ip = str(self.folder / 'k')  # the sockets are k-1, k-2, ...
            RunningKernel.managers.append(manager)
            return manager

        @contextlib.contextmanager
        def setup_kernel(self, **kwargs):
            before = set(stopping.children())
            with kernel_folder() as self.folder:
                output = self.folder / 'output'
                try:
                    with open(output, 'wb') as file, super().setup_kernel(stdout=file, stderr=file, **kwargs):
                        try:
                            yield
                        except stopping.Stopped:
                            stop_kernels(before)  # nbclient's clean-up then finds the kernel gone
                            raise
                finally:
                    RunningKernel.output = output.read_bytes().decode(errors='replace') if output.is_file() else ''

        def papermill_execute_cells(self):
            super().papermill_execute_cells()  # returns after the last cell, or after one that raised
            self.km.idle = True

        def execute_cell(self, cell, cell_index, *args, **kwargs):
            RunningKernel.cell = cell_index
            try:
                return super().execute_cell(cell, cell_index, *args, **kwargs)
            except Exception as err:
                err.executed_index = cell_index
                if isinstance(err, CellTimeoutError):
                    self.shutdown_kernel = 'immediate'
                raise

    class Engine(NBClientEngine):
        @classmethod
        def execute_managed_notebook(cls, nb_man, kernel_name, log_output=False, stdout_file=None, stderr_file=None,
                                     start_timeout=60, execution_timeout=None, **kwargs):
            kwargs = remove_args(['input_path', 'timeout', 'startup_timeout'], **kwargs)
            return Client(nb_man, timeout=execution_timeout, startup_timeout=start_timeout, kernel_name=kernel_name,
                          log=logger, log_output=log_output, stdout_file=stdout_file, stderr_file=stderr_file,
                          extra_arguments=[KERNEL_SETUP], kernel_manager_class=Manager, **kwargs).execute()

    papermill_engines.register(ENGINE, Engine)
