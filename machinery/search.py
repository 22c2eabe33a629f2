"""The calibration searches as recorded Optuna studies (make calibrate-search), and their freeze rule.

    python -m machinery.search init [--study S] [--commit]          create a study, fix its rules, queue its first trials
    python -m machinery.search search [--minutes M] [--trials N]   continue the study (2 worker processes)
    python -m machinery.search confirm                             apply the freeze rule (measures what it needs)
    python -m machinery.search record                              rewrite the record from the study, measure nothing

A study (TPE sampler) searches the substrate configurations of `space()`, or of that space with some parameters held
at one value (`STUDIES`: the first study searched everything, the long-grammar study holds `grammar` at 'long'). A
trial builds the candidate's RL base, measures its first seed and every batch seed, and is pruned if that first seed
holds fewer than PRUNE_BELOW of the 26 rows; otherwise it measures the other seeds. Its value orders trials by rows
held first, band distance second. Every trial's configuration, rows (each seed's value) and timing are trial
attributes.

The record of a study, committed in its folder (calibration/ for the first, calibration/long-grammar/ for the second):
study.db (a consistent SQLite snapshot written after every finished trial), trials.csv and trials.json (readable
without Optuna), README.md (written from the study), search.log. Workers write a git-ignored live copy (under
.cache/calibration/), restored from the snapshot when missing or behind it, so a fresh clone resumes the study.
`--storage URL` runs the study on a shared database server instead (several machines, each running the same
command); then the snapshot is not written during the search, and `record` copies the study into study.db.
`--scheduler tcp://host:8786` (default: $AGENTRL_DASK_SCHEDULER) measures each trial's seeds as jobs on that Dask
cluster's workers instead of inside the search's worker process.

The budget (300 complete trials or 6 hours of search time, summed over sessions) and the freeze rule (`decide`) were
fixed before the first search started; a study records them (and its own extra rules) when it is created.
"""
import argparse
import contextlib
import dataclasses
import datetime
import fcntl
import importlib
import json
import math
import multiprocessing
import os
import queue
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
import traceback
import warnings
import zlib
from pathlib import Path

import optuna
from optuna.distributions import CategoricalDistribution, FloatDistribution
from optuna.storages._heartbeat import get_heartbeat_thread  # what study.optimize uses; ours asks under a lock
from optuna.trial import TrialState

from agentrl import executors
from agentrl.atomic import atomic_output
from agentrl.calibration.freeze import (ALL_ROWS, BUDGET_SECONDS, BUDGET_TRIALS, CONFIRM_ROWS, FALLBACK_CANDIDATES,
                                        budget_exhausted, decide, rank)
from agentrl.fingerprint import code_fingerprint
from agentrl.paths import REPO
from agentrl.substrate.config import CANDIDATES, GRAMMARS, HELDOUT_RULES, SLIP_KINDS, FAMILY_SETS, SubstrateConfig

STUDY_NAME = 'tinyagent-calibration'

# The search's rules, fixed before it started (not to be tuned on what the search finds); the freeze rule and the
# budget are in agentrl/calibration/freeze.py:
PRUNE_BELOW = 14  # a trial whose first seed alone holds fewer than 14 of the 26 rows is pruned (its other seeds are
#                   not measured): it misses by far, and more seeds move a mean, not 13 rows

MIN_IMPORTANCE_TRIALS = 20  # parameter importances are reported from this many complete trials on
MAX_ATTEMPTS = 3  # an interrupted trial runs again (same parameters, before new samples); at most 3 runs in all
RECORD_FILES = ('study.db', 'trials.csv', 'trials.json', 'README.md', 'search.log')


# ------------------------------------------------------------------------------------------------ the search space
# Each parameter: its name in the study, where it sits in SubstrateConfig.describe(), its distribution. Fields of a
# SubstrateConfig not named here keep their defaults (SFT batch size, phase-1 learning rate, weight decay, SFT seed).
SPACE = [
    ('families', 'families', CategoricalDistribution(FAMILY_SETS)),
    ('heldout', 'heldout', CategoricalDistribution(HELDOUT_RULES)),
    ('grammar', 'grammar', CategoricalDistribution(GRAMMARS)),
    ('max_offset', 'max_offset', CategoricalDistribution((1, 2, 3, 12))),
    ('slips', 'sft.habits.slips', CategoricalDistribution(SLIP_KINDS)),
    ('n_head', 'n_head', CategoricalDistribution((2, 4, 8))),
    ('careful_steps', 'sft.careful_steps', CategoricalDistribution((300, 600, 1200))),
    ('habit_steps', 'sft.habit_steps', CategoricalDistribution((75, 150, 300))),
    ('read', 'sft.habits.read', FloatDistribution(0.15, 0.6)),
    ('full_read', 'sft.habits.full_read', FloatDistribution(0.3, 0.9)),
    ('slip', 'sft.habits.slip', FloatDistribution(0.0, 0.12)),
    ('mislabel', 'sft.habits.mislabel', FloatDistribution(0.0, 0.3)),
    ('habit_lr', 'sft.habit_lr', FloatDistribution(3e-4, 3e-3, log=True)),
    ('init_std', 'init_std', FloatDistribution(0.01, 0.08, log=True)),
    ('logit_scale', 'logit_scale', FloatDistribution(0.25, 1.0)),
    ('rl_lr', 'rl_lr', FloatDistribution(1.5e-4, 6e-4, log=True)),
    ('turn_cost', 'turn_cost', FloatDistribution(0.0, 0.5)),
]
FIRST_TRIALS = ('main', 'c18')  # config.CANDIDATES measured first, in this order, when the study is empty


# The studies of the calibration, each with its own record folder. The first searched the whole space; the second
# holds the long call grammar (the one parameter that puts the RL base's policy tokens per episode inside the book's
# band) and starts from the first study's twelve best trials. Both share the protocol, objective, pruning rule,
# budget and freeze rule above; the second's rule for becoming the default was fixed before it started.
LONG_GRAMMAR_DEFAULT_RULE = (
    'the trial this study freezes becomes `config.DEFAULT` only if it holds all 26 rows on the search seeds (0-4) and '
    'at least 24 on the confirmation seeds (5-9), that is, only if the freeze rule confirms it rather than falling '
    'back; otherwise trial 45 of the first study stays the default and this one is a named candidate.')
