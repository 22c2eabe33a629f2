"""Where a sweep's jobs run: in local spawned worker processes (the default), or through any
concurrent.futures.Executor the caller passes, such as a Dask cluster's (`distributed.Client(address).get_executor()`).

A worker may be another machine, with none of this process's module-global state: each job carries what it needs
as arguments (a run's job carries the substrate description, agentrl.ch10.experiments.run_job) and this process's
CPU pin, which the worker applies and checks before it computes (`pinned`). Results come back to the caller; a
run's payload is saved in the caller's run cache, never on the worker's disk, so the machines need no shared
filesystem (agentrl.ch10.experiments.ensure_runs).
"""
import contextlib
import os
import signal
import socket
import sys
from concurrent.futures import ProcessPoolExecutor, as_completed
from multiprocessing import get_context
from urllib.parse import urlsplit

from agentrl import stopping
from agentrl.cpu import ARITHMETIC_VAR, PINS, pins
from agentrl.fingerprint import kernel_choice

SCHEDULER_VARIABLE = 'AGENTRL_DASK_SCHEDULER'  # a Dask scheduler's address (tcp://host:8786): sweeps go to its cluster
SCHEDULER_SCHEMES = ('tcp', 'tls')  # how a Dask scheduler on another machine is reached
CONNECT_SECONDS = 30  # how long to wait for a scheduler to answer before saying it is not there


def scheduler_address(environ=None):
    """The Dask scheduler $AGENTRL_DASK_SCHEDULER names (in `environ`, default os.environ), or None."""
    environ = os.environ if environ is None else environ
    return environ.get(SCHEDULER_VARIABLE) or None


def local_executor(processes):
    """The default executor: `processes` spawned worker processes that end with this one and leave at once on SIGTERM
    (finishing a file being written first: agentrl.stopping.start_worker)."""
    stopping.quiet_resource_tracker()
    return ProcessPoolExecutor(processes, mp_context=get_context('spawn'), initializer=stopping.start_worker)


def worker_count(processes):
    """How many local worker processes to start: `processes`, or one per core this process may use when None.

    Each run trains single-threaded in its worker, so the count changes only how long a sweep takes, never a number.
    """
    if processes is None:
        return len(os.sched_getaffinity(0)) if hasattr(os, 'sched_getaffinity') else (os.cpu_count() or 1)
    if isinstance(processes, bool) or not isinstance(processes, int) or processes < 1:
        raise ValueError(f'processes must be a whole number >= 1, or None for one per core; got {processes!r}')
    return processes


@contextlib.contextmanager
def sweep_executor(processes, executor=None, scheduler=None):
    """The executor a sweep's jobs go through inside the block; None: run them here, one after the other.

    executor: any concurrent.futures.Executor, used as given (its owner shuts it down). Else scheduler, a Dask
    scheduler's address: its cluster, through a distributed.Client closed with the block. Else, when processes > 1,
    local_executor(processes) (None: one per core, worker_count), shut down with the block; on a stop (agentrl.stopping.Stopped, KeyboardInterrupt) its
    workers are told to leave at once rather than waited for.
    """
    if executor is not None:
        yield executor
    elif scheduler:
        with dask_client(scheduler) as client:
            yield client.get_executor(pure=False)  # pure=False: every job runs, none is merged with an equal one
    elif worker_count(processes) > 1:
        processes = worker_count(processes)
        before = set(stopping.children())
        pool = local_executor(processes)
        try:
            yield pool
        except BaseException as error:
            stopped = not isinstance(error, Exception)
            if stopped:  # the workers leave now (their grading workers with them); the resource tracker ignores
                for pid in set(stopping.children()) - before:  # SIGTERM and goes when this process has gone
                    with contextlib.suppress(OSError):
                        os.kill(pid, signal.SIGTERM)
            pool.shutdown(wait=not stopped, cancel_futures=True)
            raise
        pool.shutdown()
    else:
        yield None


def check_scheduler_address(address):
    """address, if it has the form of a Dask scheduler's (tcp://HOST:PORT or tls://HOST:PORT); else ValueError."""
    parts = urlsplit(str(address))
    try:
        port = parts.port
    except ValueError:  # a port that is not a number, or out of range
        port = None
    if parts.scheme not in SCHEDULER_SCHEMES or not parts.hostname or port is None or parts.path not in ('', '/'):
        raise ValueError(f'{address!r} is not a Dask scheduler address: expected tcp://HOST:PORT or tls://HOST:PORT '
                         f'(e.g. tcp://10.0.0.5:8786), given by --scheduler or ${SCHEDULER_VARIABLE}')
    return address


