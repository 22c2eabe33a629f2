"""The chapter's claims on several substrates (agentrl/ch10/across.py, machinery/substrate_sweep.py): the label
rule, the premise check, where each substrate's configuration comes from, and a small sweep recorded, merged and
checked against the run cache."""
import dataclasses
import json

import pytest

from agentrl.calibration import substrates
from agentrl.calibration.freeze import decision_from_export
from agentrl.ch10 import across, claims, experiments, explanations
from agentrl.paths import REPO
from agentrl.substrate.config import DEFAULT, SubstrateConfig
from machinery import substrate_sweep
from substrate_fixtures import MAIN, PLUMBING_SFT

H, N, S = claims.HOLDS, claims.DOES_NOT_HOLD, claims.SEED_DEPENDENT


# ------------------------------------------------------------------------------------------------ the label rule
@pytest.mark.parametrize('verdicts, expected', [
    ([H] * 6, across.ROBUST), ([N] * 6, across.ROBUST),
    ([H, H, H, H, H, N], across.SUBSTRATE_DEPENDENT), ([N, S, H], across.SUBSTRATE_DEPENDENT),
    ([S] * 6, across.UNDECIDED), ([H, H, S], across.UNDECIDED), ([N, S], across.UNDECIDED),
    ([H], across.ROBUST)])
def test_a_claim_is_robust_substrate_dependent_or_seed_dependent_by_the_rule_fixed_before_the_sweep(verdicts,
                                                                                                    expected):
    assert across.label(verdicts) == expected


def test_the_label_rule_refuses_what_is_not_a_verdict():
    with pytest.raises(ValueError, match='at least one substrate'):
        across.label([])
    with pytest.raises(ValueError, match="unknown verdicts \\['held'\\]"):
        across.label([H, 'held'])


def _run(entropies, invalid=0.0, pass1=0.5, pass8=0.8, kl=0.1, distinct=3.0, reads=1.0, vocab=283):
    history = [dict(step=i, entropy=e, reward=0.5, reads=reads, invalid=invalid, kl_ref=kl, signal=True)
               for i, e in enumerate(entropies)]
    return dict(history=history, metrics=dict(pass1=pass1, pass8=pass8, distinct=distinct, invalid=invalid,
                                              kl_start=kl), vocab_size=vocab)


def test_a_claim_table_row_counts_the_seeds_on_each_substrate_and_labels_the_claim():
    collapsing, flat = _run([1.0] * 5 + [0.2] * 35), _run([1.0] * 40)
    by_substrate = {'a': across.substrate_verdicts([{'none': collapsing}] * 5, [0, 1, 2, 3, 4]),
                    'b': across.substrate_verdicts([{'none': flat}] * 5, [0, 1, 2, 3, 4])}
    rows = {row['key']: row for row in across.claim_table(by_substrate)}
    assert rows['collapse']['cells'] == dict(a=dict(held_on=5, seeds=5, verdict=H), b=dict(held_on=0, seeds=5,
                                                                                            verdict=N))
    assert rows['collapse']['label'] == across.SUBSTRATE_DEPENDENT
    assert 'kl-ordering' not in rows  # its runs are not in the sweep: left out, not failed


def test_a_reading_is_checked_against_the_substrates_where_its_claim_flips():
    key = 'more-invalid-calls'  # premise: the bonus and temperature runs make fewer than 0.15 invalid calls
    few, many = _run([1.0] * 40, invalid=0.05), _run([1.0] * 40, invalid=0.5)
    base = _run([1.0] * 40, invalid=0.1)
    calm = [{'none': base, 'entropy 0.03': few, 'temperature 1.3': few}] * 5  # claim fails, premise holds
    loud = [{'none': base, 'entropy 0.03': many, 'temperature 1.3': many}] * 5  # claim holds, premise fails
    runs = dict(a=calm, b=loud)
    verdicts = {name: across.substrate_verdicts(r, [0, 1, 2, 3, 4]) for name, r in runs.items()}
    found = across.premise_across(key, runs, verdicts)
    assert found['cells']['a']['claim'] == N and found['cells']['a']['premise'] == H
    assert found['cells']['b']['claim'] == H and found['cells']['b']['premise'] == N
    assert found['agree'] == ['a', 'b'] and found['contradict'] == []
    assert across.premise_sentence(found, dict(a='A', b='B')).startswith('Yes: on every substrate')
    # the same claim where its premise is absent and it still fails: the reading is contradicted
    runs = dict(a=calm, b=[{'none': _run([1.0] * 40, invalid=0.6), 'entropy 0.03': many, 'temperature 1.3': many}] * 5)
    verdicts = {name: across.substrate_verdicts(r, [0, 1, 2, 3, 4]) for name, r in runs.items()}
    found = across.premise_across(key, runs, verdicts)
    assert found['contradict'] == ['b']
    assert across.premise_sentence(found, dict(a='A', b='B')) == ('No: the reading predicts the wrong verdict on B '
                                                                  '(and the right one on A).')
    # a tied claim predicts nothing: the noise leaves it open, so it neither bears the reading out nor contradicts it
    verdicts['b'] = [dict(v, verdict=claims.TIED) if v['key'] == key else v for v in verdicts['b']]
    found = across.premise_across(key, runs, verdicts)
    assert found['cells']['b']['claim'] == claims.TIED and found['contradict'] == [] and found['agree'] == ['a']