STUDIES = {
    'first': dict(study=STUDY_NAME, folder='calibration'),
    'long-grammar': dict(study='tinyagent-calibration-long-grammar', folder='calibration/long-grammar',
                         fixed=(('grammar', 'long'),), seeded_from='calibration', seeded_count=12,
                         title='The calibration search on the long call grammar',
                         default_rule=LONG_GRAMMAR_DEFAULT_RULE),
}


def study_search(name, **fields):
    """The Search of a named study (STUDIES), its record folder under the repository; `fields` override."""
    if name not in STUDIES:
        raise ValueError(f'unknown study {name!r}; the studies are {sorted(STUDIES)}')
    plan = dict(STUDIES[name])
    plan['folder'] = str(REPO / plan['folder'])
    if plan.get('seeded_from'):
        plan['seeded_from'] = str(REPO / plan['seeded_from'])
    return Search(**dict(plan, **fields))


def _suggest(trial, name, distribution):
    if isinstance(distribution, CategoricalDistribution):
        return trial.suggest_categorical(name, distribution.choices)
    return trial.suggest_float(name, distribution.low, distribution.high, log=distribution.log)


def config_from_params(params):
    """The SubstrateConfig of a trial's parameters (every SPACE name), the other fields at their defaults."""
    description = SubstrateConfig().describe()
    for name, path, _ in SPACE:
        *parents, leaf = path.split('.')
        node = description
        for part in parents:
            node = node[part]
        node[leaf] = params[name]
    return SubstrateConfig.from_description(description)


def space(trial):
    """The search space: an Optuna trial (or FixedTrial) -> the SubstrateConfig it samples."""
    return config_from_params({name: _suggest(trial, name, distribution) for name, _, distribution in SPACE})


def _inside(distribution, value):
    """Whether a value is one the distribution can give."""
    if isinstance(distribution, CategoricalDistribution):
        return value in distribution.choices
    return distribution.low <= value <= distribution.high


def space_with(fixed):
    """SPACE with each (name, value) of `fixed` narrowed to that one value (a study that does not search it)."""
    fixed = dict(fixed)
    unknown = set(fixed) - {name for name, _, _ in SPACE}
    if unknown:
        raise ValueError(f'fixed parameters {sorted(unknown)} are not in the search space; it has '
                         f'{[name for name, _, _ in SPACE]}')
    narrowed = []
    for name, path, distribution in SPACE:
        if name in fixed:
            if not _inside(distribution, fixed[name]):
                raise ValueError(f'{name}={fixed[name]!r} is outside the search space ({distribution})')
            distribution = CategoricalDistribution((fixed[name],))
        narrowed.append((name, path, distribution))
    return narrowed


@dataclasses.dataclass(frozen=True)
class NarrowedSpace:
    """The search space with some parameters held at one value: a picklable trial -> SubstrateConfig.

    A held parameter is still suggested (with its one choice), so every trial has all of SPACE's parameters and an
    interrupted trial can be queued again whole."""
    fixed: tuple = ()  # (parameter name, value) pairs

    def __call__(self, trial):
        return config_from_params({name: _suggest(trial, name, distribution)
                                   for name, _, distribution in space_with(self.fixed)})


def params_of(config):
    """A SubstrateConfig as the study's parameters; ValueError if the space cannot express it exactly."""
    params = {}
    for name, path, distribution in SPACE:
        value = config.describe()
        for part in path.split('.'):
            value = value[part]
        if not _inside(distribution, value):
            raise ValueError(f'{name}={value!r} is outside the search space ({distribution})')
        params[name] = value
    if config_from_params(params) != config:
        raise ValueError('the configuration sets a field the search space does not cover')
    return params


def expression(value):
    """A configuration as the Python expression that builds it (fields at their defaults left out)."""
    if not dataclasses.is_dataclass(value):
        return repr(value)
    default = type(value)()
    parts = [f'{field.name}={expression(getattr(value, field.name))}' for field in dataclasses.fields(value)
             if getattr(value, field.name) != getattr(default, field.name)]
    return f'{type(value).__name__}({", ".join(parts)})'


# --------------------------------------------------------------------------------------------------- the objective
def objective_value(rows_held, band_distance):
    """Rows held first, band distance second: rows + 1 / (1 + distance) (the fraction is in (0, 1], so one more row
    held always wins)."""
    return rows_held + 1.0 / (1.0 + band_distance)


@dataclasses.dataclass(frozen=True)
class Search:
    """One search session: where the study lives, how it runs, when it stops."""
    folder: str = str(REPO / 'calibration')  # the committed record (study.db, trials.csv/json, README.md, search.log)
    live: str = ''  # the SQLite database the workers write ('' : <folder>/../.cache/calibration/live.db, git-ignored)
    storage: str = ''  # a shared database server's URL (e.g. postgresql://user@host/db) instead of the live SQLite
    study: str = STUDY_NAME  # the study's name
    seed: int = 17  # TPE seed (worker w of session s samples with seed + 1000 s + w; see worker_sampler)
    processes: int = 2  # worker processes, each running one trial at a time
    minutes: float = 0.0  # session limit: at this many minutes running trials are stopped and queued again (0: none)
    trials: int = 0  # stop after this many finished trials in this session (0: no limit)
    budget_trials: int = BUDGET_TRIALS  # the study's budget: complete trials ...
    budget_seconds: float = BUDGET_SECONDS  # ... or seconds of search time
    protocol: object = None  # a calibrate.Protocol: the seeds of a trial (None: the measurement's SEARCH)
    confirmation: object = None  # the seeds of a confirmation (None: the measurement's CONFIRMATION)
    measure: object = 'agentrl.calibration.measure'  # the measurement: a module name, or a picklable object with the
    #                                              same functions (prepare, measure_seed, measure_batch, judge, ...)
    space: object = None  # trial -> SubstrateConfig, a picklable function (None: SPACE narrowed by `fixed`)
    fixed: tuple = ()  # (parameter, value) pairs this study holds at one value instead of searching them
    seeded_from: str = ''  # another study's record folder: its best trials (with `fixed` applied) are queued first
    seeded_count: int = 0  # ... this many of them, in the freeze rule's order (instead of the named candidates)
    title: str = 'The calibration search'  # the record README's title
    default_rule: str = ''  # when this study's frozen trial replaces config.DEFAULT, fixed before the search
    scheduler: str = ''  # a Dask scheduler's address: a trial's seeds are measured on its cluster ('': in the worker)
    commit: bool = False  # commit the record files with git as the study grows ...
    commit_minutes: float = 10.0  # ... at most once per this many minutes during a search, and when it ends

    def live_path(self):
        if self.live:
            return Path(self.live)
        if self.study == STUDY_NAME:
            return Path(self.folder).parent / '.cache' / 'calibration' / 'live.db'
        return REPO / '.cache' / 'calibration' / f'{self.study}.db'  # one live copy per study

    def trial_space(self):
        return self.space or NarrowedSpace(tuple(self.fixed))

    def measurement(self):
        return importlib.import_module(self.measure) if isinstance(self.measure, str) else self.measure

    def protocols(self):
        measurement = self.measurement()
        return self.protocol or measurement.SEARCH, self.confirmation or measurement.CONFIRMATION


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


