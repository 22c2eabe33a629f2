"""Notebook 10's tables and sentences: each says what the numbers it is given say, ties by the tie rule."""
import pytest

from agentrl.ch10 import exercise_text as et
from agentrl.ch10 import ties

ERRORS = {'k1 corrected': 8e-16, 'k2 corrected': 0.196, 'k3 corrected': 3.5e-16, 'k3+': 3.4e-16,
          'k3 (uncorrected)': 0.499}
VARIANCES = {'k1 corrected': 1.175, 'k2 corrected': 0.5215, 'k3 corrected': 0.5577, 'k3+': 0.5577,
             'k3 (uncorrected)': 1.9936}
POINTS = [(0.001, 0.011, 0.0116), (0.0343, 0.084, 0.102), (0.3247, 0.414, 0.678), (1.0841, 1.041, 2.430)]
ERRORS4 = {'k2 loss': [0.254, 0.186, 0.0], 'k2 loss + future-KL REINFORCE': [0.0, 0.0, 0.0],
           'KL in the reward': [0.0, 0.0, 0.0]}
EXACT4 = {'k2 loss': [3], 'k2 loss + future-KL REINFORCE': [1, 2, 3], 'KL in the reward': [1, 2, 3]}


def test_signed_never_prints_minus_zero():
    assert et.signed(-0.00001) == '0.0000'
    assert et.signed(0.0999) == '+0.0999'
    assert et.signed(-0.06, 2) == '-0.06'


def test_exercise_1_table_and_answer():
    lines = et.estimator_lines(ERRORS, VARIANCES, True)
    assert lines[0] == 'k1 corrected      | error of E[grad] vs reverse-KL grad 8.00e-16 | per-sample gradient variance 1.1750'
    assert lines[-1] == 'corrected k3 equals k3+ sample by sample: True'
    text = et.answer_1(ERRORS, VARIANCES, True)
    assert text.startswith('Repaired this way, $k_1$ and $k_3$ match the reverse-KL gradient')
    assert 'the repaired $k_2$ misses it by 20%' in text and 'plain $k_3$ loss by 50%' in text
    assert 'equals `k3+` sample by sample' in text
    assert text.endswith('1.175 against 0.558 for `k3+`, which is why `k3+` is the one to use.')
    quiet = et.answer_1(ERRORS, {**VARIANCES, 'k1 corrected': 0.5}, False)
    assert 'does not equal `k3+`' in quiet and quiet.endswith('so on this distribution it is no noisier.')
    only_k3 = et.answer_1({**ERRORS, 'k1 corrected': 0.3}, VARIANCES, True)
    assert only_k3.startswith('Repaired this way, $k_3$ matches the reverse-KL gradient')


def test_exercise_2_table_and_answer():
    failure = (0.007, 0.031, 0.034)
    lines = et.bias_lines(POINTS, failure)
    assert lines[0] == 'KL 0.0010 | k2 bias exact  0.011 | third-order prediction  0.012 | relative error   5.5%'
    assert lines[-1] == ('the prediction is within 10% of the exact bias up to KL 0.007 (there: exact 0.031, '
                         'predicted 0.034)')
    assert et.bias_lines(POINTS, None)[-1] == 'the prediction is within 10% of the exact bias up to KL the end of the sweep '
    text = et.answer_2(POINTS, failure)
    assert 'first passes 10% at a KL of about 0.007' in text and 'overshoots by 133%' in text
    assert 'undershoots' in et.answer_2(POINTS[:-1] + [(1.0, 1.0, 0.5)], failure)
    assert et.answer_2(POINTS, None).endswith('The prediction stays within 10% along the whole sweep.')