def test_only_the_estimator_reading_rests_on_the_losss_mathematics_rather_than_the_substrate():
    assert [key for key, e in explanations.EXPLANATIONS.items() if not e.about_substrate] == ['estimators-agree']


# ----------------------------------------------------------------------------------------- the runs of a seed
def test_the_claim_runs_of_a_seed_are_those_every_claim_needs_and_the_sweep_names_them_per_seed():
    specs = across.claim_specs(3)
    needed = {name for claim in claims.CLAIMS for name in claim.needs}
    assert set(specs) == needed
    assert all(spec.seed == 3 for name, spec in specs.items() if name not in claims.RESET_RUNS)
    reset = [specs[name] for name in claims.RESET_RUNS]
    assert [(s.reference, s.steps, s.seed, s.init) for s in reset] == [('rl_base', 20, 4, specs['KL k3+ 0.3']),
                                                                     ('start', 20, 4, specs['KL k3+ 0.3'])]
    named = across.seed_specs([0, 3])
    assert len(named) == 2 * len(specs) and len({s.name for s in named}) == len(named)
    picked = across.runs_of_seed({s.name: s for s in named}, 3)
    assert {name: spec.describe() for name, spec in picked.items()} == {n: s.describe() for n, s in specs.items()}


def test_a_run_summary_keeps_what_the_claims_read_and_they_read_the_same_from_it():
    run = _run([1.0] * 5 + [0.3] * 35)
    run['history'][0]['loss'] = 1.5  # not read by any check: dropped
    run['state_dict'] = {'w': 0}
    summary = across.run_summary(run)
    assert 'state_dict' not in summary and 'loss' not in summary['history'][0]
    assert claims.by_key('collapse').evaluate({'none': summary}) == claims.by_key('collapse').evaluate({'none': run})


# ------------------------------------------------------------------------------------------------- the sources
def test_each_substrate_comes_from_its_studys_committed_record():
    config, trial = substrates.substrate_config('t45')
    assert (config, trial) == (DEFAULT, 45)
    export = json.loads((REPO / 'calibration' / 'trials.json').read_text())
    for name, number in [('t74', 74), ('t70', 70), ('t26', 26), ('t66', 66)]:
        config, trial = substrates.substrate_config(name)
        record = next(r for r in export['trials'] if r['number'] == number)
        assert trial == number and config.describe() == record['config'] and config.grammar == 'short'
        assert record['confirmation'] is not None  # the fallback measured them on the confirmation seeds
    with pytest.raises(ValueError, match="unknown substrate 't99'"):
        substrates.substrate_config('t99')


def test_the_long_substrate_is_there_only_once_its_study_has_frozen_a_trial():
    decision, _ = decision_from_export(
        json.loads((REPO / 'calibration' / 'long-grammar' / 'trials.json').read_text()))
    found = substrates.available()
    if decision.action == 'freeze':
        assert found['long'][0].grammar == 'long' and found['long'][1] == decision.frozen
    else:
        assert 'has frozen no trial yet' in found['long']


# ------------------------------------------------------------------------------------------- a small sweep
PLUMBING = dataclasses.replace(MAIN, sft=PLUMBING_SFT)
SMALL = dict(tasks_per_step=2, eval_every=0)


def _small_specs(seeds):
    return [experiments.arm(f'none | seed {s}', SMALL, steps=3, seed=s) for s in seeds]