_IN_TRIAL = threading.Event()  # set while a worker runs the objective (SIGTERM then interrupts the trial)


def objective(trial, search, report=None):
    """One trial: the configuration `trial` samples, measured (see measure_trial); `report(number)` is told the trial
    started. A measurement that raises fails the trial with its error recorded."""
    started = time.time()
    _IN_TRIAL.set()
    try:
        if report:
            report(trial.number)
        config = search.trial_space()(trial)  # first: an interrupted trial then has its parameters
        try:
            return measure_trial(trial, search, config, started)
        except optuna.TrialPruned:
            raise
        except Exception:
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
    trial.set_user_attr('config', config.describe())
    trial.set_user_attr('config_key', config.key())
    trial.set_user_attr('protocol', plain(protocol))
    trial.set_user_attr('code', code_fingerprint())  # the training code it was measured with (stale if it changes)
    measurement.prepare(config)
    first = _measured(search, config, protocol, [('batch', seed) for seed in protocol.batch_seeds]
                      + [('seed', protocol.seeds[0])])
    batches, seeds = first[:-1], first[-1:]
    rows = measurement.judge(seeds, batches)
    held, distance = measurement.rows_held(rows), measurement.band_distance(rows)
    trial.report(objective_value(held, distance), step=0)
    if held < PRUNE_BELOW:
        keep_rows(trial, rows, protocol.seeds[:1], measurement, started)
        raise optuna.TrialPruned(f'seed {protocol.seeds[0]} holds {held} rows, fewer than {PRUNE_BELOW}')
    seeds += _measured(search, config, protocol, [('seed', seed) for seed in protocol.seeds[1:]])
    record = keep_rows(trial, measurement.judge(seeds, batches), protocol.seeds, measurement, started)
    return objective_value(record['rows_held'], record['band_distance'])


def _measured(search, config, protocol, kinds_and_seeds):
    """Each ('seed'|'batch', seed) of a trial measured: here, one after the other, or, with search.scheduler, as jobs
    on that Dask cluster's workers (agentrl.executors; each job carries the configuration and the CPU pin)."""
    jobs = [((kind, search.measure, config, seed, protocol),) for kind, seed in kinds_and_seeds]
    with executors.sweep_executor(1, scheduler=search.scheduler) as pool:
        return executors.ordered(pool, _measure, jobs)


def keep_rows(trial, rows, seeds, measurement, started):
    """The judged rows, the seeds they were judged on and the trial's seconds, as trial attributes."""
    record = dict(rows_record(rows, measurement), seeds=list(seeds), seconds=time.time() - started)
    for key, value in record.items():
        trial.set_user_attr(key, value)
    return record


# ----------------------------------------------------------------------------------------------------- the storage
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


def open_study(search, sampler=None):
    """The study: on a new server copied from the committed snapshot; a new study gets the first trials queued."""
    storage = make_storage(search.storage or open_live(search))
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
        raise ValueError(f'{search.seeded_from} has {len(complete)} complete trials; {search.seeded_count} are asked for')
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


def _trial_id(study, number):
    return study._storage.get_trial_id_from_study_id_trial_number(study._study_id, number)


def fail_running(study, numbers=None, error=None):
    """Mark RUNNING trials (all, or those in `numbers`) failed -> their numbers. With `error` the failure is an
    error (never run again); without, an interruption (queued again by requeue_interrupted)."""
    failed = []
    for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        if numbers is None or trial.number in numbers:
            if error:
                study._storage.set_trial_user_attr(_trial_id(study, trial.number), 'error', error)
            study._storage.set_trial_state_values(_trial_id(study, trial.number), TrialState.FAIL)
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


# ----------------------------------------------------------------------------------------------------- the records
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


def counts(recs):
    states = [r['state'] for r in recs]
    return {state: states.count(state) for state in ('COMPLETE', 'PRUNED', 'FAIL', 'RUNNING', 'WAITING')}


def budget_used(study, search):
    """The search budget: BUDGET_TRIALS complete trials or BUDGET_SECONDS of search time."""
    complete = len(study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)))
    return budget_exhausted(complete, study.user_attrs.get('search_seconds', 0.0), search.budget_trials,
                            search.budget_seconds)


def _csv_value(value):
    if value is None:
        return ''
    if isinstance(value, float):
        return f'{value:.6g}'
    text = str(value)
    return f'"{text}"' if ',' in text or '"' in text else text


CSV_COLUMNS = ('number', 'state', 'start', 'seconds', 'rows_held', 'band_distance', 'objective', 'candidate')


