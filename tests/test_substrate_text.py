"""Notebook 11's sentences: what the substrates show about each claim and reading, said from the verdicts."""
import pytest

from agentrl import chapter, results
from agentrl.calibration import substrates
from agentrl.ch10 import across, claims, explanations, ties
from agentrl.calibration import substrate_text as st
from agentrl.paths import RESULTS

NAMES = {'a': 'trial 1', 'b': 'trial 2', 'c': 'trial 3'}


def cell(held_on, verdict, seeds=5):
    return dict(held_on=held_on, seeds=seeds, verdict=verdict)


def row(key, label, **cells):
    return dict(key=key, kind='mechanism', text=f'the claim {key}', label=label, cells=cells)


def checked(claims_and_premises, agree, contradict):
    return dict(key='k', premise='p', agree=agree, contradict=contradict,
                cells={n: dict(claim=c, premise=p, premise_held=[True] * held + [False] * (5 - held))
                       for n, (c, p, held) in claims_and_premises.items()})


@pytest.fixture(scope='module')
def sweep():
    return st.judge(substrates.load_record(), results.load(chapter.SEED_NOTEBOOK, RESULTS))


def test_where_verdicts_groups_substrates_by_verdict():
    r = row('x', across.SUBSTRATE_DEPENDENT, a=cell(5, claims.HOLDS), b=cell(1, claims.DOES_NOT_HOLD),
            c=cell(4, claims.HOLDS))
    assert st.where_verdicts(r, NAMES) == 'holds on trial 1 5/5 and trial 3 4/5; fails on trial 2 1/5'
    tie = row('y', across.UNDECIDED, a=cell(2, claims.SEED_DEPENDENT, seeds=4))
    assert st.where_verdicts(tie, NAMES) == 'is seed-dependent on trial 1 2/4'
    tied = row('z', across.UNDECIDED, a=cell(0, claims.TIED), b=cell(4, claims.HOLDS))
    assert st.where_verdicts(tied, NAMES) == 'holds on trial 2 4/5; is tied on trial 1 0/5'


def test_the_claim_table_prints_the_rules_it_applies_with_the_tie():
    text = st.claims_markdown([row('x', across.TIED_EVERYWHERE, a=cell(0, claims.TIED))], dict(a='trial 1'))
    assert claims.seed_rule_text(5) in text and f'**{across.TIED_EVERYWHERE}**, tied on every substrate' in text
    assert 'Of 1 claims on the one substrate swept, 0 are robust' in text and text.endswith('1 tied on every one.')
    assert st.on_substrates(3) == 'these 3 substrates'


def test_what_it_shows_each_outcome():
    robust_fail = row('x', across.ROBUST, a=cell(0, claims.DOES_NOT_HOLD), b=cell(1, claims.DOES_NOT_HOLD),
                      c=cell(0, claims.DOES_NOT_HOLD))
    both = {n: (claims.DOES_NOT_HOLD, claims.HOLDS, 5) for n in NAMES}
    untested = st.what_it_shows(robust_fail, checked(both, list(NAMES), []), NAMES)
    assert untested.startswith('**Consistent, not tested**') and '(all 3 substrates)' in untested
    partly = st.what_it_shows(robust_fail, checked(both, ['a', 'b'], []), NAMES)
    assert '(trial 1 and trial 2)' in partly
    robust_hold = row('y', across.ROBUST, a=cell(5, claims.HOLDS), b=cell(5, claims.HOLDS), c=cell(4, claims.HOLDS))
    absent = {n: (claims.HOLDS, claims.DOES_NOT_HOLD, 1) for n in NAMES}  # the claim holds where the premise fails
    said = st.what_it_shows(robust_hold, checked(absent, list(NAMES), []), NAMES)
    assert said.startswith('**Consistent, not tested**: the claim holds on every substrate') and 'claim fails' not in said
    holds = {n: (claims.HOLDS, claims.HOLDS, 5) for n in NAMES}
    against = st.what_it_shows(robust_fail, checked(holds, ['c'], ['a', 'b']), NAMES)
    assert against.startswith('**Contradicted** on trial 1 and trial 2: the claim holds there although the premise '
                              'holds too')
    assert against.endswith('(it predicts the right verdict on trial 3).')
    fails = {n: (claims.DOES_NOT_HOLD, claims.DOES_NOT_HOLD, 1) for n in NAMES}
    assert 'the claim fails there although the premise fails too' in st.what_it_shows(
        robust_fail, checked(fails, [], ['a']), NAMES)
    flips = row('x', across.SUBSTRATE_DEPENDENT, a=cell(5, claims.HOLDS), b=cell(0, claims.DOES_NOT_HOLD))
    assert st.what_it_shows(flips, checked({}, ['a', 'b'], []), NAMES).startswith('**Borne out**')
    assert st.what_it_shows(flips, checked({}, [], []), NAMES).startswith('The substrates cannot say')


