"""The calibration search (machinery/search/): objective order, pruning, the freeze rule, the search space,
snapshot and resume, the exports, stopping; on fake measurements, and one two-trial smoke run on the real ones."""
import csv
import dataclasses
import io
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest

from agentrl.calibration import freeze
from agentrl.substrate.config import CANDIDATES, Habits, SFTConfig, SubstrateConfig
from machinery import search as S

optuna.logging.set_verbosity(optuna.logging.ERROR)
TESTS = Path(__file__).resolve().parent


# ------------------------------------------------------------------------------------------- fake measurements
@dataclasses.dataclass(frozen=True)
class Row:
    """A calibration row with the fields of calibrate.Row."""
    quantity: str
    book: str
    low: float
    high: float
    scale: float
    fmt: str
    values: tuple
    mean: float
    holds: bool
    distance: float


def rows(held, distance=0.5, total=26, values=(1.0,)):
    """Synthetic rows: the first `held` inside their band, the others `distance` band widths outside."""
    return [Row(f'row {i}', '1', 0.0, 1.0, 1.0, '{:.3f}', tuple(values), sum(values) / len(values), i < held,
                0.0 if i < held else distance) for i in range(total)]


@dataclasses.dataclass(frozen=True)
class FakeProtocol:
    seeds: tuple = (0, 1, 2)
    batch_seeds: tuple = (0, 1)
    short_steps: int = 40
    long_steps: int = 80
    attempts: int = 16


@dataclasses.dataclass(frozen=True)
class FakeMeasure:
    """The measurement API of calibrate, faked: seed 0 holds `first` rows, other seeds `rest`; a seed's band distance
    grows with the configuration's habits.read (so trials differ). Calls are appended to `calls` (a file), if given."""
    first: int = 20
    rest: int = 20
    calls: str = ''
    sleep: float = 0.0
    fail: bool = False
    prune_extended: bool = False  # seed 0 of a configuration with the extended families holds 13 rows
    SEARCH = FakeProtocol()
    CONFIRMATION = FakeProtocol(seeds=(5, 6, 7), batch_seeds=(10, 11))

    def _call(self, *what):
        if self.calls:
            with open(self.calls, 'a') as file:
                file.write(' '.join(map(str, what)) + '\n')

    def prepare(self, config):
        self._call('prepare', config.key()[:8])
        if self.fail:
            raise RuntimeError('the RL base could not be built')

    def measure_seed(self, config, seed, protocol):
        self._call('seed', seed)
        time.sleep(self.sleep)
        first = 13 if self.prune_extended and config.families == 'extended' else self.first
        return dict(seed=seed, held=first if seed == protocol.seeds[0] else self.rest, distance=config.sft.habits.read)

    def measure_batch(self, config, seed):
        self._call('batch', seed)
        return dict(batch=seed)

    @staticmethod
    def judge(seeds, batches):
        return rows(min(m['held'] for m in seeds), distance=seeds[0]['distance'], values=[m['seed'] for m in seeds])

    @staticmethod
    def band_distance(judged):
        return sum(row.distance for row in judged)

    @staticmethod
    def rows_held(judged):
        return sum(row.holds for row in judged)


def in_memory_study():
    return optuna.create_study(direction='maximize', sampler=optuna.samplers.RandomSampler(seed=0))


def calls(path):
    return Path(path).read_text().split('\n')[:-1] if Path(path).exists() else []


# ------------------------------------------------------------------------------------------------ the objective
def test_the_objective_orders_by_rows_held_first_then_by_band_distance():
    assert S.objective_value(14, 1000.0) > S.objective_value(13, 0.001) > S.objective_value(13, 0.5)
    for held in range(26):
        assert S.objective_value(held + 1, 1e9) > S.objective_value(held, 1e-9)
    assert S.objective_value(26, 0.0) == 27.0
    # the value of a trial comes from the measurement's rows_held and band_distance
    judged = rows(20, distance=0.25)
    record = S.rows_record(judged, FakeMeasure())
    assert (record['rows_held'], record['band_distance']) == (20, 1.5) and len(record['rows']) == 26