def trials_csv(recs):
    """One line per trial: number, state, start, seconds, rows held, band distance, objective, then the params."""
    lines = [','.join(CSV_COLUMNS + tuple(name for name, _, _ in SPACE))]
    for r in recs:
        fixed = [r['number'], r['state'], r['start'], None if r['seconds'] is None else round(r['seconds']),
                 r['rows_held'], None if r['band_distance'] is None else f'{r["band_distance"]:.4f}',
                 None if r['value'] is None else f'{r["value"]:.6f}', r['candidate']]
        lines.append(','.join(_csv_value(v) for v in fixed + [r['params'].get(name) for name, _, _ in SPACE]))
    return '\n'.join(lines) + '\n'


def trials_json(study, recs):
    """The whole study as JSON (sorted keys): its attributes and every trial record with its rows."""
    return json.dumps(plain(dict(study=study.study_name, attrs=study.user_attrs, trials=recs)), sort_keys=True,
                      indent=1, allow_nan=False) + '\n'


def duration(seconds):
    minutes = round(seconds / 60)
    return f'{minutes // 60} h {minutes % 60:02d} min'


def _band(row):
    fmt, low, high = row.get('fmt') or '{:.3g}', row.get('low'), row.get('high')
    if low is None and high is None:
        return 'any'
    if low is None:
        return f'<= {fmt.format(high)}'
    if high is None:
        return f'>= {fmt.format(low)}'
    return f'{fmt.format(low)}-{fmt.format(high)}'


def rows_table(rows, seeds, batch_seeds):
    """A trial's rows in the layout of `make calibrate`: book, band, ours (mean, then each seed), holds."""
    lines = [f'| quantity | book | band (mean over seeds {_seeds(seeds)}; 10.6 batch rows over batch seeds '
             f'{_seeds(batch_seeds)}) | ours: mean (per seed) | holds |', '|---|---|---|---|---|']
    for row in rows:
        fmt = row.get('fmt') or '{:.3g}'
        show = lambda v: 'n/a' if v is None else fmt.format(v)  # noqa: E731
        values = ', '.join(show(v) for v in row.get('values') or ())
        lines.append(f'| {row.get("quantity")} | {row.get("book", "")} | {_band(row)} | {show(row.get("mean"))} '
                     f'({values}) | {"yes" if row.get("holds") else "NO"} |')
    return '\n'.join(lines)


def importance_text(study, recs):
    complete = [r for r in recs if r['state'] == 'COMPLETE']
    if len(complete) < MIN_IMPORTANCE_TRIALS:
        return (f'Not yet: Optuna\'s importances need at least {MIN_IMPORTANCE_TRIALS} complete trials here, and the '
                f'study has {len(complete)}.')
    try:
        with warnings.catch_warnings(record=True) as warned:
            warnings.simplefilter('always')
            importances = optuna.importance.get_param_importances(study)
    except (RuntimeError, ValueError) as error:
        return f'Optuna could not compute them: {error}'
    lines = [f'Optuna\'s parameter importances (PED-ANOVA, its default) over the {len(complete)} complete trials, '
             'for the objective:', '', '| parameter | importance |', '|---|---|']
    lines += [f'| {name} | {value:.3f} |' for name, value in importances.items()]
    lines += [f'\nOptuna warned: {w.message}' for w in warned]
    return '\n'.join(lines)