def run(entropy):
    return dict(history=[dict(step=i, entropy=entropy) for i in range(10)])


def test_entropy_gap_calls_a_gap_below_the_tolerance_tied():
    clear = [{'KL k3 0.3': run(0.30 + d), 'KL k3+ 0.3': run(0.20 + d)} for d in (0.0, 0.01, -0.01, 0.02, -0.02)]
    close = [{'KL k3 0.3': run(0.20 + d + e), 'KL k3+ 0.3': run(0.20 + d)}
             for d, e in ((0.0, 0.01), (0.05, -0.01), (-0.05, 0.0), (0.02, 0.0), (-0.02, 0.0))]
    gaps = st.entropy_gap({'a': clear, 'b': close})
    assert gaps['a']['comparison'] == ties.HIGHER and gaps['a']['gap'] == pytest.approx(0.1)
    assert gaps['b']['comparison'] == ties.TIED and gaps['b']['seeds'] == 5
    values = {r: [claims.entropy_end(runs[r]) for runs in close] for r in st.GAP_RUNS}
    assert gaps['b']['tolerance'] == ties.tolerance(values, n_each=5)
    text = st.gap_sentence(gaps, NAMES)
    assert text.startswith('The plain-k3 run ends with more entropy than k3+ on 1 of 2 substrates')
    assert 'trial 1 +0.100 (tolerance' in text


def test_nine_markdown_says_what_moved_and_why():
    theirs = {'x': dict(held=[True] * 5, verdict=claims.HOLDS), 'y': dict(held=[True, True, True, False, False],
                                                                          verdict=claims.HOLDS)}
    same = st.against_nine(theirs, theirs)
    assert st.nine_markdown(same, True) == 'All 2 claims of notebook 09 come out the same on every seed.'
    ours = {'x': dict(held=[True, True, True, True, False], verdict=claims.HOLDS),
            'y': dict(held=[True, True, False, False, False], verdict=claims.DOES_NOT_HOLD)}
    moved = st.against_nine(theirs, ours)
    assert moved['differ'] == ['x', 'y'] and moved['verdict_differ'] == [('y', claims.HOLDS, claims.DOES_NOT_HOLD)]
    text = st.nine_markdown(moved, False)
    assert text.startswith('2 of 2 claims differ from notebook 09 on some seed: x, y. 1 of them change')
    assert 'y (holds in notebook 09, does not hold here)' in text and 'another training-code fingerprint' in text
    assert 'should agree' in st.nine_markdown(moved, True)
    assert st.nine_markdown(None, True) == 'Trial 45 is not in the sweep record yet.'
    assert st.nine_bullet(moved, False).startswith('**Trial 45 here against notebook 09**: 2 of 2 claims differ on '
                                                   'some seed and 1 change verdict (y)')


def test_the_committed_record_judged(sweep):
    assert sweep.swept and len(sweep.rows) == len(claims.CLAIMS)
    keys = [k for k in explanations.EXPLANATIONS if any(r['key'] == k for r in sweep.rows)]
    assert list(sweep.checked) == keys and len(sweep.readings) == len(keys)
    assert all(line.startswith('- *') for line in sweep.readings)
    assert not any('not tested here' in line for line in sweep.readings)  # each says what the substrates show
    for key, line in zip(keys, sweep.readings):
        if explanations.EXPLANATIONS[key].about_substrate:
            assert any(word in line for word in ('**Contradicted**', '**Borne out**', '**Consistent, not tested**',
                                                 'cannot say'))
    assert set(sweep.gaps) == set(sweep.swept)


