"""Where a study lives: the live SQLite database and its committed snapshot (or a shared server), the study opened
with its rules fixed, its first trials queued and its interrupted trials queued again, its trials as plain data."""
import contextlib
import dataclasses
import fcntl
import json
import math
import os
import socket
import sqlite3
import warnings
import zlib
from pathlib import Path

import optuna
from optuna.trial import TrialState

from agentrl.atomic import atomic_output
from agentrl.calibration.freeze import CONFIRM_ROWS, FALLBACK_CANDIDATES, budget_exhausted, rank
from agentrl.paths import REPO
from agentrl.substrate.config import CANDIDATES
from machinery.record_words import counts
from machinery.search.space import FIRST_TRIALS, PRUNE_BELOW, SPACE, config_from_params, params_of


MAX_ATTEMPTS = 3  # an interrupted trial runs again (same parameters, before new samples); at most 3 runs in all


def sqlite_url(path):
    return f'sqlite:///{Path(path).resolve()}'


def make_storage(url):
    """Optuna's RDB storage: SQLite waits up to a minute for a lock; a server gets heartbeats (a trial of a machine
    that died is failed by the next trial that starts anywhere)."""
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', optuna.exceptions.ExperimentalWarning)
        if url.startswith('sqlite'):
            return optuna.storages.RDBStorage(url, engine_kwargs={'connect_args': {'timeout': 60}})
        return optuna.storages.RDBStorage(url, heartbeat_interval=60, grace_period=300)


def copy_sqlite(source, dest):
    """A consistent copy of a SQLite database (the backup API, safe while others write), renamed into place."""
    with atomic_output(dest, suffix='.db') as tmp:
        src = sqlite3.connect(f'file:{Path(source).resolve()}?mode=ro', uri=True, timeout=60)
        dst = sqlite3.connect(tmp)
        try:
            src.backup(dst)
            dst.execute('VACUUM')
        finally:
            dst.close()
            src.close()


def progress(path, study_name):
    """How far the study in a SQLite file is: (finished trials, search seconds), read without writing to the file
    (plain SQL on Optuna's tables); (-1, 0.0) if the file holds no such study."""
    connection = None
    try:
        connection = sqlite3.connect(f'file:{Path(path).resolve()}?mode=ro', uri=True, timeout=60)
        found = connection.execute('SELECT study_id FROM studies WHERE study_name = ?', (study_name,)).fetchone()
        if found is None:
            return (-1, 0.0)
        finished = connection.execute("SELECT COUNT(*) FROM trials WHERE study_id = ? AND state IN "
                                      "('COMPLETE', 'PRUNED', 'FAIL')", found).fetchone()[0]
        seconds = connection.execute("SELECT value_json FROM study_user_attributes WHERE study_id = ? AND "
                                     "key = 'search_seconds'", found).fetchone()
        return (finished, float(json.loads(seconds[0])) if seconds else 0.0)
    except sqlite3.DatabaseError:
        return (-1, 0.0)
    finally:
        if connection is not None:
            connection.close()


def open_live(search):
    """The live SQLite database, created from the committed snapshot when it is missing or behind it -> its URL."""
    live, snapshot = search.live_path(), Path(search.folder) / 'study.db'
    live.parent.mkdir(parents=True, exist_ok=True)
    if snapshot.exists() and (not live.exists() or progress(live, search.study) < progress(snapshot, search.study)):
        if live.exists():
            os.replace(live, live.with_suffix('.behind.db'))  # kept, in case it held something the snapshot lacks
        copy_sqlite(snapshot, live)
    return sqlite_url(live)


def study_storage(search):
    """The study's storage, ours to keep: the shared server's, or the live SQLite database (see open_live)."""
    return make_storage(search.storage or open_live(search))


def open_study(search, sampler=None, storage=None):
    """The study (in `storage`, else in study_storage(search)): on a new server copied from the committed snapshot; a
    new study gets the first trials queued."""
    storage = storage or study_storage(search)
    snapshot = Path(search.folder) / 'study.db'
    if search.storage and snapshot.exists() and search.study not in optuna.get_all_study_names(storage):
        optuna.copy_study(from_study_name=search.study, from_storage=make_storage(sqlite_url(snapshot)),
                          to_storage=storage)
    study = optuna.create_study(study_name=search.study, storage=storage, direction='maximize', load_if_exists=True,
                                sampler=sampler or optuna.samplers.TPESampler(seed=search.seed),
                                pruner=optuna.pruners.NopPruner())  # the objective prunes, by PRUNE_BELOW
    if not study.get_trials(deepcopy=False):
        if search.seeded_from:
            for number, params in seed_trials(search):
                study.enqueue_trial(params, user_attrs={'seeded_from': number})
        else:
            for name in FIRST_TRIALS:
                study.enqueue_trial(params_of(CANDIDATES[name]), user_attrs={'candidate': name})
    fix_protocol(study, search)
    return study


def seed_trials(search):
    """The first trials of a study seeded from another: the `seeded_count` best complete trials of the record in
    `seeded_from` (its trials.json, in the freeze rule's order), each with this study's fixed parameters applied
    -> [(their trial number there, params here)]."""
    export = json.loads((Path(search.seeded_from) / 'trials.json').read_text())
    complete = sorted((r for r in export['trials'] if r['state'] == 'COMPLETE' and r.get('rows_held') is not None),
                      key=rank)
    if len(complete) < search.seeded_count:
        raise ValueError(f'{search.seeded_from} has {len(complete)} complete trials; {search.seeded_count} are asked '
                         'for')
    seeded, seen = [], set()
    for record in complete[:search.seeded_count]:
        params = dict(record['params'], **dict(search.fixed))
        config_from_params(params)  # refused here if the parameters no longer make a configuration
        key = json.dumps(params, sort_keys=True)
        if key not in seen:  # two trials that differed only in a fixed parameter are one trial here
            seen.add(key)
            seeded.append((record['number'], params))
    return seeded