def test_a_trial_records_the_band_distance_of_calibrates_rows():
    from agentrl.calibration import measure as calibration_measure, rows as calibration_rows

    vocabulary, invalid = calibration_rows.ROWS[0], next(s for s in calibration_rows.ROWS if 'invalid calls' in s.quantity)
    judged = [calibration_rows.judge_row(vocabulary, [385, 385]),  # band 280-350: 35 above, half its width
              calibration_rows.judge_row(invalid, [0.05, 0.45]),  # <= 0.10, width 0.1: the mean 0.25 is 1.5 widths above
              calibration_rows.judge_row(vocabulary, [300])]  # inside: 0
    record = S.rows_record(judged, calibration_measure)
    assert record['rows_held'] == 1 and record['band_distance'] == pytest.approx(2.0)
    assert [r['distance'] for r in record['rows']] == pytest.approx([0.5, 1.5, 0.0])
    assert record['rows'][1] == dict(quantity=invalid.quantity, book='0.04', low=None, high=0.1, fmt='{:.3f}',
                                     source='seed', scale=0.1, values=[0.05, 0.45], mean=pytest.approx(0.25),
                                     holds=False, distance=pytest.approx(1.5))
    json.dumps(record, allow_nan=False)  # a trial attribute is JSON


@pytest.mark.parametrize('first, pruned', [(13, True), (14, False)])
def test_a_trial_whose_first_seed_holds_fewer_than_14_rows_is_pruned_before_its_other_seeds(tmp_path, first, pruned):
    log = tmp_path / 'calls'
    study = in_memory_study()
    study.optimize(lambda trial: S.objective(trial, S.Search(measure=FakeMeasure(first=first, calls=str(log)))),
                   n_trials=1)
    trial = study.trials[0]
    seeds = [line for line in calls(log) if line.startswith('seed')]
    assert calls(log)[0].startswith('prepare') and [c for c in calls(log) if c.startswith('batch')] == \
        ['batch 0', 'batch 1']
    if pruned:
        assert trial.state == optuna.trial.TrialState.PRUNED and seeds == ['seed 0']
        assert trial.user_attrs['rows_held'] == 13 and trial.user_attrs['seeds'] == [0]
        assert trial.intermediate_values == {0: S.objective_value(13, 13 * trial.params['read'])}
    else:
        assert trial.state == optuna.trial.TrialState.COMPLETE and seeds == ['seed 0', 'seed 1', 'seed 2']
        assert trial.user_attrs['seeds'] == [0, 1, 2] and trial.value == pytest.approx(
            S.objective_value(14, 12 * trial.params['read']))


def test_a_trial_records_its_configuration_rows_and_time_and_a_failing_trial_records_its_error():
    study = in_memory_study()
    study.optimize(lambda trial: S.objective(trial, S.Search(measure=FakeMeasure(first=20, rest=18))), n_trials=1)
    attrs = study.trials[0].user_attrs
    config = SubstrateConfig.from_description(attrs['config'])
    assert config == S.config_from_params(study.trials[0].params) and attrs['config_key'] == config.key()
    assert attrs['rows_held'] == 18 and attrs['rows'][0]['values'] == [0, 1, 2] and attrs['rows'][0]['holds']
    assert attrs['protocol'] == dict(seeds=[0, 1, 2], batch_seeds=[0, 1], short_steps=40, long_steps=80, attempts=16)
    assert attrs['seconds'] >= 0
    study.optimize(lambda trial: S.objective(trial, S.Search(measure=FakeMeasure(fail=True))), n_trials=2,
                   catch=(Exception,))
    assert [t.state.name for t in study.trials] == ['COMPLETE', 'FAIL', 'FAIL']  # the search went on
    assert 'RuntimeError: the RL base could not be built' in study.trials[1].user_attrs['error']


# --------------------------------------------------------------------------------------------------- the space
def test_every_configuration_the_space_samples_is_valid_and_its_parameters_give_it_back():
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=1))
    seen = set()
    for _ in range(300):
        trial = study.ask()
        config = S.space(trial)
        assert isinstance(config, SubstrateConfig)
        assert S.config_from_params(S.params_of(config)) == config == S.config_from_params(trial.params)
        seen.add((config.families, config.grammar, config.max_offset, config.sft.habits.slips, config.n_head))
        study.tell(trial, 0.0)
    assert len(seen) > 50  # the structural choices are all explored


@pytest.mark.parametrize('name', ['main', 'c18'])
def test_the_named_candidates_are_points_of_the_space(name):
    params = S.params_of(CANDIDATES[name])
    assert S.space(optuna.trial.FixedTrial(params)) == CANDIDATES[name]
    assert eval(S.expression(CANDIDATES[name]), dict(SubstrateConfig=SubstrateConfig, SFTConfig=SFTConfig,
                                                    Habits=Habits)) == CANDIDATES[name]


def test_a_configuration_outside_the_space_is_refused():
    with pytest.raises(ValueError, match='max_offset'):
        S.params_of(SubstrateConfig(max_offset=5))
    with pytest.raises(ValueError, match='does not cover'):
        S.params_of(SubstrateConfig(sft=SFTConfig(batch_size=16)))


