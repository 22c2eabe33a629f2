"""A worker process of a search and the trials it runs: the objective, a trial's measurements (in the worker or on a
Dask cluster), its heartbeat on a shared server, and the SIGTERM that cuts it."""
import contextlib
import importlib
import os
import signal
import threading
import time
import traceback
import warnings

import optuna
from optuna.trial import TrialState

from agentrl import executors
from agentrl.fingerprint import code_fingerprint
from machinery.search.space import PRUNE_BELOW
from machinery.search.storage import make_storage, plain, worker_sampler


# A worker process's state, here alone: SIGTERM's handler reads it while the trial runs
_IN_TRIAL = threading.Event()  # set while a worker runs the objective (SIGTERM then interrupts the trial)
_STOPPING = threading.Event()  # a worker was told to stop (SIGTERM)


def objective_value(rows_held, band_distance):
    """Rows held first, band distance second: rows + 1 / (1 + distance) (the fraction is in (0, 1], so one more row
    held always wins)."""
    return rows_held + 1.0 / (1.0 + band_distance)


def row_record(row):
    """One judged row as plain data: the quantity, the book's value, the band, the values (per seed or per batch
    seed), their mean, whether it holds, its band distance."""
    spec = getattr(row, 'spec', row)  # calibrate.Row keeps the quantity and band in its RowSpec
    band = {name: getattr(spec, name, None) for name in ('quantity', 'book', 'low', 'high', 'fmt', 'source', 'scale')}
    return plain(dict(band, values=tuple(row.values), mean=row.mean, holds=bool(row.holds), distance=row.distance))


def rows_record(rows, measurement):
    """The judged rows as trial attributes: each row, the rows held and the band distance."""
    return dict(rows=[row_record(row) for row in rows], rows_held=int(measurement.rows_held(rows)),
                band_distance=float(measurement.band_distance(rows)))


@contextlib.contextmanager
def uninterrupted():
    """A trial's storage writes run to their end: a SIGTERM meanwhile cuts the trial just after them. Cut inside a
    SQLite write, a worker could keep the database's lock, and the other worker would wait on it past the grace."""
    _IN_TRIAL.clear()
    try:
        yield
    finally:
        _IN_TRIAL.set()
    if _STOPPING.is_set():
        raise KeyboardInterrupt


def objective(trial, search, report=None):
    """One trial: the configuration `trial` samples, measured (see measure_trial); `report(number)` is told the trial
    started. A measurement that raises fails the trial with its error recorded."""
    started = time.time()
    _IN_TRIAL.set()
    try:
        if report:
            report(trial.number)
        with uninterrupted():
            config = search.trial_space()(trial)  # first: an interrupted trial then has its parameters
        try:
            return measure_trial(trial, search, config, started)
        except optuna.TrialPruned:
            raise
        except Exception:
            with uninterrupted():
                trial.set_user_attr('error', traceback.format_exc()[-4000:])
                trial.set_user_attr('seconds', time.time() - started)
            raise
    finally:
        _IN_TRIAL.clear()


def measure_trial(trial, search, config, started):
    """Build the RL base; measure the first seed and every batch seed; prune if that seed holds fewer than
    PRUNE_BELOW rows, else measure the other seeds -> the objective. The rows go into the trial's attributes."""
    measurement = search.measurement()
    protocol, _ = search.protocols()
    with uninterrupted():
        trial.set_user_attr('config', config.describe())
        trial.set_user_attr('config_key', config.key())
        trial.set_user_attr('protocol', plain(protocol))
        trial.set_user_attr('code', code_fingerprint())  # the training code it was measured with (stale if it changes)
    measurement.prepare(config)
    first = measured(search, config, protocol, [('batch', seed) for seed in protocol.batch_seeds]
                      + [('seed', protocol.seeds[0])])
    batches, seeds = first[:-1], first[-1:]
    rows = measurement.judge(seeds, batches)
    held, distance = measurement.rows_held(rows), measurement.band_distance(rows)
    with uninterrupted():
        trial.report(objective_value(held, distance), step=0)
    if held < PRUNE_BELOW:
        with uninterrupted():
            keep_rows(trial, rows, protocol.seeds[:1], measurement, started)
        raise optuna.TrialPruned(f'seed {protocol.seeds[0]} holds {held} rows, fewer than {PRUNE_BELOW}')
    seeds += measured(search, config, protocol, [('seed', seed) for seed in protocol.seeds[1:]])
    with uninterrupted():
        record = keep_rows(trial, measurement.judge(seeds, batches), protocol.seeds, measurement, started)
    return objective_value(record['rows_held'], record['band_distance'])


