"""The command line: init, search, confirm, record (python -m machinery.search)."""
import argparse
import sys
from pathlib import Path

import optuna

from agentrl import executors
from agentrl.atomic import atomic_output
from agentrl.calibration.freeze import decide
from machinery.search.confirm import run_confirm
from machinery.search.record import commit, log, write_record
from machinery.search.session import run_search
from machinery.search.space import STUDIES, Search, study_search
from machinery.search.storage import budget_used, exclusive, make_storage, open_study, records, sqlite_url


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
    description = sys.modules[__package__].__doc__.splitlines()[0]  # the package's docstring says what it does
    parser = argparse.ArgumentParser(prog='python -m machinery.search', description=description)
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