def readme(study, search, recs, decision):
    """calibration/README.md, written from the study."""
    n = counts(recs)
    attrs = study.user_attrs
    protocol, confirmation = attrs.get('protocol') or {}, attrs.get('confirmation_protocol') or {}
    complete = sorted((r for r in recs if r['state'] == 'COMPLETE' and r['rows_held'] is not None),
                      key=lambda r: r['number'])
    out = [f'# {search.title}', '',
           f'Written by `python -m machinery.search` from the Optuna study `{study.study_name}` in `study.db` '
           '(do not edit by hand). `trials.csv` has one line per trial, `trials.json` everything (every row of '
           'every trial on every seed), `search.log` what each session did.', '',
           '## Where it stands', '',
           f'{len(recs)} trials: {n["COMPLETE"]} complete, {n["PRUNED"]} pruned, {n["FAIL"]} failed'
           + (f', {n["RUNNING"]} running' if n['RUNNING'] else '') + (f', {n["WAITING"]} queued' if n['WAITING'] else '')
           + f'. Search time {duration(attrs.get("search_seconds", 0.0))} in {_count(len(attrs.get("sessions", [])), "session")}'
           f'. Budget: {search.budget_trials} complete trials or {duration(search.budget_seconds)}, whichever '
           'comes first.', '',
           f'**The freeze rule says:** {decision.reason}.', '']
    if decision.action == 'freeze':
        frozen = next(r for r in recs if r['number'] == decision.frozen)
        config = SubstrateConfig.from_description(frozen['config'])
        role = '`config.DEFAULT`' if not search.default_rule else (
            'it becomes `config.DEFAULT` by the default rule below' if decision.confirmed else
            'by the default rule below it is a named candidate, not `config.DEFAULT`')
        out += [f'The frozen configuration ({role}), trial {frozen["number"]}:', '', '```python',
                expression(config), '```', '',
                f'On the search seeds (what `make calibrate` prints for it):', '',
                rows_table(frozen['rows'], frozen['seeds'], (frozen['protocol'] or {}).get('batch_seeds')), '',
                f'On the confirmation seeds:', '',
                rows_table(frozen['confirmation']['rows'], frozen['confirmation']['seeds'],
                           frozen['confirmation']['batch_seeds']), '']
    out += ['## Best rows held over time', '',
            'Complete trials only (a pruned trial was judged on its first seed). A line for each trial that improved '
            'on the best so far, and the last trial:', '',
            '| trial | rows held | band distance | best so far: rows held | band distance | trial |', '|---|---|---|---|---|---|']
    best = None
    for r in complete:
        improved = best is None or rank(r) < rank(best)
        best = r if improved else best
        if improved or r is complete[-1]:
            out.append(f'| {r["number"]} | {r["rows_held"]} | {r["band_distance"]:.3f} | {best["rows_held"]} | '
                       f'{best["band_distance"]:.3f} | {best["number"]} |')
    if not complete:
        out.append('| - | - | - | - | - | - |')
    out += ['', '## The best trials', '',
            '| trial | rows held (search seeds) | band distance | confirmation: rows held | band distance | '
            'candidate |', '|---|---|---|---|---|---|']
    for r in sorted(complete, key=rank)[:10]:
        c = r.get('confirmation')
        confirmed = f'{c["rows_held"]} | {c["band_distance"]:.3f}' if c else '- | -'
        origin = r['candidate'] or (f'trial {r["seeded_from"]} there' if r.get('seeded_from') is not None else '')
        out.append(f'| {r["number"]} | {r["rows_held"]} | {r["band_distance"]:.3f} | {confirmed} | {origin} |')
    if not complete:
        out.append('| - | - | - | - | - | - |')
    if complete:
        top = min(complete, key=rank)
        out += ['', f'Trial {top["number"]}, the best so far:', '',
                rows_table(top['rows'], top['seeds'], (top['protocol'] or {}).get('batch_seeds')), '',
                'Its configuration:', '', '```python',
                expression(SubstrateConfig.from_description(top['config'])), '```']
    out += ['', '## Which parameters mattered', '', importance_text(study, recs), '',
            '## The protocol (fixed before the search started)', '',
            f'- A trial builds the candidate\'s RL base, then measures GRPO seeds {_seeds(protocol.get("seeds"))} '
            f'({protocol.get("short_steps")} and {protocol.get("long_steps")} steps, {protocol.get("attempts")} '
            f'held-out attempts per task) and the single-batch pushes of section 10.6 on batch seeds '
            f'{_seeds(protocol.get("batch_seeds"))}. A row is judged on the mean over the seeds.',
            f'- Band distance: per row 0 inside the band, else the distance to the nearest edge divided by the band\'s '
            'width; summed over the rows. The objective is rows held + 1 / (1 + band distance): rows held first, band '
            'distance second.',
            f'- Pruning: a trial whose first seed alone holds fewer than {PRUNE_BELOW} of the {ALL_ROWS} rows is '
            'pruned; its other seeds are not measured.',
            f'- Freeze rule: a candidate holding all {ALL_ROWS} rows is measured again on seeds '
            f'{_seeds(confirmation.get("seeds"))} (batch seeds {_seeds(confirmation.get("batch_seeds"))}); if it holds at least '
            f'{CONFIRM_ROWS} there, it is frozen. If none is confirmed after {search.budget_trials} complete trials or '
            f'{duration(search.budget_seconds)} of search, whichever comes first, the {FALLBACK_CANDIDATES} with the '
            'most rows held on the search seeds (ties: the smaller band distance) are measured on the confirmation '
            'seeds, and the one holding the most rows there (same tie rule) is frozen.',
            '- The search space: ' + ', '.join(f'`{name}` {_space_text(distribution)}'
                                               for name, _, distribution in space_with(search.fixed))
            + '.' + first_trials_text(search, attrs)]
    if search.default_rule:
        out += [f'- The default rule: {search.default_rule}']
    out += ['',
            '## Running it', '',
            '- `make calibrate-search` continues the study in 2 processes until the budget is used or the freeze rule '
            'has something to confirm (`make calibrate-search SEARCH_ARGS="--minutes 50"` stops after 50 minutes; '
            'the trials it cuts run again, before any new sample, next time). Ctrl-C stops it within seconds and keeps every finished '
            'trial. `SEARCH_ARGS=--commit` commits the record after every trial.',
            '- `make calibrate-confirm` applies the freeze rule: it measures what the rule asks for on the '
            'confirmation seeds, says what it decided and why, and prints the chosen configuration to paste as '
            '`config.DEFAULT` (the freeze commit is made by hand).',
            '- A fresh clone resumes the study: the workers write a git-ignored copy of `study.db` '
            '(`.cache/calibration/live.db`), made from the committed one when missing or behind it, and `study.db` '
            'is rewritten from it (a consistent snapshot) after every finished trial.', '',
            '## A larger search on several machines', '',
            'Point the study at a database server Optuna supports (PostgreSQL or MySQL; install its driver, e.g. '
            '`pip install psycopg2-binary`), and run the same command on every machine; each runs 2 workers, and the '
            'server hands each trial to one worker. The first session copies this `study.db` onto the server:', '',
            '```bash', 'python -m machinery.search search --storage postgresql://user@host/db', '```', '',
            'Search time is then summed over the machines. When it is done, bring the study back into this folder '
            '(study.db, the exports, this README) and commit it:', '',
            '```bash', 'python -m machinery.search record --storage postgresql://user@host/db',
            'python -m machinery.search confirm --storage postgresql://user@host/db', '```', '']
    return '\n'.join(out)


def first_trials_text(search, attrs):
    """The protocol's sentence on the study's first trials (and on the parameters it holds fixed)."""
    text = ''
    if search.fixed:
        text += (' This study holds ' + ', '.join(f'`{name}` at {value!r}' for name, value in search.fixed)
                 + ' and searches the rest.')
    seeded = attrs.get('seeded_from')
    if seeded:
        return text + (f' Its first trials are the {seeded["count"]} best complete trials of the study in '
                       f'`{seeded["folder"]}` (in the freeze rule\'s order) with only those parameters changed, '
                       'queued with `enqueue_trial`; then TPE goes on from them.')
    return text + ' The first two trials are the named candidates `main` and `c18` (`agentrl/substrate/config.py`).'


def _count(n, word):
    return f'{n} {word}' + ('' if n == 1 else 's')


def _seeds(seeds):
    """0, 1, 2 -> '0-2'; other lists comma-separated."""
    seeds = list(seeds or [])
    if len(seeds) > 2 and seeds == list(range(seeds[0], seeds[0] + len(seeds))):
        return f'{seeds[0]}-{seeds[-1]}'
    return ', '.join(map(str, seeds))


def _space_text(distribution):
    if isinstance(distribution, CategoricalDistribution):
        return '{' + ', '.join(map(str, distribution.choices)) + '}'
    return f'{distribution.low:g}-{distribution.high:g}' + (' (log)' if distribution.log else '')


def write_text(path, text):
    with atomic_output(path, suffix=Path(path).suffix) as tmp:
        tmp.write_text(text)


