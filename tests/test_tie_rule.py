"""One tie rule wherever a verdict is written: a draw whose gap is inside its one-draw tolerance is *tied*, and no
writer of a verdict (the claims, the 10.7 readings, the seed-0 sentences, the README's table, 10.8's verdict table,
10.6's batch claim) calls it a finding either way.

The runs are built by hand: on every seed the entropy bonus ends a hair above the unregularised run, far less than
the seeds' spread, so 'the bonus ends with higher entropy' is true by its bare check and tied by the rule.
"""
import pytest

from agentrl import chapter
from agentrl.ch10 import claims, clip_higher, collapse_text, comparison, design_text, findings, glance, stability

SEEDS = (0, 1, 2, 3, 4)
NOISE = (-0.02, -0.01, 0.0, 0.01, 0.02)  # each seed's offset: a one-draw tolerance of about 0.045
HAIR = 0.01  # the bonus's lead over none, on every seed: inside that tolerance


def run(end, start=0.6, kl_ref=0.1, **metrics):
    """A 40-step history whose entropy falls linearly from start to end, and held-out metrics."""
    history = [dict(entropy=start + (end - start) * i / 39, reads=0.5, kl_ref=kl_ref, reward=0.5) for i in range(40)]
    found = dict(pass1=0.5, pass8=0.8, distinct=8.0, invalid=0.1, kl_start=0.3)
    return dict(history=history, metrics={**found, **metrics}, vocab_size=260)


def seed_runs(offset):
    """One seed's runs: every chapter setting and both reset continuations, the bonus a hair above none."""
    runs = {name: run(0.2 + offset, kl_start=0.3 + offset, pass1=0.5 + offset, pass8=0.8 + offset,
                      invalid=0.1 + offset) for name in claims.CHAPTER_ARMS}
    runs['entropy 0.03'] = run(0.2 + offset + HAIR, kl_start=0.3 + offset, pass1=0.5 + offset, pass8=0.8 + offset,
                               invalid=0.1 + offset)
    keep, reset = claims.RESET_RUNS
    runs[keep] = run(0.3 + offset, kl_ref=0.2 + offset)
    runs[reset] = run(0.3 + offset - HAIR, kl_ref=0.2 + offset - HAIR)  # lower, by a hair: tied too
    return runs


@pytest.fixture(scope='module')
def by_seed():
    return [seed_runs(offset) for offset in NOISE]


def test_the_tie_is_a_tie_and_its_bare_check_would_have_called_it_a_finding(by_seed):
    claim = claims.by_key('bonus-slows-collapse')
    outcome, held, evidence = claim.judge(by_seed[0], by_seed)
    assert held, 'the bare check sees 0.21 > 0.20'
    assert outcome == claims.TIED
    assert 'inside the tie tolerance' in evidence
    wider = dict(by_seed[0], **{'entropy 0.03': run(0.2 + 0.2)})  # the same claim, far outside the noise
    assert claim.judge(wider, by_seed)[0] == claims.HOLDS
    wrong = dict(by_seed[0], **{'entropy 0.03': run(0.2 - 0.2)})
    assert claim.judge(wrong, by_seed)[0] == claims.DOES_NOT_HOLD


def test_seed_0_verdicts_record_the_tie_and_print_it(by_seed):
    found = {v['key']: v for v in claims.verdicts(by_seed[0], replicates=by_seed)}
    for key in ('bonus-slows-collapse', 'reset-lowers-entropy', 'reset-lowers-kl'):
        assert found[key]['outcome'] == claims.TIED and found[key]['tied'], key
        assert claims.verdict_line(found[key]).startswith('[    tied]'), key
    with pytest.raises(ValueError, match='replicates'):
        claims.verdicts(by_seed[0])  # a comparison without the seeds' spread cannot be judged


def test_five_tied_seeds_make_a_tied_claim_counted_apart(by_seed):
    summary = claims.seed_verdict(claims.by_key('bonus-slows-collapse'), by_seed, SEEDS)
    assert summary['held'] == [True] * 5  # every bare check says yes
    assert summary['outcomes'] == [claims.TIED] * 5
    assert (summary['held_on'], summary['tied_on'], summary['verdict']) == (0, 5, claims.TIED)
    assert '5 tied' in claims.seed_verdict_line(summary)
    assert claims.outcome_rule([claims.HOLDS] * 3 + [claims.TIED] * 2) == claims.HOLDS
    assert claims.outcome_rule([claims.HOLDS] * 2 + [claims.TIED] + [claims.DOES_NOT_HOLD] * 2) == claims.TIED
    assert claims.outcome_rule([claims.DOES_NOT_HOLD] * 3 + [claims.TIED] * 2) == claims.DOES_NOT_HOLD
    assert claims.outcome_rule([claims.HOLDS, claims.DOES_NOT_HOLD]) == claims.SEED_DEPENDENT
    with pytest.raises(ValueError, match='outcomes'):
        claims.outcome_rule(['maybe'])


def test_the_10_7_readings_do_not_call_a_tie_agreement(by_seed):
    verdicts = claims.verdicts(by_seed[0], replicates=by_seed)
    outcomes = {v['key']: claims.outcome_of(v) for v in verdicts}
    reader = comparison._Reader({}, [], outcomes, {})
    said = reader.finding('bonus-slows-collapse', 'the small bonus slows the collapse')
    assert 'agrees' not in said and 'does not reproduce' not in said and 'tied' in said
    sentence = comparison.agreement_sentence(verdicts, 0)
    observations = [v for v in verdicts if v['kind'] == claims.OBSERVATION]
    holding = sum(claims.outcome_of(v) == claims.HOLDS for v in observations)
    tied = sum(claims.outcome_of(v) == claims.TIED for v in observations)
    assert f'{holding} of the {len(observations)} softer' in sentence and f'{tied} more tied' in sentence