def test_exercise_4_table_and_answer():
    lines = et.placement_lines(ERRORS4)
    assert lines[0] == 'k2 loss                        | error on token 1 logits 0.254 | token 2 0.186 | token 3 0.000'
    text = et.answer_4(ERRORS4, EXACT4)
    assert text.startswith('The per-token $k_2$ loss is exact on token 3 only (token 1: error 0.254,')
    assert text.endswith('makes every token exact, as the reward placement is.')
    broken = et.answer_4(ERRORS4, {**EXACT4, 'k2 loss + future-KL REINFORCE': [3]})
    assert broken.endswith('the added term does not make every token exact here.')
    assert 'exact on tokens 2, 3 (' in et.answer_4(ERRORS4, {**EXACT4, 'k2 loss': [2, 3]})


def pass8(none, kl):
    return {'none': dict(enumerate(none)), 'KL k3+ 0.05': dict(enumerate(kl))}


def test_exercise_3_comparison_follows_the_tie_rule():
    none, kl = [0.796, 0.995, 0.982], [0.800, 0.900, 0.892]
    lines, verdict = et.compare_pass8('at the 0.08 crossing', pass8(none, kl))
    tol = ties.tolerance({'none': none, 'KL k3+ 0.05': kl}, n_each=3)
    assert verdict['tolerance'] == tol and verdict['comparison'] == ties.TIED
    assert verdict['seeds'] == [0, 1, 2] and verdict['regularised_higher'] is False
    assert lines[1] == ('  pass@8 (KL k3+ 0.05) - pass@8 (none) on seeds 0, 1, 2: +0.0040, -0.0950, -0.0900; '
                        'mean -0.0603')
    assert lines[-1] == f'  tie tolerance for means of 3 seeds {tol:.4f}: the regularised mean is tied'
    _, clear = et.compare_pass8('after 80 steps', pass8([0.50, 0.52, 0.51], [0.90, 0.91, 0.92]))
    assert clear['comparison'] == ties.HIGHER and clear['regularised_higher'] is True
    _, lower = et.compare_pass8('after 80 steps', pass8([0.90, 0.91, 0.92], [0.50, 0.52, 0.51]))
    assert lower['comparison'] == ties.LOWER
    nothing, none_found = et.compare_pass8('at the 0.08 crossing', pass8([None, None, None], [None, None, None]))
    assert none_found is None and nothing == ['at the 0.08 crossing: no seed reached the threshold']
    one_lines, one = et.compare_pass8('at the 0.08 crossing', pass8([0.8, None, None], [0.9, None, None]))
    assert one['tolerance'] is None and len(one_lines) == 4


def test_exercise_3_answer_says_yes_only_when_every_comparison_is_higher():
    rows = [dict(run='none seed 0', seed=0, crossing=72, entropy_79=0.076, pass1_80=0.5, pass8_80=0.8,
                 pass8_crossing=0.796),
            dict(run='KL k3+ 0.05 seed 0', seed=0, crossing=72, entropy_79=0.085, pass1_80=0.6, pass8_80=0.9,
                 pass8_crossing=0.8)]
    table = et.crossing_lines(rows)
    assert table[2] == ('none seed 0          |       72 |        0.796 |              0.076 |        0.500 |'
                        '        0.800')
    _, tied = et.compare_pass8('after 80 steps', pass8([0.796, 0.995, 0.982], [0.800, 0.900, 0.892]))
    _, higher = et.compare_pass8('after 80 steps', pass8([0.50, 0.52, 0.51], [0.90, 0.91, 0.92]))
    crossing = {0: 72, 1: None}
    text = et.answer_3(crossing, rows, {'after 80 steps': tied}, 0.939, 0.8)
    assert 'first reaches 0.08 at step 72 on seed 0; on seed 1 it never does in 80 steps.' in text
    assert 'the regularised mean pass@8 is tied with the unregularised one (mean difference' in text
    assert '**Our answer on this gym: no.**' in text and text.endswith('which leaves less room for a difference to show.')
    yes = et.answer_3(crossing, rows, {'after 80 steps': higher}, 1.0, 0.8)
    assert '**Our answer on this gym: yes.**' in yes and 'higher than the unregularised one' in yes
    assert 'our runs saturate pass@8' in yes
    mixed = et.answer_3(crossing, rows, {'at the 0.08 crossing': tied, 'after 80 steps': higher}, 0.939, 0.8)
    assert '**Our answer on this gym: no.**' in mixed
    assert et.answer_3({0: None}, rows, {}, 0.7, 0.8).startswith('The unregularised run never gets down to 0.08')