def write_record(study, search, commit_it=True):
    """The record under the folder: the snapshot study.db (SQLite only), trials.csv, trials.json, README.md; with
    search.commit and `commit_it`, committed."""
    folder = Path(search.folder)
    if not search.storage:
        copy_sqlite(search.live_path(), folder / 'study.db')
    recs = records(study)
    write_text(folder / 'trials.csv', trials_csv(recs))
    write_text(folder / 'trials.json', trials_json(study, recs))
    write_text(folder / 'README.md', readme(study, search, recs, decide(recs, budget_used(study, search))))
    if search.commit and commit_it:
        n = counts(recs)
        best = max((r['rows_held'] for r in recs if r['state'] == 'COMPLETE' and r['rows_held'] is not None),
                   default=None)
        commit(folder, f'Calibration study: {len(recs)} trials ({n["COMPLETE"]} complete, {n["PRUNED"]} pruned, '
                       f'{n["FAIL"]} failed), best {best} of {ALL_ROWS} rows held')
    return recs


def commit(folder, message, attempts=10):
    """git add + commit of the record files only (other files of the tree are left alone); True if committed."""
    folder = Path(folder).resolve()
    files = [str(folder / name) for name in RECORD_FILES if (folder / name).exists()]
    for _ in range(attempts):
        add = subprocess.run(['git', 'add', '--', *files], cwd=folder, capture_output=True, text=True)
        done = add.returncode == 0 and subprocess.run(['git', 'commit', '-q', '-m', message, '--', *files], cwd=folder,
                                                      capture_output=True, text=True)
        if done and done.returncode == 0:
            return True
        error = (add.stderr if add.returncode else done.stderr + done.stdout)
        if 'index.lock' not in error:
            if 'nothing to commit' not in error and 'no changes added' not in error:
                print(f'git commit of the record failed: {error.strip()}', flush=True)
            return False
        time.sleep(3)
    print('git commit of the record failed: index.lock stayed', flush=True)
    return False


def log(search, line):
    """One line on stdout and in search.log."""
    stamped = f'{datetime.datetime.now().isoformat(sep=" ", timespec="seconds")} {line}'
    print(stamped, flush=True)
    Path(search.folder).mkdir(parents=True, exist_ok=True)
    with open(Path(search.folder) / 'search.log', 'a') as file:
        file.write(stamped + '\n')


STATE_WORDS = dict(COMPLETE='complete', PRUNED='pruned', FAIL='failed', RUNNING='running', WAITING='queued')


def trial_line(record):
    if record['state'] in ('COMPLETE', 'PRUNED') and record['rows_held'] is not None:
        seeds = 'seeds ' + ', '.join(map(str, record['seeds'] or []))
        text = (f'{record["rows_held"]} of {ALL_ROWS} rows on {seeds}, band distance {record["band_distance"]:.3f}')
    else:
        text = (record['error'] or 'interrupted').strip().splitlines()[-1]
    return f'trial {record["number"]} {STATE_WORDS[record["state"]]} in {record["seconds"] or 0:.0f} s: {text}'


# ------------------------------------------------------------------------------------------------------ workers
_STOPPING = threading.Event()  # a worker was told to stop (SIGTERM)


def _on_sigterm(signum, frame):
    _STOPPING.set()
    if _IN_TRIAL.is_set():  # inside the objective: cut the trial (Optuna marks it failed, without an error)
        raise KeyboardInterrupt


def _watch_parent(parent):
    while os.getppid() == parent:
        time.sleep(2)
    os.kill(os.getpid(), signal.SIGTERM)  # the search died: stop like on SIGTERM


def run_trial(study, search, asking, report):
    """One trial: asked for under the `asking` lock (two SQLite clients can be handed the same queued trial), run,
    told -> its number. On a shared server the trial has a heartbeat, and stale trials are failed first."""
    if search.storage:
        optuna.storages.fail_stale_trials(study)
    with asking:
        trial = study.ask()
    with get_heartbeat_thread(trial._trial_id, study._storage):  # a no-op without heartbeats (SQLite)
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
    study = optuna.load_study(study_name=search.study, storage=make_storage(url),
                              sampler=worker_sampler(search, session, index))
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
                messages.put(('end', index, run_trial(study, search, asking, report)))
                errors = 0
            except Exception as error:  # the storage failed, not the objective: retry a few times
                errors += 1
                messages.put(('error', index, f'{type(error).__name__}: {error}'))
                if errors >= 5:
                    break
                time.sleep(5)
    except KeyboardInterrupt:
        pass


# --------------------------------------------------------------------------------------------------- the search
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


class Clock:
    """A session's time, added to the study's search time (so the budget spans sessions) and kept in its
    'sessions' attribute: when it started, how long it ran, how many trials finished, how it ended."""

    def __init__(self, study, search):
        self.study, self.search = study, search
        self.sessions = list(study.user_attrs.get('sessions', []))
        self.session = dict(start=datetime.datetime.now().isoformat(timespec='seconds'), seconds=0.0, finished=0,
                            ended='running')
        self.began = self.last = time.time()
        self.used = study.user_attrs.get('search_seconds', 0.0)  # before this session
        self.deadline = self.began + search.minutes * 60 if search.minutes else math.inf  # the session limit
        self.budget_deadline = self.began + search.budget_seconds - self.used

    def account(self, finished=0, ended=None):
        now = time.time()
        self.study.set_user_attr('search_seconds', self.study.user_attrs.get('search_seconds', 0.0) + now - self.last)
        self.session.update(seconds=now - self.began, finished=self.session['finished'] + finished,
                            ended=ended or self.session['ended'])
        self.study.set_user_attr('sessions', self.sessions + [self.session])
        self.last = now