# --------------------------------------------------------------------------------------------- the freeze rule
def record(number, held, distance, confirmation=None, state='COMPLETE'):
    confirmed = None if confirmation is None else dict(rows_held=confirmation[0], band_distance=confirmation[1])
    return dict(number=number, state=state, rows_held=held, band_distance=distance, confirmation=confirmed)


def test_a_candidate_holding_all_rows_is_confirmed_then_frozen_if_it_holds_24_on_the_confirmation_seeds():
    records = [record(0, 20, 3.0), record(1, 26, 0.0), record(2, 25, 0.1)]
    decision = freeze.decide(records, exhausted=False)
    assert (decision.action, decision.confirm) == ('confirm', (1,))
    records[1] = record(1, 26, 0.0, confirmation=(24, 0.4))
    decision = freeze.decide(records, exhausted=False)
    assert (decision.action, decision.frozen) == ('freeze', 1) and '24 on the confirmation seeds' in decision.reason
    assert freeze.decide(records, exhausted=True).frozen == 1  # a confirmed candidate wins over the fallback


def test_an_unconfirmed_candidate_does_not_stop_the_search_while_the_budget_lasts():
    records = [record(0, 26, 0.0, confirmation=(23, 0.2)), record(1, 25, 0.0), record(2, 12, 9.0, state='PRUNED')]
    decision = freeze.decide(records, exhausted=False)
    assert decision.action == 'search' and 'fewer than 24' in decision.reason
    assert freeze.decide([], exhausted=False).action == 'search'
    assert freeze.decide([], exhausted=True).action == 'none'


def test_when_the_budget_is_used_the_five_best_are_confirmed_and_the_best_on_the_confirmation_seeds_frozen():
    records = [record(0, 22, 1.0), record(1, 24, 2.0), record(2, 24, 1.5), record(3, 25, 9.0), record(4, 23, 0.1),
               record(5, 22, 0.5), record(6, 26, 0.0, confirmation=(20, 3.0)), record(7, 25, 1.0, state='PRUNED'),
               record(8, 22, 0.9)]
    decision = freeze.decide(records, exhausted=True)
    # most rows first, then the smaller band distance: 6 (26), 3 (25), 2 (24, 1.5), 1 (24, 2.0), 4 (23); 6 is measured
    assert (decision.action, decision.confirm) == ('confirm', (3, 2, 1, 4))
    confirmations = {3: (22, 0.5), 2: (23, 0.9), 1: (23, 0.4), 4: (21, 0.0)}
    for r in records:
        if r['number'] in confirmations:
            r['confirmation'] = dict(rows_held=confirmations[r['number']][0],
                                     band_distance=confirmations[r['number']][1])
    decision = freeze.decide(records, exhausted=True)
    assert (decision.action, decision.frozen) == ('freeze', 1)  # 23 rows on the confirmation seeds, the smaller distance
    assert 'trial 1 (24 of 26 rows on the search seeds, 23 on the confirmation seeds)' in decision.reason


def test_the_freeze_rule_read_from_an_export_uses_the_budget_the_study_recorded():
    trials = [record(0, 24, 0.3, confirmation=(22, 0.5)), record(1, 23, 0.1, confirmation=(23, 0.9)),
              record(2, 12, 9.0, state='PRUNED')]
    export = dict(attrs=dict(budget=dict(trials=300, seconds=600), search_seconds=599.0), trials=trials)
    assert freeze.decision_from_export(export)[0].action == 'search'  # 1 s of budget left
    export['attrs']['search_seconds'] = 600.0
    decision, recs = freeze.decision_from_export(export)
    assert (decision.action, decision.frozen, recs) == ('freeze', 1, trials)
    export['attrs'].update(search_seconds=0.0, budget=dict(trials=2, seconds=600))  # 2 complete trials: used
    assert freeze.decision_from_export(export)[0].frozen == 1


def test_the_default_substrate_is_the_configuration_the_committed_record_freezes():
    from agentrl.paths import REPO
    from agentrl.substrate import config
    decision, recs = freeze.decision_from_export(json.loads((REPO / 'calibration' / 'trials.json').read_text()))
    assert decision.action == 'freeze', decision.reason
    frozen = next(r for r in recs if r['number'] == decision.frozen)
    assert config.DEFAULT == SubstrateConfig.from_description(frozen['config'])
    assert config.DEFAULT.key() == frozen['config_key'] and config.DEFAULT in CANDIDATES.values()