def test_the_seed_0_sentence_sets_ties_apart_from_agreement(by_seed):
    verdicts = claims.verdicts(by_seed[0], replicates=by_seed)
    summaries = [claims.seed_verdict(c, by_seed, SEEDS) for c in claims.CLAIMS]
    summaries = [s for s in summaries if s is not None]
    found = findings.Evidence(SEEDS, by_seed, summaries, stability.stability(summaries, []), [])
    sentence = findings.single_draw_sentence(verdicts, found, 0)
    assert 'tied' in sentence and '*entropy bonus 0.03 ends with higher entropy than no regularisation*' in sentence
    bullets = findings.comparison_bullets(found, verdicts, 0)
    not_reproduced = bullets.split('**Not reproduced here')[1].split('\n- ')[0] if 'Not reproduced' in bullets else ''
    assert 'entropy bonus 0.03 ends with higher entropy' not in not_reproduced
    assert '**Tied' in bullets


def test_the_front_door_table_writes_tied_in_both_columns(by_seed):
    verdicts = claims.verdicts(by_seed[0], replicates=by_seed)
    summaries = [s for s in (claims.seed_verdict(c, by_seed, SEEDS) for c in claims.CLAIMS) if s is not None]
    records = {'07_tinyagent_comparison': {chapter.VERDICTS_KEY: verdicts},
               chapter.SEED_NOTEBOOK: {chapter.SEED_VERDICTS_KEY: summaries}}
    rows = {r['key']: r for r in glance.glance_rows(records)}
    row = rows['bonus-slows-collapse']
    assert row['seed0'] == claims.TIED and row['seeds']['word'] == claims.TIED
    assert '5 tied' in row['seeds_text']
    assert glance.counts(list(rows.values()))[claims.TIED] >= 1
    assert '**tied**' in glance.legend(list(rows.values()))


def test_the_reset_table_says_tied_not_yes(by_seed):
    keys = ('reset-lowers-kl', 'reset-lowers-entropy')
    verdicts = [v for v in claims.verdicts(by_seed[0], replicates=by_seed) if v['key'] in keys]
    five = [claims.seed_verdict(claims.by_key(k), by_seed, SEEDS) for k in keys]
    table = design_text.verdict_table(verdicts, five)
    rows = table.splitlines()[2:]
    assert len(rows) == 2 and all('| tied' in r and '| yes |' not in r for r in rows)


def test_the_10_6_batch_claim_ties_a_clip_within_the_tolerance():
    assert clip_higher.tightest_outcome({0.2: 0.392, 0.28: 0.390, 100.0: 0.376}, 0.212) == claims.TIED
    assert clip_higher.tightest_outcome({0.2: 0.392, 0.28: 0.090, 100.0: 0.076}, 0.212) == claims.HOLDS
    assert clip_higher.tightest_outcome({0.2: 0.092, 0.28: 0.390, 100.0: 0.076}, 0.212) == claims.DOES_NOT_HOLD
    recorded = dict(seeds=[0, 1, 2], held=[True, True, False], tolerance_one=0.2,
                    outcomes=[claims.TIED, claims.HOLDS, claims.DOES_NOT_HOLD])
    said = collapse_text.batch_counts(recorded)
    assert said.startswith('held on 1 of 3 batch seeds (1)') and 'tied on 1 (0)' in said


def test_an_identity_is_a_sanity_check_never_a_claim(by_seed):
    assert 'pass8-ge-pass1' not in {c.key for c in claims.CLAIMS}
    assert {c.kind for c in claims.SANITY_CHECKS} == {claims.SANITY}
    assert set(claims.CANNOT_FAIL) >= {c.key for c in claims.SANITY_CHECKS}
    said = claims.sanity_sentence(by_seed, SEEDS)
    assert 'passed on 5 of 5 seeds' in said and 'cannot fail' in said and 'not counted' in said


def test_every_claim_gap_describes_its_check(by_seed):
    """A claim whose gaps all go its way beyond the noise must pass its own check: the gaps are what it tests."""
    for claim in claims.CLAIMS:
        if not claim.gaps:
            continue
        for runs in by_seed:
            try:
                claim.judge(runs, by_seed)
            except AssertionError as error:  # pragma: no cover - the message names the claim
                pytest.fail(str(error))


@pytest.mark.parametrize('step, said', [(0.02, 'so on this draw the order is tied'),
                                        (0.5, 'each step beyond the one-draw tolerance')])
def test_the_figure_reading_of_the_kl_strengths_ties_steps_inside_the_tolerance(step, said):
    flat = lambda entropy, reward: dict(history=[dict(entropy=entropy, reward=reward)] * 40)  # noqa: E731
    runs = {'none': flat(0.2, 0.9), 'x': flat(0.3, 0.5), 'KL k3 0.3': flat(0.3, 0.5)}
    for i, name in enumerate(comparison.KL_ARMS):  # entropy rising and reward falling with strength, by `step`
        runs[name] = flat(0.3 + step * i, 0.8 - step * i)
    text = comparison.curve_readings(runs, dict(late_reward=0.1, entropy_end=0.1), [('left', ['x']), ('right', ['x', 'KL k3 0.3'])])
    assert said in text
    if step < 0.1:
        assert 'As in the book, the stronger the penalty' not in text and '4 of its 4 steps' in text