class Workers:
    """The worker processes of a session (spawned; Ctrl-C reaches only the search, which stops them)."""

    def __init__(self, search, url, clock):
        self.context = multiprocessing.get_context('spawn')
        self.stop, self.messages = self.context.Event(), self.context.Queue()
        self.claims = self.context.Value('i', search.trials if search.trials else -1)
        self.asking = self.context.Lock()
        self.args = (search, url, len(clock.sessions), min(clock.deadline, clock.budget_deadline), self.stop,
                     self.claims, self.asking, self.messages, os.getpid())
        self.cut_at, self.reported = None, set()
        self.processes = [self.start(index) for index in range(search.processes)]

    def start(self, index):
        # ignored by the worker (inherited): Ctrl-C and a closed terminal signal the whole group; the search decides
        previous = {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGINT, signal.SIGHUP)}
        process = self.context.Process(target=worker, args=(index, *self.args), daemon=True,
                                       name=f'calibration-worker-{index}')
        process.start()
        for s, handler in previous.items():
            signal.signal(s, handler)
        self.reported.discard(index)
        return process

    def alive(self):
        return any(p.is_alive() for p in self.processes) or not self.messages.empty()

    def message(self, timeout=0.5):
        """(kind, worker index, value) or (None, None, None)."""
        try:
            return self.messages.get(timeout=timeout)
        except queue.Empty:
            return None, None, None

    def cut(self):
        """Stop now: SIGTERM cuts the running trials (each worker's is marked failed and queued again)."""
        self.cut_at = time.time()
        self.stop.set()
        for p in self.processes:
            if p.is_alive():
                os.kill(p.pid, signal.SIGTERM)

    def kill_late(self, grace=20):
        for p in self.processes:
            if self.cut_at is not None and p.is_alive() and time.time() > self.cut_at + grace:
                p.kill()

    def crashed(self):
        """Indices of workers that died without being told to stop (each reported once)."""
        dead = [i for i, p in enumerate(self.processes) if self.cut_at is None and i not in self.reported
                and not p.is_alive() and p.exitcode not in (0, None)]
        self.reported.update(dead)
        return dead

    def join(self):
        for p in self.processes:
            p.join(timeout=5)


def run_search(search):
    """Continue the study in `search.processes` workers until a stop condition -> exit status."""
    with exclusive(search) as free:
        return _search(search) if free else 1