def test_the_long_grammar_candidate_is_the_trial_its_study_froze_and_the_default_follows_the_rule_fixed_before_it():
    from agentrl.paths import REPO
    from agentrl.substrate import config
    export = json.loads((REPO / 'calibration' / 'long-grammar' / 'trials.json').read_text())
    decision, recs = freeze.decision_from_export(export)
    assert decision.action == 'freeze', decision.reason
    frozen = next(r for r in recs if r['number'] == decision.frozen)
    assert CANDIDATES['long'] == SubstrateConfig.from_description(frozen['config']) and CANDIDATES['long'].grammar == 'long'
    assert CANDIDATES['long'].key() == frozen['config_key']
    # the rule fixed before the search: the default only if it held all 26 rows on seeds 0-4 and >= 24 on seeds 5-9
    earned = frozen['rows_held'] == freeze.ALL_ROWS and (frozen.get('confirmation') or {}).get('rows_held', 0) >= freeze.CONFIRM_ROWS
    assert (config.DEFAULT == CANDIDATES['long']) == earned
    assert earned or config.DEFAULT == CANDIDATES['t45']

# ------------------------------------------------------------------------------- the search, in worker processes
def search_in(tmp_path, **fields):
    fields.setdefault('measure', FakeMeasure())
    return S.Search(folder=str(tmp_path / 'calibration'), live=str(tmp_path / 'cache' / 'live.db'), **fields)


def load(search, where=None):
    return optuna.load_study(study_name=search.study, storage=S.sqlite_url(where or search.live_path()))


def summary(study):
    return [(t.number, t.state.name, t.params, t.value, t.user_attrs.get('candidate')) for t in study.trials]


def test_a_search_in_two_processes_is_recorded_in_a_snapshot_that_a_fresh_clone_resumes_until_the_budget(tmp_path,
                                                                                                        capsys):
    search = search_in(tmp_path, trials=3, budget_trials=3, measure=FakeMeasure(first=20, rest=19, prune_extended=True))
    assert S.run_search(search) == 0
    snapshot = Path(search.folder) / 'study.db'
    first = summary(load(search, snapshot))
    assert len(first) == 3 and [t[4] for t in first[:2]] == ['main', 'c18']
    assert [t[1] for t in first[:2]] == ['COMPLETE', 'PRUNED']  # c18's families are 'extended': 13 rows on seed 0
    assert S.space(optuna.trial.FixedTrial(first[1][2])) == CANDIDATES['c18']
    with sqlite3.connect(snapshot) as db:
        assert db.execute('PRAGMA integrity_check').fetchone() == ('ok',)
    seconds = load(search).user_attrs['search_seconds']
    assert seconds > 0 and len(load(search).user_attrs['sessions']) == 1

    search.live_path().unlink()  # a fresh clone: only the committed snapshot
    assert sum(t[1] == 'COMPLETE' for t in first) < 3  # c18 was pruned: the budget of 3 complete trials is not used
    assert S.run_search(dataclasses.replace(search, trials=0)) == 0
    study = load(search)
    assert summary(study)[:3] == first and summary(load(search, snapshot)) == summary(study)
    assert 3 <= len(study.get_trials(states=(optuna.trial.TrialState.COMPLETE,))) <= 4  # 2 workers: one may finish
    assert study.user_attrs['search_seconds'] > seconds and len(study.user_attrs['sessions']) == 2
    out = capsys.readouterr().out
    assert 'worker 0:' not in out and 'worker 1:' not in out, out
    assert 'search session 2' in out and 'the freeze rule has work (confirm' in out
    assert 'the freeze rule says (confirm): the budget is used' in out
    assert S.run_search(search) == 0  # starts no worker
    assert 'not searching: the budget is used' in capsys.readouterr().out


def test_two_workers_never_run_the_same_queued_trial(tmp_path, capsys):
    queued = 30  # trials queued (main and c18 first): each one a chance to hand one to both workers
    search = search_in(tmp_path, trials=queued)
    study = S.open_study(search)
    for _ in range(queued - 2):
        study.enqueue_trial(S.params_of(CANDIDATES['main']))
    assert S.run_search(search) == 0
    out = capsys.readouterr().out
    assert 'worker 0:' not in out and 'worker 1:' not in out, out  # e.g. "Cannot tell a COMPLETE trial"
    assert [t.state.name for t in load(search).trials] == ['COMPLETE'] * queued
    assert sorted(int(line.split('trial ')[1].split()[0]) for line in out.splitlines() if ' complete in ' in line) == \
        list(range(queued))


class Held:
    """A lock that says whether it is held."""
    held = False

    def __enter__(self):
        self.held = True

    def __exit__(self, *exc):
        self.held = False


