"""The mutation report (machinery/mutation_report.py) from mutmut's verdicts and the justification file: a survivor
is matched to its justification by what it changes (robust to line shifts), a stale justification and an unjustified
survivor are listed, equivalent mutants leave the score, and a partial run says so."""
import pytest

from agentrl.paths import MAINTAINING
from machinery import mutation
from machinery import mutation_report as report
from machinery.readme_blocks import between_markers


def row(status, function='f', line='return a + b', mutated='return a - b', module='agentrl.core.kl'):
    r = dict(module=module, path=module.replace('.', '/') + '.py', mutant=f'{module}.x_{function}__mutmut_1',
             function=function, status=status)
    if status == 'survived':
        r.update(line=line, mutated=mutated, lineno=None)
    return r


def justification(kind, line='return a + b', mutated='return a - b', function='f', module='agentrl.core.kl'):
    return {report.identity(module, function, line, mutated): dict(kind=kind, why='because')}


def test_the_mutant_names_its_function_and_method():
    assert report.function_of('agentrl.core.kl.x_kl_penalty__mutmut_3') == 'kl_penalty'
    assert report.function_of('agentrl.substrate.sandbox.xǁSandboxǁrun__mutmut_12') == 'Sandbox.run'


def test_changed_lines_are_read_from_the_diff_ignoring_its_headers():
    diff = '--- a.py\n+++ a.py\n@@ -1,2 +1,2 @@\n def f(a, b):\n-    return a + b\n+    return a - b'
    assert mutation.changed_lines(diff) == ('return a + b', 'return a - b')


def test_a_justification_matches_whatever_the_whitespace_and_an_equivalent_mutant_leaves_the_score():
    rows = [row('killed'), row('killed'), row('survived', line='return  a + b')]
    per_module, survivors, stale = report.summarise(rows, justification('equivalent'))
    counts = per_module['agentrl.core.kl']
    assert counts['equivalent'] == 1 and counts['survived'] == 0 and not stale
    assert report.score(counts) == (2, 2)


def test_a_not_worth_survivor_counts_as_not_detected():
    per_module, survivors, stale = report.summarise([row('killed'), row('survived')],
                                                    justification('not worth a test'))
    assert report.score(per_module['agentrl.core.kl']) == (1, 2) and survivors[0]['justification']


def test_a_justification_whose_mutant_is_gone_is_stale_and_an_unmatched_survivor_is_unjustified(monkeypatch):
    monkeypatch.setattr(report, 'mutated_modules', lambda: ['agentrl/core/kl.py'])
    rows = [row('killed'), row('survived', mutated='return a * b')]  # the justified mutant changed
    text = report.render(rows, justification('equivalent'))
    assert '**1 survivors have no justification yet**' in text and '**unjustified**' in text
    assert '## Stale justifications' in text and '`return a + b` → `return a - b` (equivalent)' in text


def test_a_run_with_unchecked_mutants_is_labelled_partial(monkeypatch):
    monkeypatch.setattr(report, 'mutated_modules', lambda: ['agentrl/core/kl.py', 'agentrl/core/exact.py'])
    rows = [row('killed'), row('not checked', module='agentrl.core.exact')]
    text = report.render(rows, {})
    assert '**PARTIAL RUN**: 1 of 2 mutants were not checked' in text and 'Score: 100.0%' in text
    assert 'not (or not fully) checked: `agentrl.core.exact`' in text


def test_the_committed_justifications_parse():
    for key, value in report.load_justifications().items():
        assert value['kind'] in report.KINDS and value['why'] and len(key) == 4


def test_the_verdicts_kept_as_data_read_back_as_collected(tmp_path, monkeypatch):
    rows = [row('killed'), dict(row('survived'), lineno=7), row('not checked', module='agentrl.core.exact')]
    for number, r in enumerate(rows):  # one mutant each
        r['mutant'] = r['mutant'].replace('_1', f'_{number + 1}')
    runs = [dict(command='make mutation', seconds=60.0, tested=2, children=2, mutmut='3.8.1', commit='abc', note=None)]
    report.save_results(rows, runs, tmp_path / 'r.json')
    assert report.load_results(tmp_path / 'r.json') == (rows, runs)


