"""The framework options' settings and claims: what each setting runs, and each claim's check on hand-made summaries
where the answer is known, both ways."""
import pytest

from agentrl.ch10 import claims, experiments, framework_claims as fc
from substrate_fixtures import on_main  # noqa: F401 (autouse: the substrate the specs are built on)

ENTROPIES = {'none': 0.08, 'KL k3 0.3': 0.30, 'KL k3+ 0.3': 0.25, 'KL k3 0.3, ratio-weighted': 0.31,
             'KL k3+ 0.3, seq-mean-token-mean': 0.26, 'KL k3+ 0.3, seq-mean-token-sum': 0.23,
             'KL k3+ 0.3, seq-mean-token-sum-norm': 0.27, 'entropy target 0.3': 0.29, 'entropy target 0.15': 0.16,
             'top 20% entropy': 0.20, 'GSPO': 0.10, 'CISPO': 0.15, 'sampler T=1.3, uncorrected': 0.20,
             'sampler T=1.3, token_truncate 2': 0.12, 'sampler T=1.3, sequence_mask 2': 0.10}


def fake_run(entropy, pass1=0.5, tokens=10.0, **logged):
    """A run summary whose last five steps log `entropy` and `tokens`, with `logged` on every step."""
    history = [dict(step=s, entropy=entropy, policy_tokens=tokens, **logged) for s in range(40)]
    return dict(history=history, metrics=dict(pass1=pass1, pass8=0.7, distinct=3.0, invalid=0.1, kl_start=0.2),
                vocab_size=100)


def fake_runs(**changes):
    runs = {name: fake_run(value) for name, value in ENTROPIES.items()}
    runs['KL k3+ 0.3, seq-mean-token-mean'] = fake_run(0.26, tokens=12.0)
    runs['GSPO'] = fake_run(0.10, seq_clip_frac=0.02)
    runs['sampler T=1.3, uncorrected'] = fake_run(0.20, sampler_kl=0.05)
    runs.update(changes)
    return runs


def test_every_claim_holds_on_the_hand_made_runs_where_it_should():
    runs = fake_runs()
    outcomes = {claim.key: claim.evaluate(runs) for claim in fc.CLAIMS}
    assert all(outcome is not None and outcome[0] for outcome in outcomes.values()), outcomes


@pytest.mark.parametrize('key,change', [
    ('ratio-kl-small', {'KL k3 0.3, ratio-weighted': fake_run(0.36)}),
    ('aggregation-keeps-balance', {'KL k3+ 0.3, seq-mean-token-sum': fake_run(0.19)}),
    ('per-sequence-mean-lengthens', {'KL k3+ 0.3, seq-mean-token-mean': fake_run(0.26, tokens=10.0)}),
    ('target-0.3-steers', {'entropy target 0.3': fake_run(0.53)}),
    ('target-0.15-steers', {'entropy target 0.15': fake_run(0.0)}),
    ('targets-ordered', {'entropy target 0.15': fake_run(0.3)}),
    ('top-entropy-keeps-entropy', {'top 20% entropy': fake_run(0.08)}),
    ('top-entropy-matches', {'top 20% entropy': fake_run(0.2, pass1=0.49)}),
    ('gspo-clips-sequences', {'GSPO': fake_run(0.1, seq_clip_frac=0.0)}),
    ('gspo-matches', {'GSPO': fake_run(0.1, pass1=0.4, seq_clip_frac=0.1)}),
    ('cispo-keeps-entropy', {'CISPO': fake_run(0.08)}),
    ('sampler-differs', {'sampler T=1.3, uncorrected': fake_run(0.2, sampler_kl=0.005)}),
    ('token_truncate-corrects', {'sampler T=1.3, token_truncate 2': fake_run(0.3)}),
    ('sequence_mask-corrects', {'sampler T=1.3, sequence_mask 2': fake_run(-0.1)}),
])
def test_each_claim_fails_when_its_runs_say_otherwise(key, change):
    claim = next(c for c in fc.CLAIMS if c.key == key)
    held, evidence = claim.evaluate(fake_runs(**change))
    assert not held, evidence
    others = [c.key for c in fc.CLAIMS if c.key != key and not c.evaluate(fake_runs(**change))[0]]
    assert set(others) <= {'targets-ordered', 'target-0.15-steers', 'aggregation-keeps-balance'}, others