def measured(search, config, protocol, kinds_and_seeds):
    """Each ('seed'|'batch', seed) of a trial measured: here, one after the other, or, with search.scheduler, as jobs
    on that Dask cluster's workers (agentrl.executors; each job carries the configuration and the CPU pin)."""
    jobs = [((kind, search.measure, config, seed, protocol),) for kind, seed in kinds_and_seeds]
    with executors.sweep_executor(1, scheduler=search.scheduler) as pool:
        return executors.ordered(pool, measure, jobs)


def measure(job):
    """One measurement of a trial or a confirmation, in a pool process or a Dask worker: ('prepare'|'seed'|'batch',
    measure, config, seed, protocol)."""
    kind, how, config, seed, protocol = job  # how: Search.measure, a module name or an object
    measurement = importlib.import_module(how) if isinstance(how, str) else how
    if kind == 'prepare':
        measurement.prepare(config)  # builds the RL base into the cache (what it returns stays in the process)
        return None
    if kind == 'seed':
        return measurement.measure_seed(config, seed, protocol)
    return measurement.measure_batch(config, seed)


def keep_rows(trial, rows, seeds, measurement, started):
    """The judged rows, the seeds they were judged on and the trial's seconds, as trial attributes."""
    record = dict(rows_record(rows, measurement), seeds=list(seeds), seconds=time.time() - started)
    for key, value in record.items():
        trial.set_user_attr(key, value)
    return record


def _on_sigterm(signum, frame):
    _STOPPING.set()
    if _IN_TRIAL.is_set():  # inside the objective: cut the trial (Optuna marks it failed, without an error)
        raise KeyboardInterrupt


def _watch_parent(parent):
    while os.getppid() == parent:
        time.sleep(2)
    os.kill(os.getpid(), signal.SIGTERM)  # the search died: stop like on SIGTERM


@contextlib.contextmanager
def heartbeat(storage, study, number):
    """Trial `number`'s heartbeat recorded in `storage` while the block runs, every heartbeat interval (what
    study.optimize does for its trials; ours are asked for under a lock); nothing without heartbeats (SQLite)."""
    interval = storage.get_heartbeat_interval()
    if interval is None:
        yield
        return
    trial_id = storage.get_trial_id_from_study_id_trial_number(storage.get_study_id_from_name(study.study_name), number)
    stop = threading.Event()

    def beat():
        while True:
            storage.record_heartbeat(trial_id)
            if stop.wait(timeout=interval):
                return

    thread = threading.Thread(target=beat)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def run_trial(study, storage, search, asking, report):
    """One trial of the study in `storage`: asked for under the `asking` lock (two SQLite clients can be handed the
    same queued trial), run, told -> its number. On a shared server the trial has a heartbeat, and stale trials are
    failed first."""
    if search.storage:
        optuna.storages.fail_stale_trials(study)
    with asking:
        trial = study.ask()
    with heartbeat(storage, study, trial.number):
        try:
            value = objective(trial, search, report)
        except optuna.TrialPruned:
            study.tell(trial, state=TrialState.PRUNED)
        except KeyboardInterrupt:
            study.tell(trial, state=TrialState.FAIL)  # cut: failed without an error, so it is queued again
            raise
        except Exception:
            study.tell(trial, state=TrialState.FAIL)  # the objective recorded the error
        else:
            study.tell(trial, value)
    return trial.number


def worker(index, search, url, session, deadline, stop, claims, asking, messages, parent):
    """A worker process: one trial at a time from the shared storage until told to stop, the session's trials are
    claimed, or the budget is used. It reports ('start'|'end', index, trial number) to the search."""
    signal.signal(signal.SIGTERM, _on_sigterm)  # SIGINT and SIGHUP stay ignored: the search decides
    threading.Thread(target=_watch_parent, args=(parent,), daemon=True).start()
    optuna.logging.set_verbosity(optuna.logging.ERROR)  # the search prints one line per trial
    warnings.simplefilter('ignore', optuna.exceptions.ExperimentalWarning)
    import torch
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // max(1, search.processes)))
    storage = make_storage(url)
    study = optuna.load_study(study_name=search.study, storage=storage, sampler=worker_sampler(search, session, index))
    report = lambda number: messages.put(('start', index, number))  # noqa: E731
    errors = 0
    try:
        while not (stop.is_set() or _STOPPING.is_set()) and time.time() < deadline:
            if len(study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))) >= search.budget_trials:
                break
            with claims.get_lock():  # trials this session may still start (-1: no limit)
                if claims.value == 0:
                    break
                if claims.value > 0:
                    claims.value -= 1
            try:
                messages.put(('end', index, run_trial(study, storage, search, asking, report)))
                errors = 0
            except Exception as error:  # the storage failed, not the objective: retry a few times
                errors += 1
                messages.put(('error', index, f'{type(error).__name__}: {error}'))
                if errors >= 5:
                    break
                time.sleep(5)
    except KeyboardInterrupt:
        pass