def test_found_has_three_to_six_bullets_that_count_the_table(sweep):
    text = st.found_markdown(sweep)
    bullets = text.split('\n')
    assert 3 <= len(bullets) <= 6 and all(b.startswith('- **') for b in bullets)
    groups = st.by_label(sweep.rows)
    robust = groups[across.ROBUST]
    always = sum(all(c['verdict'] == claims.HOLDS for c in r['cells'].values()) for r in robust)
    assert bullets[0].startswith(f'- **{len(robust)} of {len(sweep.rows)} claims are robust** on '
                                 f'{st.on_substrates(len(sweep.swept))}')
    tied = groups[across.TIED_EVERYWHERE]
    assert (f'- **{len(tied)} are tied on every substrate**' in text) == bool(tied)
    assert f'{always} hold on every substrate and {len(robust) - always} fail on every one' in bullets[0]
    contradicted = sum(bool(c['contradict']) for k, c in sweep.checked.items()
                       if explanations.EXPLANATIONS[k].about_substrate)
    assert any(f'{contradicted} {"is" if contradicted == 1 else "are"} contradicted' in b for b in bullets)
    about = {k: c for k, c in sweep.checked.items() if explanations.EXPLANATIONS[k].about_substrate}
    label = {r['key']: r['label'] for r in sweep.rows}
    settled = [k for k, c in about.items() if not c['contradict'] and c['agree']]
    borne = sum(label[k] == across.SUBSTRATE_DEPENDENT for k in settled)
    untested = len(settled) - borne
    left_open = sum(not c['contradict'] and not c['agree'] for c in about.values())
    reading = next(b for b in bullets if 'Our readings' in b)
    for n, words in ((borne, 'borne out'), (untested, 'consistent but untested'), (left_open, 'cannot be judged')):
        said = f'{n} {"is" if n == 1 else "are"} {words}' if words != 'cannot be judged' else f'{n} {words}'
        assert (said in reading) == bool(n), (said, reading)
    assert borne + untested + left_open + contradicted == len(about)


def test_found_on_an_empty_record_says_so():
    empty = st.Sweep([], {}, {}, {}, [], [], {}, {}, None, True)
    assert st.found_markdown(empty) == '- No substrate has been swept yet: there is nothing to report.'
    assert st.claims_markdown([], {}) == 'Nothing to judge yet.'
    assert st.readings_markdown([]) == 'No reading to check yet.'


def test_status_lines_and_facts_table():
    found = {'a': ('config', 1), 'b': 'no frozen trial', 'c': ('config', 2)}
    assert st.status_lines({'a': 'A', 'b': 'B', 'c': 'C'}, ['a'], found) == ['A: swept', 'B: not frozen yet',
                                                                            'C: not swept yet']

    class Band:
        fmt, low, high, book = '{:.1f}', 10.0, 16.0, '12-14'

    facts = {'a': dict(label='A', grammar='short', rows_held=24, confirmation_rows_held=None, tokens=8.25,
                       entropy=0.4612)}
    record = dict(substrates={'a': dict(seconds=1560.0)}, sessions=[])
    text = st.facts_markdown(facts, record, {'tokens': Band, 'entropy': Band})
    assert '| A | short | 24 of 26 | - | 8.2 | 0.461 | 26 min |' in text
    assert text.endswith('No substrate has been swept yet: `make substrate-sweep` writes the record this notebook '
                         'reads.')
    record['sessions'] = [dict(scheduler='LocalCluster', workers=2, cpus=2, seconds=600.0)]
    assert st.facts_markdown(facts, record, {'tokens': Band, 'entropy': Band}).endswith(
        'The sweep ran in 1 session on LocalCluster (2 workers, 2 CPUs), 10 minutes in all, including the RL bases '
        'it had to build.')