def test_the_claims_are_judged_by_the_chapters_rule_on_every_seed():
    good, bad = fake_runs(), fake_runs(**{'CISPO': fake_run(0.01)})
    verdicts = {v['key']: v for v in fc.option_verdicts([good, good, bad, bad, bad], [0, 1, 2, 3, 4])}
    cispo = verdicts['cispo-keeps-entropy']
    assert cispo['held'] == [True, True, False, False, False]  # the bare check, seed by seed
    assert cispo['verdict'] == claims.outcome_rule(cispo['outcomes']) != claims.HOLDS
    # CISPO's entropy jumps between seeds, so its spread is wide and its gaps to none fall inside it
    assert cispo['outcomes'].count(claims.TIED) == cispo['tied_on'] > 0
    clear = {v['key']: v for v in fc.option_verdicts([bad] * 5, [0, 1, 2, 3, 4])}
    assert clear['cispo-keeps-entropy']['verdict'] == claims.DOES_NOT_HOLD
    assert verdicts['gspo-matches']['verdict'] == claims.outcome_rule(verdicts['gspo-matches']['outcomes'])
    with pytest.raises(ValueError, match='entries for'):
        fc.option_verdicts([good], [0, 1])


def test_the_sweep_shares_the_chapters_runs_and_names_every_run_by_seed():
    chapter = {spec.name: spec for spec in experiments.chapter_arms(seed=3)}
    arms = fc.sweep_arms(seed=3)
    for name in fc.BASELINES:  # the same spec, hence the same cached run, as notebook 09's
        assert next(spec for spec in arms if spec.name == name) == chapter[name]
    assert len({spec.name for spec in arms}) == len(arms) == len(fc.BASELINES) + len(fc.option_arms())
    specs = fc.sweep_specs([0, 2])
    assert {spec.name.rsplit(' | seed ', 1)[1] for spec in specs} == {'0', '2'}
    assert all(spec.seed == int(spec.name.rsplit(' | seed ', 1)[1]) for spec in specs)
    needed = {name for claim in fc.CLAIMS for name in claim.needs}
    assert needed <= {spec.name for spec in arms}  # every claim reads runs the sweep trains


def test_the_fixed_horizon_is_the_longest_episode_the_gym_allows():
    spec = next(s for s in fc.option_arms() if s.name.endswith('seq-mean-token-sum-norm'))
    cfg = spec.config()
    assert cfg.loss_agg_horizon == cfg.max_turns * 6  # six calls of at most six words on the short grammar


def test_a_missing_record_says_how_to_make_it(tmp_path):
    with pytest.raises(FileNotFoundError, match='make framework-sweep'):
        fc.load_record(tmp_path / 'framework_sweep.json')


def test_a_small_sweep_is_recorded_and_checked_against_the_run_cache(tmp_path, monkeypatch):
    import dataclasses
    import json

    from agentrl.substrate.config import use
    from machinery import framework_sweep
    from substrate_fixtures import MAIN, PLUMBING_SFT

    monkeypatch.setenv('AGENTRL_CACHE_DIR', str(tmp_path / 'cache'))
    small = dict(tasks_per_step=2, eval_every=0)

    def arms_of(seed, steps):
        return [experiments.arm('none', small, steps=steps, seed=seed),
                experiments.arm('top 20% entropy', small, steps=steps, seed=seed, options=dict(top_entropy=0.2))]

    with use(dataclasses.replace(MAIN, sft=PLUMBING_SFT)):
        record = framework_sweep.sweep([0, 1], None, steps=2, arms_of=arms_of)
        assert sorted(record['runs']) == ['0', '1'] and list(record['runs']['1']) == ['none', 'top 20% entropy']
        assert len(record['runs']['0']['none']['history']) == 2 and record['seeds'] == [0, 1]
        path = tmp_path / 'framework_sweep.json'
        framework_sweep.write_record(record, path)
        assert fc.load_record(path) == json.loads(json.dumps(record))
        assert framework_sweep.check_record(record, arms_of) == []
        changed = json.loads(json.dumps(record))
        changed['runs']['1']['top 20% entropy']['metrics']['pass1'] += 1e-9
        assert framework_sweep.check_record(changed, arms_of) == [(1, 'top 20% entropy',
                                                                   'the saved run differs from the record')]
        assert framework_sweep.check_record(record, lambda seed, steps: arms_of(seed, steps + 1)) == [
            (seed, name, 'another provenance (code, base or kernels)') for seed in (0, 1)
            for name in ('none', 'top 20% entropy')]


@pytest.mark.parametrize('kl_by_seed, word', [([0.011, 0.009, 0.012, 0.010, 0.013], claims.TIED),
                                              ([0.21, 0.20, 0.22, 0.21, 0.20], claims.HOLDS),
                                              ([0.001, 0.0011, 0.0009, 0.001, 0.0012], claims.DOES_NOT_HOLD)])
def test_a_threshold_claim_about_an_option_is_tied_within_its_noise(kl_by_seed, word):
    claim = next(c for c in fc.CLAIMS if c.key == 'sampler-differs')  # above 0.01 nats per token
    runs_by_seed = [{fc.UNCORRECTED: dict(history=[dict(sampler_kl=kl)] * 4)} for kl in kl_by_seed]
    assert claims.seed_verdict(claim, runs_by_seed, range(5))['verdict'] == word