def test_the_readme_paragraph_gives_the_score_the_run_time_and_says_partial(monkeypatch):
    runs = [dict(command='make mutation', seconds=600.0, tested=3, children=2, mutmut='3.8.1', commit='abc',
                 note=None)]
    rows = [row('killed'), row('killed'), row('survived'), row('not checked')]
    [text] = report.readme_lines(rows, justification('not worth a test'), runs)
    assert 'a **partial** run, 1 of 4 mutants not checked' in text and '**66.7%** of the 3' in text
    assert '1 survivors are judged not worth a test and 0 have no justification' in text and 'took 10 min' in text
    [text] = report.readme_lines(rows[:3], {}, runs)
    assert 'all 3 mutants checked' in text and '1 have no justification yet' in text


def test_the_score_goes_between_the_readme_markers_and_missing_markers_raise():
    text = f'a\n{report.README_BEGIN}\nold\n{report.README_END}\nb\n'
    assert report.readme_with_score(text, ['new']) == f'a\n{report.README_BEGIN}\nnew\n{report.README_END}\nb\n'
    with pytest.raises(ValueError, match='MAINTAINING.md lacks the markers'):
        report.readme_with_score('no markers', ['new'])


def test_the_committed_report_and_maintainers_paragraph_are_what_the_committed_verdicts_give():
    rows, runs = report.load_results()
    justifications = report.load_justifications()
    hand = report.load_hand_results()
    assert report.REPORT.read_text(encoding='utf-8') == report.render(rows, justifications, runs=runs, hand=hand), \
        'reports/mutation.md disagrees with reports/mutation-results.json: run `make mutation-report`'
    block = between_markers(MAINTAINING.read_text(encoding='utf-8'), report.README_BEGIN, report.README_END)
    assert block == report.readme_lines(rows, justifications, runs, hand), \
        "MAINTAINING.md's mutation paragraph disagrees with reports/mutation-results.json: run `make mutation-report`"


def test_every_hand_mutant_changes_one_place_of_an_existing_file():
    mutants = mutation.load_hand_mutants()
    assert mutants and all(m['find'] != m['replace'] and m['slip'] for m in mutants)


def test_a_hand_mutant_whose_text_is_not_found_exactly_once_is_refused(tmp_path):
    bad = tmp_path / 'hand.toml'
    bad.write_text('[[mutant]]\npath = "agentrl/core/kl.py"\nfind = "return"\nreplace = "pass"\nslip = "s"\n')
    with pytest.raises(ValueError, match=r'number 1 \(s\): its find text occurs \d+ times in agentrl/core/kl.py'):
        mutation.load_hand_mutants(bad)


def test_the_hand_mutants_section_counts_the_detected_and_marks_the_survivors():
    hand = dict(commit='abc', jobs=2, seconds=120.0, clean_seconds=50.0, mutants=[
        dict(path='agentrl/core/kl.py', slip='k1 flipped', status='killed', test='tests/t.py::x', seconds=3.0),
        dict(path='agentrl/core/kl.py', slip='k3 naive', status='survived', test=None, seconds=60.0)])
    text = '\n'.join(report.hand_lines(hand))
    assert '**1 of 2 detected** at commit `abc`' in text
    assert '| `agentrl/core/kl.py` | k3 naive | **survived** |  |' in text and '`tests/t.py::x`' in text
    assert 'Not run yet' in '\n'.join(report.hand_lines(None))


def test_reading_verdicts_that_were_never_recorded_says_what_to_run(tmp_path):
    with pytest.raises(FileNotFoundError, match='holds no mutmut verdicts: run `make mutation`'):
        report.load_results(tmp_path / 'absent.json')