def _search(search):
    study = open_study(search)
    if not search.storage:
        stale = fail_running(study)  # left RUNNING by a search that was killed (nothing else writes the live copy)
        if stale:
            log(search, f'trials {stale} were left running by a search that was killed: marked failed')
    requeued = requeue_interrupted(study)
    if requeued:
        log(search, f'interrupted trials {requeued} are queued to run again (before any new sample)')
    decision = decide(records(study), budget_used(study, search))
    if decision.action != 'search':
        write_record(study, search)
        log(search, f'not searching: {decision.reason}')
        return 0

    clock = Clock(study, search)
    log(search, f'search session {len(clock.sessions) + 1}: {search.processes} workers, {duration(clock.used)} of '
                f'search time used, {len(study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)))} complete '
                'trials' + (f', stops after {search.minutes:g} minutes' if search.minutes else ''))
    signals = []
    handlers = {s: signal.signal(s, lambda signum, frame: signals.append(signal.Signals(signum).name))
                for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    workers = Workers(search, search.storage or sqlite_url(search.live_path()), clock)
    running, restarts, reason, committed = {}, 0, None, time.time()  # running: worker index -> trial number
    try:
        while workers.alive():
            kind, index, value = workers.message()
            if kind == 'start':
                running[index] = value
            elif kind == 'error':
                log(search, f'worker {index}: {value}')
            elif kind == 'end':  # a trial finished: account, record, say so, and see whether to go on
                running.pop(index, None)
                clock.account(finished=1)
                due = time.time() - committed >= search.commit_minutes * 60
                recs = write_record(study, search, commit_it=due)
                committed = time.time() if due else committed
                log(search, trial_line(next(r for r in recs if r['number'] == value)))
                decision = decide(recs, budget_used(study, search))
                if decision.action != 'search' and not workers.stop.is_set():
                    reason = f'the freeze rule has work ({decision.action}: run make calibrate-confirm)'
                    workers.stop.set()  # no new trial starts; a running one finishes
                if search.trials and clock.session['finished'] >= search.trials and not workers.stop.is_set():
                    reason = f'the session\'s {search.trials} trials finished'
                    workers.stop.set()
            if time.time() - clock.last > 60:
                clock.account()
            if workers.cut_at is None and (signals or time.time() >= clock.deadline):
                reason = f'stopped by {signals[0]}' if signals else f'the session limit of {search.minutes:g} minutes'
                workers.cut()
            workers.kill_late()
            for i in workers.crashed():
                error = f'worker process exited with code {workers.processes[i].exitcode}'
                log(search, f'worker {i}: {error}; its trial {fail_running(study, [running.pop(i, None)], error)} '
                            'failed')
                if restarts < 3 and not workers.stop.is_set():
                    restarts += 1
                    workers.processes[i] = workers.start(i)
    finally:
        workers.join()
        for s, handler in handlers.items():
            signal.signal(s, handler)

    cut = sorted(set(running.values()))  # trials still running when the session ended
    fail_running(study, set(cut) if search.storage else None)  # those their workers could not mark failed
    queued = requeue_interrupted(study)
    if reason is None:
        used_up = budget_used(study, search) or time.time() >= clock.budget_deadline
        reason = 'the budget is used' if used_up else 'the workers stopped'
    clock.account(ended=reason)
    recs = write_record(study, search)
    decision = decide(recs, budget_used(study, search))
    if decision.action != 'search':
        log(search, f'the freeze rule says ({decision.action}): {decision.reason}')
    n = counts(recs)
    where = search.storage or Path(search.folder) / 'study.db'
    log(search, f'{reason}: kept {len(recs)} trials in {where} ({n["COMPLETE"]} complete, {n["PRUNED"]} pruned, '
                f'{n["FAIL"]} failed)' + (f'; trials {cut} were cut' if cut else '')
                + (f'; {len(queued)} queued to run again' if queued else '')
                + f'; search time {duration(study.user_attrs.get("search_seconds", 0.0))}')
    return 0


# ------------------------------------------------------------------------------------------------ confirmation
def _ignore_sigint():
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _measure(job):
    """One measurement of a confirmation, in a pool process: ('prepare'|'seed'|'batch', measure, config, ...)."""
    kind, measure, config, seed, protocol = job
    measurement = importlib.import_module(measure) if isinstance(measure, str) else measure
    if kind == 'prepare':
        measurement.prepare(config)  # builds the RL base into the cache (what it returns stays in the process)
        return None
    if kind == 'seed':
        return measurement.measure_seed(config, seed, protocol)
    return measurement.measure_batch(config, seed)


def measure_confirmation(search, config, protocol, pool=None):
    """A configuration measured on the confirmation protocol -> its record (rows, rows held, band distance)."""
    started = time.time()
    measurement = search.measurement()
    run = pool.map if pool else lambda f, jobs: [f(job) for job in jobs]
    run(_measure, [('prepare', search.measure, config, None, protocol)])
    jobs = ([('seed', search.measure, config, seed, protocol) for seed in protocol.seeds]
            + [('batch', search.measure, config, seed, protocol) for seed in protocol.batch_seeds])
    results = run(_measure, jobs)
    seeds, batches = results[:len(protocol.seeds)], results[len(protocol.seeds):]
    record = rows_record(measurement.judge(seeds, batches), measurement)
    return plain(dict(record, seeds=list(protocol.seeds), batch_seeds=list(protocol.batch_seeds),
                      protocol=protocol, config_key=config.key(), seconds=time.time() - started))


def run_confirm(search):
    """Apply the freeze rule: measure what it asks to confirm, store it in the study, say what it decided."""
    with exclusive(search) as free:
        return _confirm(search) if free else 1


def _confirm(search):
    study = open_study(search)
    decision = decide(records(study), budget_used(study, search))
    if decision.action == 'confirm':
        _, protocol = search.protocols()
        log(search, f'confirming: {decision.reason}')
        pool = (multiprocessing.get_context('spawn').Pool(search.processes, initializer=_ignore_sigint)
                if search.processes > 1 else None)
        try:
            for number in decision.confirm:
                record = next(r for r in records(study) if r['number'] == number)
                result = measure_confirmation(search, SubstrateConfig.from_description(record['config']), protocol,
                                              pool)
                study.set_user_attr(f'confirmation:{number}', result)
                write_record(study, search)
                log(search, f'trial {number} on the confirmation seeds: {result["rows_held"]} of {ALL_ROWS} rows, '
                            f'band distance {result["band_distance"]:.3f}')
        except KeyboardInterrupt:
            log(search, 'confirmation stopped: the confirmations finished so far are kept in the study')
            return 1
        finally:
            if pool:
                pool.terminate()
        decision = decide(records(study), budget_used(study, search))
    write_record(study, search)
    log(search, f'the freeze rule decided ({decision.action}): {decision.reason}')
    if decision.action == 'freeze':
        frozen = next(r for r in records(study) if r['number'] == decision.frozen)
        print('\nPaste as config.DEFAULT in agentrl/substrate/config.py (the freeze commit is made by hand):\n')
        print(expression(SubstrateConfig.from_description(frozen['config'])))
    return 0


def run_init(search):
    """Create the study and fix its rules in its record before any trial runs: its protocol, budget, freeze rule,
    fixed parameters, first trials (queued) and default rule; with search.commit, commit that record alone."""
    with exclusive(search) as free:
        if not free:
            return 1
        study = open_study(search)
        recs = records(study)
        started = [r['number'] for r in recs if r['state'] != 'WAITING']
        if started:
            print(f'the study {search.study!r} has run trials already ({len(started)}): its rules were fixed when it '
                  'was created', flush=True)
            return 1
        log(search, f'study {search.study!r} created: its rules are fixed and {len(recs)} first trials queued '
                    '(nothing measured yet)')
        write_record(study, search, commit_it=False)
        if search.commit:
            commit(search.folder, f'{search.title}: the study created and its rules fixed before any trial '
                                  f'({len(recs)} first trials queued)')
    return 0


def run_record(search):
    """Rewrite the record from the study (with --storage, study.db becomes a copy of the server's study)."""
    study = open_study(search)
    if search.storage:
        with atomic_output(Path(search.folder) / 'study.db', suffix='.db') as tmp:
            optuna.copy_study(from_study_name=search.study, from_storage=make_storage(search.storage),
                              to_storage=make_storage(sqlite_url(tmp)))
    recs = write_record(study, search)
    decision = decide(recs, budget_used(study, search))
    print(f'{len(recs)} trials recorded in {search.folder}; the freeze rule says ({decision.action}): '
          f'{decision.reason}')
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('command', nargs='?', default='search', choices=('init', 'search', 'confirm', 'record'))
    parser.add_argument('--study', default='first', choices=sorted(STUDIES),
                        help='which study (default first: calibration/; long-grammar: calibration/long-grammar/)')
    parser.add_argument('--folder', default='', help="the record folder (default: the study's)")
    parser.add_argument('--storage', default='', help='a shared database URL, e.g. postgresql://user@host/db')
    parser.add_argument('--minutes', type=float, default=0.0, help='session limit (running trials are cut)')
    parser.add_argument('--trials', type=int, default=0, help='stop after this many finished trials')
    parser.add_argument('--processes', type=int, default=2)
    parser.add_argument('--scheduler', default=executors.scheduler_address() or '',
                        help=f'a Dask scheduler address (tcp://host:8786): each trial measures its seeds on that '
                             f'cluster (default: ${executors.SCHEDULER_VARIABLE})')
    parser.add_argument('--commit', action='store_true', help='git commit the record as the study grows')
    parser.add_argument('--commit-minutes', type=float, default=Search.commit_minutes,
                        help='during a search, commit at most once per this many minutes (and at its end)')
    args = parser.parse_args(argv)
    if args.scheduler:  # refused now, not in the middle of a trial
        try:
            executors.check_scheduler_address(args.scheduler)
        except ValueError as error:
            parser.error(str(error))
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    search = study_search(args.study, storage=args.storage, minutes=args.minutes, trials=args.trials,
                          processes=args.processes, commit=args.commit, commit_minutes=args.commit_minutes,
                          scheduler=args.scheduler, **({'folder': args.folder} if args.folder else {}))
    commands = {'init': run_init, 'search': run_search, 'confirm': run_confirm, 'record': run_record}
    return commands[args.command](search)


if __name__ == '__main__':
    sys.exit(main())