def _small_claim_specs(seed):
    return {'none': experiments.arm('none', SMALL, steps=3, seed=seed)}


def _repo_with(tmp_path, configs):
    """A repository whose first study's record holds these configurations as complete trials 45 (frozen) and 74."""
    trials = [dict(number=n, state='COMPLETE', rows_held=20, band_distance=0.1, config=c.describe(), params={})
              for n, c in zip((45, 74), configs)]
    attrs = dict(budget=dict(trials=1, seconds=1.0), search_seconds=2.0)
    trials[0]['confirmation'] = dict(rows_held=20, band_distance=0.1)
    trials[1]['confirmation'] = dict(rows_held=19, band_distance=0.1)
    attrs.update({f'confirmation:{n}': trials[i]['confirmation'] for i, n in enumerate((45, 74))})
    (tmp_path / 'calibration').mkdir()
    (tmp_path / 'calibration' / 'trials.json').write_text(json.dumps(dict(attrs=attrs, trials=trials)))
    return tmp_path


def test_a_small_sweep_is_recorded_per_substrate_merged_and_checked_against_the_run_cache(tmp_path, monkeypatch):
    monkeypatch.setenv('AGENTRL_CACHE_DIR', str(tmp_path / 'cache'))
    other = dataclasses.replace(PLUMBING, logit_scale=0.5)
    repo = _repo_with(tmp_path, [PLUMBING, other])
    path = tmp_path / 'sweep.json'
    record = substrate_sweep.run_sweep(['t45'], [0, 1], path=path, repo=repo, workers=0, say=lambda line: None,
                                       specs_of=_small_specs)
    entry = record['substrates']['t45']
    assert entry['trial'] == 45 and SubstrateConfig.from_description(entry['config']) == PLUMBING
    assert sorted(entry['runs']) == ['0', '1'] and list(entry['runs']['0']) == ['none']
    assert len(entry['runs']['0']['none']['history']) == 3
    assert json.loads(path.read_text()) == record
    again = substrate_sweep.run_sweep(['t74'], [0], path=path, repo=repo, workers=0, say=lambda line: None,
                                      specs_of=_small_specs)
    assert sorted(again['substrates']) == ['t45', 't74'] and again['substrates']['t45'] == entry  # kept, not rerun
    assert [s['substrates'] for s in again['sessions']] == [['t45'], ['t74']]
    assert substrate_sweep.check_record(again, _small_claim_specs) == []
    changed = json.loads(json.dumps(again))
    changed['substrates']['t74']['runs']['0']['none']['history'][1]['entropy'] += 1e-9
    assert substrate_sweep.check_record(changed, _small_claim_specs) == [
        ('t74', 0, 'none', 'the saved run differs from the record')]


def test_a_substrate_the_record_does_not_name_is_refused_before_anything_runs(tmp_path):
    with pytest.raises(ValueError, match="unknown substrate 'x'"):
        substrate_sweep.run_sweep(['t45', 'x'], [0], path=tmp_path / 'sweep.json', workers=0)
    assert not (tmp_path / 'sweep.json').exists()


@pytest.mark.slow
def test_the_sweep_on_a_local_dask_cluster_records_what_it_records_in_process(tmp_path, monkeypatch):
    monkeypatch.setenv('AGENTRL_CACHE_DIR', str(tmp_path / 'cache'))
    repo = _repo_with(tmp_path, [PLUMBING, dataclasses.replace(PLUMBING, logit_scale=0.5)])
    here = substrate_sweep.run_sweep(['t45', 't74'], [0, 1], path=tmp_path / 'here.json', repo=repo, workers=0,
                                     say=lambda line: None, specs_of=_small_specs)
    monkeypatch.setenv('AGENTRL_CACHE_DIR', str(tmp_path / 'cold'))  # nothing cached: the cluster trains everything
    there = substrate_sweep.run_sweep(['t45', 't74'], [0, 1], path=tmp_path / 'there.json', repo=repo, workers=2,
                                      say=lambda line: None, specs_of=_small_specs)
    assert there['sessions'][0]['scheduler'] == 'LocalCluster on this machine'
    # the two substrates train differently, so a worker that built the wrong one would be seen
    assert here['substrates']['t45']['runs'] != here['substrates']['t74']['runs']
    for name in ('t45', 't74'):
        assert there['substrates'][name]['runs'] == here['substrates'][name]['runs'], name
