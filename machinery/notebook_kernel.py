"""The kernel of the notebook running now: papermill's engine as the runner registers it, the private folder its IPC
sockets, captured output and heartbeat file live in, the watch that stops a kernel silent for too long, and what it
printed, turned into the runner's summary or failure lines.
"""
import asyncio
import contextlib
import functools
import json
import logging
import os
import tempfile
import time
import warnings
from pathlib import Path

from agentrl import stopping
from agentrl.progress import HEARTBEAT

class RunningKernel:
    """What the runner knows of the kernel of the notebook running now."""
    managers = []  # its kernel managers (each knows its connection file)
    cell = None  # the executed index of the cell papermill runs
    stopped = False  # a stop signal ended a run of this process
    output = ''  # what it printed outside the notebook (its stdout and stderr, captured into a file)
    warnings = []  # what the run logged at WARNING or above, and the warnings Python raised in this process
    rebuilt = []  # what the notebook's own output said of cached files found stale or damaged and rebuilt
    runs = []  # the runs it loaded from the run cache or trained, as agentrl.progress.beat reported them


class KernelSilent(Exception):
    """The kernel sent nothing, and nothing it started beat the heartbeat, for `seconds` while running a cell."""

    def __init__(self, seconds):
        super().__init__(f'silent for {seconds} s')
        self.seconds = seconds


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


def read_runs(path):
    """The run events (dicts with 'run' and 'seconds') appended to a heartbeat file; [] if there is none."""
    if not path.is_file():
        return []
    events = []
    for line in path.read_text(errors='replace').splitlines():
        with contextlib.suppress(ValueError):
            event = json.loads(line)
            if isinstance(event, dict) and 'run' in event:
                events.append(event)
    return events


def runs_line(events, finished):
    """The one line saying how many distinct runs a notebook loaded from the run cache and how many it trained (and
    saved there), or None if it used none. A run both trained and loaded (by a later cell) counts as trained.
    finished=False: the run stopped or failed, and the line says a re-run starts from what was saved."""
    if not events:
        return None
    trained = {event['run'] for event in events if event.get('seconds') is not None}
    loaded = {event['run'] for event in events} - trained
    counts = f'{len(loaded)} loaded from the run cache, {len(trained)} trained and saved to it'
    if finished:
        return f'  runs: {counts}'
    return f'  runs before it ended: {counts}; a re-run loads these {len(loaded) + len(trained)} from the run cache'


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

    While a cell runs, the kernel is watched for signs of life: any message it sends about the cell (printed text, a
    display or its update, the cell starting or finishing), its captured output growing, or its heartbeat file
    touched (agentrl.progress: every step of a training loop, in the kernel or in a worker it started, and every run
    loaded or trained). When none comes for `silence_limit` s the cell fails with KernelSilent: a cell that keeps
    making progress runs as long as it needs, a hang is stopped.

    An exception escaping a cell (the kernel dying, the kernel silent too long) carries the index of the cell
    papermill was running as `executed_index`; a silent kernel is killed rather than asked to shut down (asked, a
    busy kernel answers with a traceback of its own on stderr). On a stop signal (stopping.Stopped) the kernel and
    its workers are ended before nbclient cleans up (asked to shut down, a busy kernel is first interrupted: a
    KeyboardInterrupt traceback). The kernel leaves at once on SIGTERM, finishing a file it is writing, and when the
    runner ends (agentrl.stopping.start_worker, run by the kernel before any cell).
    """
    from jupyter_client.manager import AsyncKernelManager
    from nbclient.exceptions import DeadKernelError
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
        silence_limit = None  # seconds a running cell may go without a sign of life (None: no limit)
        heard = 0.0  # time.time() of the last message the kernel sent about the running cell
        silent_for = None  # set when the watch found the kernel silent too long

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
                output, heartbeat = self.folder / 'output', self.folder / 'heartbeat'
                heartbeat.touch()
                env = {**os.environ, HEARTBEAT: str(heartbeat)}  # inherited by the workers the kernel starts
                try:
                    with open(output, 'wb') as file, super().setup_kernel(stdout=file, stderr=file, env=env, **kwargs):
                        try:
                            yield
                        except stopping.Stopped:
                            stop_kernels(before)  # nbclient's clean-up then finds the kernel gone
                            raise
                finally:
                    RunningKernel.output = output.read_bytes().decode(errors='replace') if output.is_file() else ''
                    RunningKernel.runs = read_runs(heartbeat)

        def silence(self):
            """Seconds since the last sign of life: a message about the cell, captured output, a heartbeat."""
            latest = self.heard
            for name in ('heartbeat', 'output'):
                with contextlib.suppress(OSError):
                    latest = max(latest, (self.folder / name).stat().st_mtime)
            return time.time() - latest

        async def _async_poll_kernel_alive(self):
            # nbclient's own watch over a running cell (is the kernel alive?), which also ends the cell when the
            # kernel has been silent too long: cancelling the wait for the reply is how nbclient ends it either way
            every = 1.0 if self.silence_limit is None else min(1.0, self.silence_limit / 4)
            while True:
                await asyncio.sleep(every)
                silent = self.silence()
                if self.silence_limit is not None and silent > self.silence_limit:
                    self.silent_for = silent
                    self.task_poll_for_reply.cancel()
                    return
                try:
                    await self._async_check_alive()
                except DeadKernelError:
                    self.task_poll_for_reply.cancel()
                    return

        def process_message(self, msg, *args, **kwargs):
            self.heard = time.time()  # any message about the running cell is a sign of life
            return super().process_message(msg, *args, **kwargs)

        def papermill_execute_cells(self):
            super().papermill_execute_cells()  # returns after the last cell, or after one that raised
            self.km.idle = True

        def execute_cell(self, cell, cell_index, *args, **kwargs):
            RunningKernel.cell = cell_index
            self.heard, self.silent_for = time.time(), None  # a cell starting is a sign of life
            try:
                return super().execute_cell(cell, cell_index, *args, **kwargs)
            except Exception as err:
                if isinstance(err, DeadKernelError) and self.silent_for is not None:
                    err = KernelSilent(round(self.silent_for))
                    self.shutdown_kernel = 'immediate'
                err.executed_index = cell_index
                raise err from None

    class Engine(NBClientEngine):
        @classmethod
        def execute_managed_notebook(cls, nb_man, kernel_name, log_output=False, stdout_file=None, stderr_file=None,
                                     start_timeout=60, silence_limit=None, **kwargs):
            kwargs = remove_args(['input_path', 'timeout', 'startup_timeout', 'execution_timeout'], **kwargs)
            client = Client(nb_man, timeout=None, startup_timeout=start_timeout, kernel_name=kernel_name,
                            log=logger, log_output=log_output, stdout_file=stdout_file, stderr_file=stderr_file,
                            extra_arguments=[KERNEL_SETUP], kernel_manager_class=Manager, **kwargs)
            client.silence_limit = silence_limit
            return client.execute()

    papermill_engines.register(ENGINE, Engine)