def test_a_worker_asks_for_its_trial_under_the_lock_and_tells_its_state(tmp_path):
    search, asking = search_in(tmp_path, measure=FakeMeasure(first=13)), Held()
    storage = S.study_storage(search)
    study = S.open_study(search, storage=storage)
    ask, asked = study.ask, []
    study.ask = lambda: asked.append(asking.held) or ask()
    assert S.run_trial(study, storage, search, asking, report=None) == 0 and asked == [True]
    assert study.trials[0].state.name == 'PRUNED'
    failing = dataclasses.replace(search, measure=FakeMeasure(fail=True))
    assert S.run_trial(study, storage, failing, asking, report=None) == 1 and study.trials[1].state.name == 'FAIL'
    assert S.run_trial(study, storage, dataclasses.replace(search, measure=FakeMeasure()), asking, None) == 2
    assert study.trials[2].state.name == 'COMPLETE' and asked == [True] * 3


def test_a_shared_server_starts_from_the_committed_snapshot_and_record_copies_it_back(tmp_path):
    search = search_in(tmp_path)
    study = S.open_study(search)
    study.optimize(lambda trial: S.objective(trial, search), n_trials=2)
    S.write_record(study, search)
    server = dataclasses.replace(search, storage=S.sqlite_url(tmp_path / 'server.db'))  # a stand-in for PostgreSQL
    shared = S.open_study(server)
    assert summary(shared) == summary(study)  # the committed trials, copied onto the server
    shared.optimize(lambda trial: S.objective(trial, server), n_trials=1)
    assert S.run_record(server) == 0
    assert summary(load(search, Path(search.folder) / 'study.db')) == summary(shared) and len(shared.trials) == 3
    assert len(json.loads((Path(search.folder) / 'trials.json').read_text())['trials']) == 3


def test_a_live_copy_behind_the_snapshot_is_replaced_and_one_ahead_is_kept(tmp_path):
    search = search_in(tmp_path)
    study = S.open_study(search)
    study.optimize(lambda trial: S.objective(trial, search), n_trials=2)
    S.write_record(study, search)
    behind = tmp_path / 'behind.db'
    S.copy_sqlite(search.live_path(), behind)
    study.optimize(lambda trial: S.objective(trial, search), n_trials=2)
    S.write_record(study, search)
    assert S.progress(Path(search.folder) / 'study.db', search.study)[0] == 4
    os.replace(behind, search.live_path())  # the live copy is now 2 trials behind the snapshot
    assert S.progress(search.live_path(), search.study)[0] == 2
    S.open_live(search)
    assert S.progress(search.live_path(), search.study)[0] == 4
    assert S.progress(search.live_path().with_suffix('.behind.db'), search.study)[0] == 2  # kept aside
    S.open_study(search).optimize(lambda trial: S.objective(trial, search), n_trials=1)  # one not in the snapshot
    S.open_live(search)
    assert S.progress(search.live_path(), search.study)[0] == 5


def test_the_exports_read_back_without_optuna_and_the_readme_says_what_ran(tmp_path):
    search = search_in(tmp_path, measure=FakeMeasure(first=20, rest=19, prune_extended=True))
    study = S.open_study(search)
    study.optimize(lambda trial: S.objective(trial, search), n_trials=3)
    S.write_record(study, search)
    folder = Path(search.folder)
    table = list(csv.DictReader(io.StringIO((folder / 'trials.csv').read_text())))
    data = json.loads((folder / 'trials.json').read_text())
    assert [r['number'] for r in table] == ['0', '1', '2'] and [r['state'] for r in table[:2]] == ['COMPLETE', 'PRUNED']
    assert table[0]['candidate'] == 'main' and float(table[0]['read']) == 0.4 and table[0]['rows_held'] == '19'
    assert float(table[0]['band_distance']) == pytest.approx(7 * 0.4) and table[1]['rows_held'] == '13'
    assert float(table[0]['objective']) == pytest.approx(S.objective_value(19, 7 * 0.4), abs=1e-6)
    assert [t['number'] for t in data['trials']] == [0, 1, 2] and data['study'] == S.STUDY_NAME
    assert data['trials'][0]['rows'][0]['values'] == [0, 1, 2] and data['trials'][1]['rows'][0]['values'] == [0]
    assert table[2]['read'] == f"{data['trials'][2]['params']['read']:.6g}"  # a fixed float format
    assert table[2]['seconds'] == str(round(data['trials'][2]['seconds']))
    again = S.records(load(search))
    assert S.trials_csv(again) == (folder / 'trials.csv').read_text()  # deterministic: same study, same bytes
    assert S.trials_json(load(search), again) == (folder / 'trials.json').read_text()
    readme = (folder / 'README.md').read_text()
    complete = sum(r['state'] == 'COMPLETE' for r in table)
    assert f'3 trials: {complete} complete, {3 - complete} pruned, 0 failed' in readme
    assert 'postgresql://user@host/db' in readme and 'measures GRPO seeds 0-2 (40 and 80 steps' in readme
    assert 'Not yet' in readme and 'fewer than 14' in readme and '| 0 | 19 | 2.800 | 19 | 2.800 | 0 |' in readme