def worker_sampler(search, session, worker):
    """Seeded TPE; each worker of each session (and, on a shared server, of each machine) has its own seed, or two
    would sample the same configuration; constant liar keeps a worker from sampling beside a running trial."""
    machine = zlib.crc32(socket.gethostname().encode()) % 10_000 if search.storage else 0
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', optuna.exceptions.ExperimentalWarning)
        seed = (search.seed + 1000 * session + worker + 100_000 * machine) % 2**32
        return optuna.samplers.TPESampler(seed=seed, multivariate=True, constant_liar=True)


def fail_running(study, storage, numbers=None, error=None):
    """Mark RUNNING trials (all, or those in `numbers`) of the study in `storage` failed -> their numbers. With
    `error` the failure is an error (never run again); without, an interruption (queued again by
    requeue_interrupted)."""
    study_id, failed = storage.get_study_id_from_name(study.study_name), []
    for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        if numbers is None or trial.number in numbers:
            trial_id = storage.get_trial_id_from_study_id_trial_number(study_id, trial.number)
            if error:
                storage.set_trial_user_attr(trial_id, 'error', error)
            storage.set_trial_state_values(trial_id, TrialState.FAIL)
            failed.append(trial.number)
    return failed


def requeue_interrupted(study):
    """Queue again every trial that failed without an error (it was interrupted), once, with its parameters; Optuna
    runs queued trials before sampling new ones -> the numbers of the trials queued again."""
    trials = study.get_trials(deepcopy=False)
    done = {t.user_attrs.get('requeued_from') for t in trials}
    queued = []
    for trial in trials:
        attrs = trial.user_attrs
        params = trial.params if len(trial.params) == len(SPACE) else trial.system_attrs.get('fixed_params', {})
        if (trial.state == TrialState.FAIL and 'error' not in attrs and len(params) == len(SPACE)
                and trial.number not in done and attrs.get('attempt', 1) < MAX_ATTEMPTS):
            carried = {key: attrs[key] for key in ('candidate', 'seeded_from') if key in attrs}
            study.enqueue_trial(params, user_attrs=dict(carried, requeued_from=trial.number,
                                                        attempt=attrs.get('attempt', 1) + 1))
            queued.append(trial.number)
    return queued


def fix_protocol(study, search):
    """The study's protocol and rules are recorded when it starts; a session with others is refused."""
    protocol, confirmation = search.protocols()
    fixed = dict(protocol=plain(protocol), confirmation_protocol=plain(confirmation), prune_below=PRUNE_BELOW,
                 confirm_rows=CONFIRM_ROWS, fallback_candidates=FALLBACK_CANDIDATES,
                 budget=dict(trials=search.budget_trials, seconds=search.budget_seconds))
    if search.fixed:  # a later study's extra rules (the first study recorded only the ones above)
        fixed['fixed_params'] = dict(search.fixed)
    if search.seeded_from:
        folder = Path(search.seeded_from).resolve()  # named from the repository, so every clone records the same
        fixed['seeded_from'] = dict(folder=str(folder.relative_to(REPO) if folder.is_relative_to(REPO) else folder),
                                    count=search.seeded_count)
    if search.default_rule:
        fixed['default_rule'] = search.default_rule
    for key, value in fixed.items():
        if key not in study.user_attrs:
            study.set_user_attr(key, value)
        elif study.user_attrs[key] != value:
            raise SystemExit(f'the study {search.study!r} was started with {key} = {study.user_attrs[key]!r}, '
                             f'this session has {value!r}: a study keeps its protocol')


@contextlib.contextmanager
def exclusive(search):
    """Yields whether this process may write the live database: an exclusive lock on it while the block runs (one
    search or confirmation at a time); always True on a shared server."""
    if search.storage:
        yield True
        return
    path = search.live_path().with_suffix('.lock')
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, 'w') as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print(f'another search or confirmation holds {search.live_path()}: not started', flush=True)
            yield False
            return
        yield True


def plain(value):
    """JSON data (tuples as lists, NaN and infinities as None)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return plain(dataclasses.asdict(value))
    return value


def records(study):
    """Every trial as plain data (what export, README and decide read), confirmations included."""
    attrs = study.user_attrs
    out = []
    for trial in study.get_trials(deepcopy=False):
        user = trial.user_attrs
        seconds = user.get('seconds')
        if seconds is None and trial.datetime_start and trial.datetime_complete:
            seconds = (trial.datetime_complete - trial.datetime_start).total_seconds()
        out.append(plain(dict(
            number=trial.number, state=trial.state.name, value=trial.value,
            params=trial.params or trial.system_attrs.get('fixed_params', {}),  # a queued trial's: those it will get
            start=trial.datetime_start.isoformat(timespec='seconds') if trial.datetime_start else None,
            seconds=seconds, rows_held=user.get('rows_held'), band_distance=user.get('band_distance'),
            seeds=user.get('seeds'), rows=user.get('rows'), config=user.get('config'),
            config_key=user.get('config_key'), protocol=user.get('protocol'), candidate=user.get('candidate'),
            requeued_from=user.get('requeued_from'), error=user.get('error'),
            confirmation=attrs.get(f'confirmation:{trial.number}'),
            **({'seeded_from': user['seeded_from']} if 'seeded_from' in user else {}))))
    return out




def budget_used(study, search):
    """The search budget: BUDGET_TRIALS complete trials or BUDGET_SECONDS of search time."""
    complete = len(study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)))
    return budget_exhausted(complete, study.user_attrs.get('search_seconds', 0.0), search.budget_trials,
                            search.budget_seconds)
