"""The calibration searches as recorded Optuna studies (make calibrate-search), and their freeze rule.

    python -m machinery.search init [--study S] [--commit]          create a study, fix its rules, queue first trials
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
fixed before the first search started (agentrl/calibration/freeze.py); a study records them (and its own extra rules)
when it is created.

The modules: space (the search space, the named studies, a session's settings: Search), storage (the live database,
its snapshot, the study opened and its trials queued again), workers (a worker process and the trials it runs),
session (a search session's worker processes, clock and stop conditions), record (the record files and their README),
confirm (the freeze rule's confirmations), cli (the command line).
"""
from machinery.search.cli import main, run_init, run_record
from machinery.search.confirm import measure_confirmation, run_confirm
from machinery.search.record import (band, commit, count, duration, log, readme, rows_table, seeds, trial_line,
                                     trials_csv, trials_json, write_record)
from machinery.search.session import Clock, Workers, run_search
from machinery.search.space import (FIRST_TRIALS, PRUNE_BELOW, SPACE, STUDIES, STUDY_NAME, NarrowedSpace, Search,
                                    config_from_params, expression, params_of, space, space_with, study_search)
from machinery.search.storage import (budget_used, copy_sqlite, counts, exclusive, fail_running, make_storage,
                                      open_live, open_study, plain, progress, records, requeue_interrupted,
                                      seed_trials, sqlite_url, study_storage)
from machinery.search.workers import measure_trial, measured, objective, objective_value, rows_record, run_trial, worker