def test_trials_left_running_by_a_killed_search_are_failed_and_queued_again_when_the_next_starts(tmp_path, capsys):
    search = search_in(tmp_path, trials=2, processes=1)
    killed = S.open_study(search).ask()  # main, queued first: running when its search was killed
    S.space(killed)
    S.run_search(search)
    assert 'trials [0] were left running by a search that was killed: marked failed' in capsys.readouterr().out
    trials = load(search).trials
    assert trials[0].state.name == 'FAIL' and 'error' not in trials[0].user_attrs
    # this session ran c18 (queued when the study was made), then main again, before any new sample
    assert [t.state.name for t in trials] == ['FAIL', 'COMPLETE', 'COMPLETE']
    again = trials[2]
    assert again.params == trials[0].params and again.user_attrs['requeued_from'] == 0
    assert again.user_attrs['attempt'] == 2 and again.user_attrs['candidate'] == 'main'


def search_script(tmp_path, arguments):
    """A search in a process of its own (so that it can be signalled), built by search_in(tmp_path, arguments)."""
    return (f'import sys; sys.path.insert(0, {str(TESTS)!r})\n'
            'import test_search as T\nfrom machinery import search as S\n'
            f'sys.exit(S.run_search(T.search_in(T.Path({str(tmp_path)!r}), {arguments})))\n')


@pytest.mark.parametrize('how', ['SIGINT', pytest.param('SIGTERM', marks=pytest.mark.slow),
                                 pytest.param('SIGHUP', marks=pytest.mark.slow),
                                 pytest.param('minutes', marks=pytest.mark.slow)])  # the same stop, other triggers