def test_what_we_found_has_a_bullet_per_exercise_and_calls_ties_ties():
    rows = [dict(run='none seed 0', seed=0, crossing=72, entropy_79=0.076, pass1_80=0.5, pass8_80=0.8,
                 pass8_crossing=0.796)]
    _, tied = et.compare_pass8('after 80 steps', pass8([0.796, 0.995, 0.982], [0.800, 0.900, 0.892]))
    text = et.found_markdown(0, (ERRORS, VARIANCES, True), (POINTS, (0.007, 0.031, 0.034)), (ERRORS4, EXACT4),
                             ({0: 72, 1: 60, 2: None}, rows, {'after 80 steps': tied}))
    bullets = text.split('\n')
    assert len(bullets) == 4 and all(b.startswith('- **Exercise') for b in bullets)
    assert 'makes $k_1$ and $k_3$ unbiased' in bullets[0] and '2.1 times the per-sample gradient variance' in bullets[0]
    assert 'its error passes 10% from KL 0.007 on and reaches 133% at KL 1.08' in bullets[1]
    assert 'exact on 1 of 3 tokens (token 3)' in bullets[2]
    assert 'reaches 0.08 on 2 of 3 seeds' in bullets[3] and 'does not keep more coverage' in bullets[3]
    assert "tied with none's after 80 steps" in bullets[3] and 'Our reading' in bullets[3]
    _, higher = et.compare_pass8('after 80 steps', pass8([0.50, 0.52, 0.51], [0.90, 0.91, 0.92]))
    kept = et.found_3({0: 72}, rows, {'after 80 steps': higher})
    assert 'keeps more coverage' in kept and "higher than none's after 80 steps" in kept and 'Our reading' not in kept


@pytest.mark.parametrize('failure', [None])
def test_what_we_found_without_a_failure_says_the_prediction_holds(failure):
    assert et.found_2(0, POINTS, failure).endswith(', and stays within 10% along the whole sweep.')


def test_each_exercise_leaves_an_empty_cell_then_a_collapsed_worked_answer():
    import nbformat

    from agentrl.paths import NOTEBOOKS
    cells = nbformat.read(NOTEBOOKS / '10_exercises.ipynb', as_version=4).cells
    starts = [i for i, c in enumerate(cells) if c.cell_type == 'markdown' and c.source.startswith('## Exercise')]
    assert len(starts) == 4
    for start in starts:
        question, attempt, worked = cells[start:start + 3]
        assert '**The question.**' in question.source
        assert attempt.cell_type == 'code' and attempt.source == '' and not attempt.outputs
        assert worked.cell_type == 'markdown' and worked.source == '### Worked answer'
        assert worked.metadata.get('jp-MarkdownHeadingCollapsed') is True
        end = next((i for i in range(start + 3, len(cells)) if cells[i].cell_type == 'markdown'
                    and cells[i].source.startswith(('# ', '## ', '### '))), len(cells))
        hidden = cells[start + 3:end]  # what JupyterLab collapses: every cell up to the next heading of level <= 3
        assert any(c.cell_type == 'code' and c.outputs for c in hidden), 'the worked answer computes something'
    found = next(i for i, c in enumerate(cells) if c.source.startswith('## What we found'))
    assert found < starts[0] and cells[found + 1].outputs, 'the findings open the notebook, filled in by the last cell'
    assert cells[found + 1].outputs[0]['data']['text/markdown'] != et.PENDING
