"""The mutation report (agentrl/build/mutation.py) from mutmut's verdicts and the justification file: a survivor is
matched to its justification by what it changes (robust to line shifts), a stale justification and an unjustified
survivor are listed, equivalent mutants leave the score, and a partial run says so."""
from agentrl.build import mutation


def row(status, function='f', line='return a + b', mutated='return a - b', module='agentrl.core.kl'):
    r = dict(module=module, path=module.replace('.', '/') + '.py', mutant=f'{module}.x_{function}__mutmut_1',
             function=function, status=status)
    if status == 'survived':
        r.update(line=line, mutated=mutated, lineno=None)
    return r


def justification(kind, line='return a + b', mutated='return a - b', function='f', module='agentrl.core.kl'):
    return {mutation.identity(module, function, line, mutated): dict(kind=kind, why='because')}


def test_the_mutant_names_its_function_and_method():
    assert mutation.function_of('agentrl.core.kl.x_kl_penalty__mutmut_3') == 'kl_penalty'
    assert mutation.function_of('agentrl.substrate.sandbox.xǁSandboxǁrun__mutmut_12') == 'Sandbox.run'


def test_changed_lines_are_read_from_the_diff_ignoring_its_headers():
    diff = '--- a.py\n+++ a.py\n@@ -1,2 +1,2 @@\n def f(a, b):\n-    return a + b\n+    return a - b'
    assert mutation.changed_lines(diff) == ('return a + b', 'return a - b')


def test_a_justification_matches_whatever_the_whitespace_and_an_equivalent_mutant_leaves_the_score():
    rows = [row('killed'), row('killed'), row('survived', line='return  a + b')]
    per_module, survivors, stale = mutation.summarise(rows, justification('equivalent'))
    counts = per_module['agentrl.core.kl']
    assert counts['equivalent'] == 1 and counts['survived'] == 0 and not stale
    assert mutation.score(counts) == (2, 2)


def test_a_not_worth_survivor_counts_as_not_detected():
    per_module, survivors, stale = mutation.summarise([row('killed'), row('survived')],
                                                      justification('not worth a test'))
    assert mutation.score(per_module['agentrl.core.kl']) == (1, 2) and survivors[0]['justification']


def test_a_justification_whose_mutant_is_gone_is_stale_and_an_unmatched_survivor_is_unjustified(monkeypatch):
    monkeypatch.setattr(mutation, 'mutated_modules', lambda: ['agentrl/core/kl.py'])
    rows = [row('killed'), row('survived', mutated='return a * b')]  # the justified mutant changed
    text = mutation.render(rows, justification('equivalent'))
    assert '**1 survivors have no justification yet**' in text and '**unjustified**' in text
    assert '## Stale justifications' in text and '`return a + b` → `return a - b` (equivalent)' in text


def test_a_run_with_unchecked_mutants_is_labelled_partial(monkeypatch):
    monkeypatch.setattr(mutation, 'mutated_modules', lambda: ['agentrl/core/kl.py', 'agentrl/core/exact.py'])
    rows = [row('killed'), row('not checked', module='agentrl.core.exact')]
    text = mutation.render(rows, {})
    assert '**PARTIAL RUN**: 1 of 2 mutants were not checked' in text and 'Score: 100.0%' in text
    assert 'not (or not fully) checked: `agentrl.core.exact`' in text


def test_the_committed_justifications_parse():
    for key, value in mutation.load_justifications().items():
        assert value['kind'] in mutation.KINDS and value['why'] and len(key) == 4