def test_a_signal_or_the_session_limit_stops_both_workers_within_seconds_and_keeps_a_consistent_snapshot(tmp_path,
                                                                                                         how):
    limit = ', minutes=0.15' if how == 'minutes' else ''
    process = subprocess.Popen([sys.executable, '-c', search_script(tmp_path, f'measure=T.FakeMeasure(sleep=60){limit}')],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    live, deadline = tmp_path / 'cache' / 'live.db', time.time() + 60
    while time.time() < deadline and _running(live) < (1 if how == 'minutes' else 2):
        time.sleep(0.2)
    started = time.time()
    if how != 'minutes':
        assert _running(live) == 2, 'both workers run a trial'
        process.send_signal(getattr(signal, how))
    out, err = process.communicate(timeout=60)
    took = time.time() - started
    assert process.returncode == 0 and took < 15, (took, out, err)
    assert 'Traceback' not in err + out, err
    final = out.strip().splitlines()[-1]
    stop = f'stopped by {how}' if how != 'minutes' else 'the session limit of 0.15 minutes'
    trials = load(search_in(tmp_path), tmp_path / 'calibration' / 'study.db').trials
    cut = [t.number for t in trials if t.state.name == 'FAIL']
    assert stop in final and f'kept {len(trials)} trials' in final and f'trials {cut} were cut' in final, final
    assert f'{len(cut)} queued to run again' in final and cut and (how == 'minutes' or cut == [0, 1])
    with sqlite3.connect(tmp_path / 'calibration' / 'study.db') as db:
        assert db.execute('PRAGMA integrity_check').fetchone() == ('ok',)
    again = [t for t in trials if 'requeued_from' in t.user_attrs]
    assert [t.user_attrs['requeued_from'] for t in again] == cut and {t.state.name for t in again} == {'WAITING'}
    # a trial cut while its parameters were being set (some of them, not all) is queued with the ones it was given
    cut_params = [trials[n].params if len(trials[n].params) == len(S.SPACE) else trials[n].system_attrs['fixed_params']
                  for n in cut]
    assert [t.system_attrs['fixed_params'] for t in again] == cut_params


def _running(live):
    if not live.exists():
        return 0
    try:
        with sqlite3.connect(f'file:{live}?mode=ro', uri=True) as db:
            return db.execute("SELECT COUNT(*) FROM trials WHERE state = 'RUNNING'").fetchone()[0]
    except sqlite3.DatabaseError:
        return 0


# ------------------------------------------------------------------------------------------------- confirmation
def test_confirm_measures_a_full_candidate_on_the_confirmation_seeds_and_prints_the_frozen_configuration(tmp_path,
                                                                                                       capsys):
    log = tmp_path / 'calls'
    search = search_in(tmp_path, processes=1, measure=FakeMeasure(first=26, rest=26))
    study = S.open_study(search)
    study.optimize(lambda trial: S.objective(trial, search), n_trials=1)
    assert S.run_search(search) == 0 and 'not searching: trial 0 (26 of 26 rows' in capsys.readouterr().out
    confirm = dataclasses.replace(search, measure=FakeMeasure(first=24, rest=25, calls=str(log)))
    assert S.run_confirm(confirm) == 0
    out = capsys.readouterr().out
    assert [c for c in calls(log) if c.startswith('seed')] == ['seed 5', 'seed 6', 'seed 7']
    assert [c for c in calls(log) if c.startswith('batch')] == ['batch 10', 'batch 11']
    assert 'trial 0 on the confirmation seeds: 24 of 26 rows' in out and 'decided (freeze)' in out
    assert out.strip().splitlines()[-1] == S.expression(CANDIDATES['main']) == 'SubstrateConfig()'
    stored = load(search).user_attrs['confirmation:0']
    assert stored['rows_held'] == 24 and stored['seeds'] == [5, 6, 7] and stored['batch_seeds'] == [10, 11]
    frozen = (Path(search.folder) / 'README.md').read_text().split('The frozen configuration')[1].split('## Best')[0]
    assert 'trial 0' in frozen and 'On the search seeds' in frozen and 'On the confirmation seeds' in frozen
    assert frozen.count('| row 25 |') == 2  # both tables, the search seeds' and the confirmation seeds'


def test_commit_commits_only_the_record_files(tmp_path):
    repo = tmp_path / 'repo'
    git = lambda *args: subprocess.run(['git', '-C', str(repo), *args], capture_output=True, text=True,  # noqa
                                       check=True).stdout
    repo.mkdir()
    git('init', '-q')
    git('config', 'user.email', 'test@example.com')
    git('config', 'user.name', 'test')
    (repo / 'other.py').write_text('x = 1\n')
    git('add', 'other.py')
    (repo / 'calibration').mkdir()
    for name in ('trials.csv', 'README.md'):
        (repo / 'calibration' / name).write_text(name)
    assert S.commit(repo / 'calibration', 'record')
    assert sorted(git('show', '--name-only', '--format=', 'HEAD').split()) == ['calibration/README.md',
                                                                               'calibration/trials.csv']
    assert 'A  other.py' in git('status', '--short')  # what another engineer staged stays staged, uncommitted
    assert not S.commit(repo / 'calibration', 'nothing new')


# -------------------------------------------------------------------------------------- smoke run, real measures
def tiny_space(trial):
    """The search space with a few SFT steps (for the smoke run)."""
    config = S.space(trial)
    return dataclasses.replace(config, sft=dataclasses.replace(config.sft, careful_steps=4, habit_steps=2,
                                                               batch_size=4))


def test_two_real_trials_run_end_to_end_on_a_tiny_configuration_in_two_processes(tmp_path, monkeypatch):
    from agentrl.calibration import measure as calibration_measure, rows as calibration_rows

    monkeypatch.setenv('AGENTRL_CACHE_DIR', str(tmp_path / 'agentrl-cache'))
    tiny = calibration_measure.Protocol(seeds=(0,), batch_seeds=(0,), short_steps=2, long_steps=3, attempts=8)  # pass@8: >= 8
    search = search_in(tmp_path, trials=2, measure='agentrl.calibration.measure', space=tiny_space, protocol=tiny,
                       confirmation=tiny)
    assert S.run_search(search) == 0
    trials = load(search).trials
    assert len(trials) == 2 and {t.state.name for t in trials} <= {'COMPLETE', 'PRUNED'}, \
        [t.user_attrs.get('error') for t in trials]
    assert all(len(t.user_attrs['rows']) == 26 for t in trials)


# ------------------------------------------------------------------------------ a study seeded from another one
def _first_study_export(tmp_path):
    """A first study's record: trials.json with complete trials of rows 20..25 and a pruned one (never seeded)."""
    folder = tmp_path / 'first'
    folder.mkdir()
    base = S.params_of(CANDIDATES['main'])
    trials = [dict(number=n, state='COMPLETE', rows_held=20 + n % 6, band_distance=1.0 / (1 + n),
                   params=dict(base, read=0.15 + 0.01 * n)) for n in range(8)]
    trials.append(dict(number=8, state='PRUNED', rows_held=26, band_distance=0.0, params=dict(base, read=0.5)))
    (folder / 'trials.json').write_text(json.dumps(dict(attrs={}, trials=trials)))
    return folder, trials


def test_a_seeded_study_queues_the_other_studys_best_trials_with_only_the_fixed_parameter_changed(tmp_path):
    source, trials = _first_study_export(tmp_path)
    search = search_in(tmp_path, fixed=(('grammar', 'long'),), seeded_from=str(source), seeded_count=3,
                       study='seeded', default_rule='only if confirmed.')
    queued = S.seed_trials(search)
    # the freeze rule's order: rows held first (25: trial 5; 24: trial 4; 23: trial 3), the pruned one left out
    assert [number for number, _ in queued] == [5, 4, 3]
    by_number = {t['number']: t['params'] for t in trials}
    for number, params in queued:
        assert params == dict(by_number[number], grammar='long')
    assert S.run_init(search) == 0
    study = load(search)
    assert [(t.state.name, t.user_attrs['seeded_from']) for t in study.trials] == [('WAITING', 5), ('WAITING', 4),
                                                                                  ('WAITING', 3)]
    assert study.user_attrs['fixed_params'] == {'grammar': 'long'}
    assert study.user_attrs['default_rule'] == 'only if confirmed.'
    assert study.user_attrs['seeded_from'] == dict(folder=str(source), count=3)
    readme = (Path(search.folder) / 'README.md').read_text()
    assert "holds `grammar` at 'long'" in readme and 'The default rule: only if confirmed.' in readme
    assert S.run_init(search) == 0  # again before any trial ran: nothing changes
    assert len(load(search).trials) == 3
    with pytest.raises(SystemExit, match='keeps its protocol'):  # a session with another rule is refused
        S.open_study(dataclasses.replace(search, default_rule='always.'))


def test_a_study_with_a_fixed_parameter_only_ever_samples_that_value_and_runs_its_queued_trials_first(tmp_path):
    source, trials = _first_study_export(tmp_path)
    search = search_in(tmp_path, fixed=(('grammar', 'long'),), seeded_from=str(source), seeded_count=2,
                       study='seeded', trials=4, measure=FakeMeasure(first=20, rest=19))
    assert S.run_init(search) == 0 and S.run_search(search) == 0
    study = load(search)
    finished = [t for t in study.trials if t.state.name == 'COMPLETE']
    assert len(finished) >= 4 and all(t.params['grammar'] == 'long' for t in study.trials)
    assert all(SubstrateConfig.from_description(t.user_attrs['config']).grammar == 'long' for t in finished)
    assert [t.user_attrs.get('seeded_from') for t in study.trials[:2]] == [5, 4]
    assert 'seeded_from' not in study.trials[2].user_attrs  # then TPE's own samples


def test_a_fixed_parameter_must_be_a_searched_one_with_a_value_inside_its_range():
    with pytest.raises(ValueError, match="fixed parameters \\['grammer'\\] are not in the search space"):
        S.space_with((('grammer', 'long'),))
    with pytest.raises(ValueError, match="grammar='longest' is outside the search space"):
        S.space_with((('grammar', 'longest'),))
    narrowed = dict((name, d) for name, _, d in S.space_with((('grammar', 'long'),)))
    assert narrowed['grammar'].choices == ('long',) and narrowed['read'] == dict(
        (name, d) for name, _, d in S.SPACE)['read']


def test_the_named_studies_are_the_first_and_the_long_grammar_one_seeded_with_its_twelve_best():
    first, long = S.study_search('first'), S.study_search('long-grammar')
    assert (first.study, first.fixed, first.seeded_from, first.default_rule) == (S.STUDY_NAME, (), '', '')
    assert Path(long.folder) == Path(first.folder) / 'long-grammar' and long.fixed == (('grammar', 'long'),)
    assert Path(long.seeded_from) == Path(first.folder) and long.seeded_count == 12
    assert '26 rows' in long.default_rule and '24' in long.default_rule
    assert long.live_path() != first.live_path()
    with pytest.raises(ValueError, match="unknown study 'second'"):
        S.study_search('second')


def test_a_stop_during_a_trials_storage_writes_cuts_the_trial_only_after_them():
    from machinery.search import workers

    workers._IN_TRIAL.set()
    workers._STOPPING.clear()
    done = []
    try:
        with pytest.raises(KeyboardInterrupt):
            with workers.uninterrupted():
                workers._on_sigterm(signal.SIGTERM, None)  # the signal arrives in the middle of a write
                done.append('the write ran to its end')
        assert workers._IN_TRIAL.is_set()  # the rest of the trial stays interruptible
    finally:
        workers._IN_TRIAL.clear()
        workers._STOPPING.clear()
    assert done == ['the write ran to its end']
