"""A search session: its worker processes started, watched and stopped, its time added to the study's, its record
written after every finished trial, until a stop condition."""
import datetime
import math
import multiprocessing
import os
import queue
import signal
import time
from pathlib import Path

from optuna.trial import TrialState

from agentrl.calibration.freeze import decide
from agentrl.side_runs import shown
from machinery.search.record import duration, log, trial_line, write_record
from machinery.search.storage import (budget_used, counts, exclusive, fail_running, open_study, records,
                                      requeue_interrupted, sqlite_url, study_storage)
from machinery.search.workers import worker


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
    storage = study_storage(search)
    study = open_study(search, storage=storage)
    if not search.storage:
        # left RUNNING by a search that was killed (nothing else writes the live copy)
        stale = fail_running(study, storage)
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
                failed = fail_running(study, storage, [running.pop(i, None)], error)
                log(search, f'worker {i}: {error}; its trial {failed} failed')
                if restarts < 3 and not workers.stop.is_set():
                    restarts += 1
                    workers.processes[i] = workers.start(i)
    finally:
        workers.join()
        for s, handler in handlers.items():
            signal.signal(s, handler)

    cut = sorted(set(running.values()))  # trials still running when the session ended
    fail_running(study, storage, set(cut) if search.storage else None)  # those their workers could not mark failed
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
    where = search.storage or shown(Path(search.folder) / 'study.db')  # a committed log names no machine's folders
    log(search, f'{reason}: kept {len(recs)} trials in {where} ({n["COMPLETE"]} complete, {n["PRUNED"]} pruned, '
                f'{n["FAIL"]} failed)' + (f'; trials {cut} were cut' if cut else '')
                + (f'; {len(queued)} queued to run again' if queued else '')
                + f'; search time {duration(study.user_attrs.get("search_seconds", 0.0))}')
    return 0
