"""The per-turn-cost ablation: its runs differ from the default ones by turn_cost alone, and its rule reads them."""
import pytest

from agentrl.ch10 import across, claims, turn_cost


def test_the_ablation_changes_turn_cost_and_nothing_else():
    specs = turn_cost.ablation_specs(['collapse-misses-tasks', 'estimators-agree'], [0, 3])
    default = {spec.name: spec for spec in across.seed_specs([0, 3])}
    assert sorted(spec.name for spec in specs) == sorted(
        f'{name} | seed {s}{turn_cost.SUFFIX}' for s in (0, 3) for name in ('none', 'KL k3 0.3', 'KL k3+ 0.3'))
    for spec in specs:
        twin = default[spec.name[:-len(turn_cost.SUFFIX)]]
        assert dict(spec.fields) == {**dict(twin.fields), 'turn_cost': 0.0}
        assert spec.config().turn_cost == 0.0 and twin.config().turn_cost > 0
        assert (spec.seed, spec.steps, spec.entropy_coef, spec.kl_in_reward) == (
            twin.seed, twin.steps, twin.entropy_coef, twin.kl_in_reward)


def test_a_continuation_starts_from_a_run_without_the_cost_too():
    spec, = [s for s in turn_cost.ablation_specs(['reset-lowers-kl'], [0]) if s.name.startswith(claims.RESET_RUNS[0])]
    assert spec.init is not None and dict(spec.init.fields)['turn_cost'] == 0.0


def _runs(pass8):
    return {f'none | seed {s}{turn_cost.SUFFIX}': {'metrics': {'pass8': p}} for s, p in enumerate(pass8)}


LOW, HIGH = [0.50, 0.52, 0.50, 0.51, 0.50], [1.00, 0.99, 1.00, 0.98, 1.00]  # each far from 0.9 against its spread


@pytest.mark.parametrize('before, pass8_after, letter', [
    (claims.DOES_NOT_HOLD, LOW, 'a'),  # at most 0.9 on every seed, beyond the noise: holds without the cost
    (claims.DOES_NOT_HOLD, HIGH, 'b'),
    (claims.HOLDS, HIGH, 'c'),
    (claims.HOLDS, LOW, 'd'),
    (claims.HOLDS, [0.8, 0.85, 0.9, 1.0, 1.0], '?'),  # seeds on both sides, each inside the noise of 0.9: tied
])
def test_each_outcome_is_read_by_the_committed_rule(before, pass8_after, letter):
    seeds = [0, 1, 2, 3, 4]
    default = dict(key='collapse-misses-tasks', verdict=before, held_on=3 if before == claims.HOLDS else 1)
    row, = turn_cost.judge([default], turn_cost.runs_by_seed(_runs(pass8_after), seeds), seeds)
    assert row['outcome'] == letter
    if letter == '?':
        assert row['without_cost'] == claims.TIED and row['meaning'] == 'undecided: a tie'
    else:
        assert row['meaning'] == turn_cost.OUTCOMES[(before, row['without_cost'])][1]
        assert row['held_on_without'] == sum(p <= 0.9 for p in pass8_after)


def test_the_judged_claims_are_the_failing_and_the_fragile_ones():
    verdicts = [dict(key='a', verdict=claims.HOLDS), dict(key='b', verdict=claims.DOES_NOT_HOLD),
                dict(key='c', verdict=claims.HOLDS)]
    assert [v['key'] for v in turn_cost.judged_claims(verdicts, ['c'])] == ['b', 'c']


def test_an_unknown_claim_is_refused_with_the_known_ones():
    with pytest.raises(ValueError, match="not claims: \\['nope'\\]; allowed: \\['collapse'"):
        turn_cost.ablation_specs(['nope'], [0])


def test_each_reading_of_a_failing_claim_is_set_against_the_ablation():
    from agentrl.ch10 import explanations

    found = [dict(key='estimators-agree', text='claim text', held_on=0, seeds=[0, 1], verdict=claims.DOES_NOT_HOLD,
                  premise=None, evidence=['a', 'b'])]
    row = dict(key='estimators-agree', held_on_with=0, with_cost=claims.DOES_NOT_HOLD, held_on_without=2, n=2,
               without_cost=claims.HOLDS, meaning='the cost decides')
    text = '\n'.join(explanations.explanation_lines(found, [row]))
    assert 'On 2 seeds it is true on 0 with the per-turn cost (does not hold) and on 2 without it (holds): the cost decides.' in text
    assert 'Without the per-turn cost' not in '\n'.join(explanations.explanation_lines(found))


def test_the_ablation_table_has_a_row_per_claim():
    rows = [dict(text='t', held_on_with=1, n=5, with_cost=claims.DOES_NOT_HOLD, held_on_without=3,
                 without_cost=claims.HOLDS, outcome='a', meaning='m')]
    assert turn_cost.ablation_table(rows).splitlines()[2] == '| t | 1/5, does not hold | 3/5, holds | (a) m |'
    assert turn_cost.RULE in turn_cost.rule_markdown()


def test_the_summary_counts_the_claims_a_tie_leaves_open():
    import types

    from agentrl.ch10 import findings
    found = types.SimpleNamespace(ablation=[dict(outcome='b'), dict(outcome='?'), dict(outcome='?')])
    said = findings.ablation_summary(found)
    assert 'of the 3 statements that fail, are tied or are fragile here, 1 fails without it too and 2 are tied or ' \
           'seed-dependent without it.' in said
