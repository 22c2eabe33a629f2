"""Notebook 12's sentences and tables: each says what the numbers it is given say."""
import json
import re

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


# What a formula left as plain text looks like once the map is rendered (its '*', '_' and '<' escaped): a sign of
# multiplication, assignment or order, a power, a function applied, a Greek name, a subscript. Formulas ($...$) and
# code spans are taken out first; a config key such as epsilon_high is a name, not a formula, and is not matched.
PLAIN_MATHS = re.compile('|'.join([
    r'\\\*', r'\\?<-|<=|>=|!=|\|\|', r'\\<|(?<![-\w])>(?![\w>])', r'\^',
    r'\b(?:exp|log|clip|clamp|sg|mean|min|max|KL|agg|Agg|softmax|sigmoid|logsumexp)\(',
    r'\blog\s+(?:pi|r|rho)\b', r'(?<![-\w])grad\s*(?:log\b(?!-)|KL|\()',
    r'(?<![-.\w])(?:pi|beta|tau|rho|eps|epsilon|sigma|lambda|delta|theta|alpha|mu|phi)\b(?!\\_)',
    r'\bpi\\_\w+', r'\bsum\\_', r'\b[A-Za-z]\\_(?:[a-z]|\d|\{)', r'\b\w+\\_t\b',
    r'\[-?\d[\d.]*,\s*-?\d',
]))
SPLIT_GAP = re.compile(r'\s*(?:[-+*=<>|^]|\\[*<_])?\s*|/')  # what joins '$a$ * $b$', one formula cut in two
FORMULA = re.compile(r'(?<![$\\])\$(.+?)(?<![$\\])\$', re.S)  # as nbconvert finds inline maths: '\$' is a dollar sign


def plain_maths(markdown):
    """The stretches of markdown that read as maths but are not set as formulas."""
    spans = [m.span() for m in FORMULA.finditer(markdown)]
    split = [markdown[a:d] for (a, b), (c, d) in zip(spans, spans[1:]) if SPLIT_GAP.fullmatch(markdown[b:c])]
    prose = re.sub(r'<[^>\s][^>]*>', ' ', re.sub(r'`[^`]+`', ' ', FORMULA.sub(' ', markdown)))
    return split + [m.group() for m in PLAIN_MATHS.finditer(prose)]


def rendered_map():
    rows = framework_map.option_rows(framework_map.load_frameworks())
    return '\n\n'.join(ft.map_topic(rows, topic) for topic in framework_map.TOPICS)


def test_the_map_sets_every_formula_and_the_site_can_set_each():
    from machinery.site_tex import typeset
    text = rendered_map()
    assert plain_maths(text) == []
    formulas = FORMULA.findall(text)
    assert len(formulas) > 800
    for formula in formulas:
        typeset(formula)  # raises on TeX the site cannot set


def test_plain_maths_finds_what_the_map_wrote_before_it_was_typeset():
    from agentrl.ch10.framework_map import _prose
    for plain in ('reward_t = score_t - beta * m_t * D_t', 'beta <- beta * (1 + e)', 'log pi_old - log pi_ref',
                  'sum_t D_t', 'clamp(exp(s) - s - 1, -10, 10)', 'agg(w*k)/beta', 'KL(pi || pi_ref)', 'x^2 / 2',
                  'clamped to [-10, 10]', 'the gradient grad log pi'):
        assert plain_maths(_prose(plain)), plain
    assert plain_maths('$a$ $b$') and plain_maths('$a$ - $b$') and plain_maths('$a$/$b$')
    for prose in ('$\\beta \\cdot k_3$, then `token_*` and epsilon\\_high', 'no-grad log-probs, with grad',
                  'loss\\_agg\\_mode=token-mean (l.1160-1170)', '$\\pi$, $\\pi_{\\text{old}}$ and $\\pi$ / $\\pi_b$'):
        assert plain_maths(prose) == [], prose


def test_the_map_heading_says_which_frameworks_were_never_executed():
    frameworks = framework_map.load_frameworks()
    _, count = ft.map_heading(frameworks, framework_map.option_rows(frameworks))
    unrun = [f['framework']['name'] for f in frameworks if f['framework'].get('not_run')]
    assert unrun and all(f'**{name}.** ' in count for name in unrun)
    assert '**verl.**' not in count  # verl's code runs beside ours