@contextlib.contextmanager
def dask_client(address, timeout=CONNECT_SECONDS):
    """A distributed.Client of the scheduler at `address`, closed with the block. It is not made Dask's default
    scheduler (that would be state left in this process), and every worker it has must run one thread: a job
    switches process-wide state (the active substrate, torch's random generator), which two jobs at once would share."""
    from distributed import Client  # only a sweep on a cluster needs it

    check_scheduler_address(address)
    try:
        client = Client(address, timeout=timeout, set_as_default=False)
    except OSError as error:  # refused, unreachable, or no answer within the timeout
        raise ConnectionError(f'no Dask scheduler answered at {address} within {timeout} s ({error}): start one '
                              f'there (dask scheduler) or correct --scheduler / ${SCHEDULER_VARIABLE}') from error
    with client:
        crowded = {worker: n for worker, n in client.nthreads().items() if n != 1}
        if crowded:
            raise ValueError(f'the Dask workers {crowded} of {address} run more than one thread each; start them with '
                             '--nthreads 1 (one worker process per core instead)')
        yield client


def dask_worker_threads():
    """The number of threads of the Dask worker this process is, or None if it is not one."""
    distributed = sys.modules.get('distributed')  # a Dask worker has imported it; nothing else here needs to
    if distributed is None:
        return None
    try:
        return distributed.get_worker().state.nthreads
    except ValueError:  # not inside a Dask worker's task
        return None


def pin_environment():
    """This process's CPU pin as a job carries it: the pin variables set here (agentrl.cpu.PINS) and the kernels
    torch computes with (agentrl.fingerprint.kernel_choice)."""
    carried = [*PINS, ARITHMETIC_VAR]
    return dict(variables={name: os.environ[name] for name in carried if name in os.environ}, kernels=kernel_choice())


def pinned(pin, function, *args):
    """In a worker: function(*args), once the caller's CPU pin (pin_environment()) is in force here too.

    The pin variables missing here are set (they take effect while torch has not computed anything in this process;
    importing agentrl, which unpickling the job does, has set them already where the pin applies). A worker that
    still computes with other kernels than the caller would give other bits, so it refuses the job; so does a Dask
    worker of several threads (two jobs at once would share the process's active substrate and random generator).
    """
    threads = dask_worker_threads()
    if threads not in (None, 1):
        raise RuntimeError(f'worker {socket.gethostname()} (pid {os.getpid()}) runs {threads} Dask threads: start it '
                           'with --nthreads 1 (one worker process per core instead)')
    for name, value in pin['variables'].items():
        os.environ.setdefault(name, value)
    here = kernel_choice()
    if here != pin['kernels']:
        raise RuntimeError(f'worker {socket.gethostname()} (pid {os.getpid()}) computes with the CPU kernels '
                           f'{here}, the caller with {pin["kernels"]}: its results would differ. Start the worker '
                           'on the same kind of machine, with ' + ' '.join(f'{k}={v!r}' for k, v in pins().items())
                           + ' in its environment (or import agentrl before torch in it)')
    return function(*args)


def finished(executor, function, jobs):
    """(index, function(*jobs[index])) for every job, yielded as each finishes, through executor (None: here, in order).

    Through an executor, a job that raises stops none of the others: their results are yielded, then the first error
    is raised. When the caller stops iterating (a stop signal, an error of its own), the jobs not started are cancelled.
    """
    if executor is None:
        for index, job in enumerate(jobs):
            yield index, function(*job)
        return
    pin = pin_environment()
    futures = {executor.submit(pinned, pin, function, *job): index for index, job in enumerate(jobs)}
    errors = []
    try:
        for future in as_completed(futures):
            try:
                result = future.result()
            except Exception as error:  # noqa: BLE001 - raised once the other jobs are done
                errors.append(error)
                continue
            yield futures[future], result
    finally:
        for future in futures:
            future.cancel()
    if errors:
        raise errors[0]


def ordered(executor, function, jobs):
    """[function(*job) for job in jobs], computed through executor (None: here)."""
    results = [None] * len(jobs)
    with contextlib.closing(finished(executor, function, jobs)) as each:
        for index, result in each:
            results[index] = result
    return results
