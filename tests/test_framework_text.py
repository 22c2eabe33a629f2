"""Notebook 12's sentences and tables: each says what the numbers it is given say."""
import json

import pytest

import agentrl as arl
from agentrl.ch10 import claims, framework_claims, framework_map, framework_options as fo, framework_text as ft
from agentrl.paths import REPO


@pytest.fixture(scope='module')
def found():
    return fo.exact_tables(seed=0)


@pytest.fixture(scope='module')
def sweep():
    record = framework_claims.load_record()
    runs_by_seed = [record['runs'][str(s)] for s in record['seeds']]
    return record, runs_by_seed, framework_claims.option_verdicts(runs_by_seed, record['seeds'])


def test_the_tables_are_the_printed_blocks_the_record_holds(found):
    recorded = json.loads((REPO / 'results' / '12_framework_options.json').read_text())
    assert ft.off_policy_kl_lines(found['kl_rows'], arl.KL_WEIGHTINGS) == recorded['off_policy_kl']
    assert ft.ratio_lines(found['ratio_rows'], fo.RATIO_LOSSES) == recorded['ratio_losses']
    assert ft.sampler_lines(found['sampler_rows'], arl.SAMPLER_MODES) == recorded['sampler_correction']


def test_the_aggregation_reading_names_the_pairs_whose_factor_follows_the_length(found):
    example = fo.aggregation_example()
    text = ft.aggregation_reading(example['largest'], example['lengths'], example['pairs'][0][2],
                                  found['scale_rows'], example['horizon'])
    assert 'in 6, every one of them a pair with `seq-mean-token-mean`' in text and 'weighs 18.33' in text
    # as if a pair without the per-sequence mean depended on the length
    broken = [dict(r, constant=False) if (r['term'], r['policy']) == ('token-mean', 'seq-mean-token-sum') else r
              for r in found['scale_rows']]
    broken_text = ft.aggregation_reading(example['largest'], example['lengths'], example['pairs'][0][2], broken,
                                         example['horizon'])
    assert 'not all of them' in broken_text


def test_the_gspo_reading_gives_the_mixed_length_cosine(found):
    text = ft.ratio_reading(found['ratio_rows'], found['mixed'])
    assert f'cosine {found["mixed"]["cosine"]:.3f} with the true one' in text
    assert 'only when every sequence has the same length' in text


def test_the_ratio_weighted_reading_calls_a_gap_below_the_tolerance_a_tie(sweep):
    _, runs_by_seed, _ = sweep
    tie = ft.entropy_tie(runs_by_seed)
    gap = abs(tie['means']['KL k3 0.3, ratio-weighted'] - tie['means']['KL k3+ 0.3'])
    assert (tie['against']['KL k3+ 0.3'] == 'tied') == (gap < tie['tolerance'])
    assert f'is {tie["against"]["KL k3+ 0.3"]} against' in ft.ratio_weighted_reading(runs_by_seed)


def test_findings_are_three_to_six_bullets_that_count_the_verdicts(found, sweep):
    _, runs_by_seed, verdicts = sweep
    rows = framework_map.option_rows(framework_map.load_frameworks())
    text = ft.findings(found, verdicts, runs_by_seed, rows)
    bullets = [line for line in text.splitlines() if line.startswith('- ')]
    assert 3 <= len(bullets) <= 6
    holds = sum(v['verdict'] == claims.HOLDS for v in verdicts)
    assert f'{holds} of {len(verdicts)} claims' in text
    assert f'{len(rows)} options' in text
    summary = ft.summary(found, verdicts, runs_by_seed)
    assert summary.startswith('## Summary') and f'{holds} of {len(verdicts)} claims hold' in summary


def test_the_maps_notation_is_typeset_and_every_formula_parses():
    import re

    from machinery.site_tex import typeset
    assert ft.typeset_notation('l_t = policy_t * entropy_mask_t + beta * k3_t') == \
        '$l_t = \\text{policy}_t \\cdot \\text{entropy mask}_t + \\beta \\cdot k_{3,t}$'
    assert ft.typeset_notation('the ratio pi_ref/pi, then epsilon_high') == \
        'the ratio $\\pi_{\\text{ref}} / \\pi$, then epsilon\\_high'
    rows = framework_map.option_rows(framework_map.load_frameworks())
    for row in rows:
        for field in ('computes', 'ours_note', 'differs'):
            for formula in re.findall(r'\$([^$]+)\$', ft.typeset_notation(row[field])):
                typeset(formula)  # raises on TeX the site cannot set
