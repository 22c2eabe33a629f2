"""What a fresh run is held to on every machine, the ones whose arithmetic differs from the committed outputs' above
all (marker `verdict`): the lines the exact notebooks print, and every verdict the other notebooks record.

Where this machine computes the committed outputs' bits, the snapshot tests compare a fresh run with them digit for
digit and these tests are implied by them. Where it does not (an Intel CPU, ARM, a reference named by
AGENTRL_ARITHMETIC_REFERENCE), the snapshot tests are skipped, since every TinyAgent digit differs there whatever the
code does, and these tests are what judges the fresh run: they take the same executions (tests/conftest.py's
notebook_runs executes each notebook once per session), so they cost no second execution of any notebook.

A verdict is any recorded dict carrying a verdict word ('verdict', else 'outcome') or a seed-0 check ('held' as one
true or false), wherever it sits in a notebook's results. It is exempt, and reported as exempt, when it is labelled
tied (`tied: true` or the word 'tied', on either side: its gap is inside its tolerance, so rounding alone may move it)
or when the stability record shows it moving with the rounding: a claim whose five-seed word moved between the recorded
arithmetic streams (fragile, agentrl.ch10.stability), or, for a seed-0 verdict, one draw, a claim whose seed-0 check
came out differently on two of those streams (the committed five-seed record among them).
"""
import difflib
import re
from collections import namedtuple

import nbformat
import pytest

from agentrl import chapter, results
from agentrl.ch10 import claims, stability
from agentrl.paths import RESULTS
from machinery import verdict_shift
from conftest import NOTEBOOKS, VERDICT_RECORD, skip_snapshots, verdict_summary
from machinery.notebook_runner import NotebookFailed

ALL_NOTEBOOKS = sorted(p.stem for p in NOTEBOOKS.glob('[0-9][0-9]_*.ipynb'))
# The notebooks that train nothing: sections 10.1-10.5 compute in exact or closed form, and the pretrained model's
# notebook computes once from fixed weights and a seeded sampler. What they print is held line for line.
EXACT_NOTEBOOKS = [section.notebook for section in chapter.SECTIONS[:5]] + ['14_real_model']
# The notebooks whose numbers come out of training (or renders of recorded sweeps) and the pretrained model's, whose
# claims are verdicts too: their digits may move with the arithmetic, their verdicts may not.
VERDICT_NOTEBOOKS = [name for name in ALL_NOTEBOOKS if name not in EXACT_NOTEBOOKS[:5]]

HOLDS, DOES_NOT_HOLD = claims.HOLDS, claims.DOES_NOT_HOLD
TIED = getattr(claims, 'TIED', 'tied')  # the word a verdict whose gap is inside its tolerance carries
# A verdict recorded without a 'key' of its own takes its claim from the result it is recorded under: notebook 09's
# judgement of the entropy law is the claim the stability record and the verdict snapshot call 'entropy-law'.
CLAIM_OF_RESULT = {verdict_shift.ENTROPY_LAW_KEY: 'entropy-law'}
IDENTITY = ('key', 'statement', 'setting', 'name')  # what names an entry of a list of verdicts, in this order
NOT_NESTED = ('held', 'outcomes', 'premise_held', 'verdict', 'outcome', 'tied')  # a verdict's own fields
# Records about verdicts rather than verdicts: notebook 09's stability table (each claim's word from the bare checks,
# set beside the recorded streams) and its readings of the claims that do not hold (present exactly when the seed
# verdict they copy does not hold). The verdicts they are about are compared where they are recorded.
ABOUT_VERDICTS = (chapter.STABILITY_KEY, chapter.EXPLANATIONS_KEY)

Verdict = namedtuple('Verdict', 'word tied claim draw')  # draw: the check on one seed (a seed-0 verdict)


def verdict_word(entry):
    """The verdict a recorded dict carries: its 'verdict' word, else its 'outcome', else its seed-0 check ('held' as
    one bool) as 'holds' or 'does not hold'; None for a dict that is no verdict."""
    for field in ('verdict', 'outcome'):
        if isinstance(entry.get(field), str):
            return entry[field]
    if isinstance(entry.get('held'), bool):
        return HOLDS if entry['held'] else DOES_NOT_HOLD
    return None


def verdicts_in(recorded):
    """{where: Verdict(word, tied, claim, draw)} for every verdict in one notebook's results ({result key: value}). where
    names it by its path, list entries by their key (or statement, setting, name), so that the same verdict has the
    same name in two runs whatever its position."""
    found = {}

    def visit(value, where, claim):
        if isinstance(value, dict):
            claim = value['key'] if isinstance(value.get('key'), str) else claim
            word = verdict_word(value)
            if word is not None:
                found[where] = Verdict(word, value.get('tied') is True or word == TIED, claim,
                                       isinstance(value.get('held'), bool))
            for field, inner in value.items():
                if field not in NOT_NESTED:
                    visit(inner, f'{where}.{field}', claim)
        elif isinstance(value, list):
            seen = set()
            for index, item in enumerate(value):
                name = next((item[f] for f in IDENTITY if isinstance(item, dict) and isinstance(item.get(f), str)),
                            str(index))
                name = name if name not in seen else f'{name}#{index}'
                seen.add(name)
                visit(item, f'{where}[{name}]', claim)

    for key, value in recorded.items():
        if key not in ABOUT_VERDICTS:
            visit(value, key, CLAIM_OF_RESULT.get(key))
    return found


def fragile_claims(folder=RESULTS):
    """The claim keys the stability record calls fragile: those whose word on the committed seeds differs from their
    word on a recorded arithmetic stream (data/streams/), recomputed here, and those notebook 09 recorded as fragile."""
    nine = results.load(chapter.SEED_NOTEBOOK, folder)
    streams = stability.recorded_streams()
    rows = stability.stability(nine.get(chapter.SEED_VERDICTS_KEY, []) + nine.get(chapter.SCALE_VERDICTS_KEY, []),
                               streams)
    law = nine.get(verdict_shift.ENTROPY_LAW_KEY)
    if law:
        claim = CLAIM_OF_RESULT[verdict_shift.ENTROPY_LAW_KEY]
        rows.append(stability.word_stability(claim, law['rule'], law['verdict'], streams))
    rows += nine.get(chapter.STABILITY_KEY, [])
    return {row['key'] for row in rows if row['label'] == stability.FRAGILE}


def fragile_draws(folder=RESULTS, seed=0):
    """The claim keys whose check on this seed came out differently on two recorded arithmetic streams, the committed
    five-seed record counted as one: a seed-0 verdict of such a claim is one draw that the rounding alone has moved."""
    nine = results.load(chapter.SEED_NOTEBOOK, folder)
    committed = dict(seeds=nine[chapter.SEED_SUMMARY_KEY]['seeds'], held={
        v['key']: v['held'] for v in nine.get(chapter.SEED_VERDICTS_KEY, []) + nine.get(chapter.SCALE_VERDICTS_KEY, [])})
    seen = {}
    for stream in stability.recorded_streams() + [committed]:
        if seed in stream['seeds']:
            for key, held in stream['held'].items():
                seen.setdefault(key, set()).add(bool(held[list(stream['seeds']).index(seed)]))
    return {key for key, outcomes in seen.items() if len(outcomes) > 1}


def compare_verdicts(committed, fresh, fragile, moved_draws=frozenset()):
    """committed and fresh: verdicts_in's dicts; fragile: claim keys whose verdicts are all exempt; moved_draws: claim
    keys whose one-seed verdicts are exempt. -> {'held': [where], 'exempt': [(where, why)], 'moved': [(where,
    committed word, fresh word)]}; a verdict on one side only has moved ('not recorded')."""
    found = dict(held=[], exempt=[], moved=[])
    for where in list(committed) + [w for w in fresh if w not in committed]:
        before, after = committed.get(where), fresh.get(where)
        claim, draw = (before or after).claim, (before or after).draw
        why = [label for label, applies in (
            ('fragile', claim in fragile), ('its seed-0 draw moved between streams', draw and claim in moved_draws),
            ('tied', any(v is not None and v.tied for v in (before, after)))) if applies]
        if why:
            found['exempt'].append((where, ' and '.join(why)))
        elif before is None or after is None or before.word != after.word:
            found['moved'].append((where, before.word if before else 'not recorded',
                                   after.word if after else 'not recorded'))
        else:
            found['held'].append(where)
    return found


FIGURE_TEXT = re.compile(r'<(Figure size |figure |IPython\.core\.display\.\w+ object)')


def printed_lines(nb):
    """What a notebook prints for a reader: its stdout and the text of its displayed results (Markdown, else plain
    text), line by line; figures (whose coordinates carry every digit) and stderr (warnings) left out."""
    lines = []
    for cell in nb.cells:
        if cell.cell_type != 'code':
            continue
        for out in cell.outputs:
            text = ''
            if out.output_type == 'stream' and out.name == 'stdout':
                text = out.text
            elif out.output_type in ('execute_result', 'display_data'):
                data = out.get('data', {})
                text = next((data[m] for m in ('text/markdown', 'text/plain') if m in data), '')
                text = '' if FIGURE_TEXT.match(text) else text
            elif out.output_type == 'error':
                text = f'{out.ename}: {out.evalue}'
            lines.extend(text.splitlines())
    return lines


def line_differences(committed, fresh):
    """[(committed line, fresh line)] for the lines that differ ('' where a line is on one side only)."""
    differ = []
    matcher = difflib.SequenceMatcher(a=committed, b=fresh, autojunk=False)
    for tag, a0, a1, b0, b1 in matcher.get_opcodes():
        if tag != 'equal':
            old, new = committed[a0:a1], fresh[b0:b1]
            differ += [(old[i] if i < len(old) else '', new[i] if i < len(new) else '')
                       for i in range(max(len(old), len(new)))]
    return differ


def from_fresh_run(kind, name, read):
    """read(): what a fresh execution of notebook `name` gives; if it fails to execute, the summary says so."""
    try:
        return read()
    except NotebookFailed as failure:
        VERDICT_RECORD.append(dict(kind=kind, notebook=name, checked=0, exempt=[], moved=[], failed=str(failure)))
        raise


# --- the comparison itself, on hand-made results -----------------------------------------------------------------

def seed0(key, held, **tie):
    return dict(key=key, kind='mechanism', text=f'claim {key}', held=held, evidence='0.1 -> 0.2', **tie)


def seeds(key, word, held):
    return dict(key=key, kind='mechanism', text=f'claim {key}', seeds=list(range(len(held))), held=held,
                held_on=sum(held), verdict=word)


def test_every_verdict_is_found_with_and_without_the_tie_fields():
    recorded = {
        'verdicts': [seed0('a', True), seed0('b', False, outcome=TIED, tied=True), seed0('c', False, outcome=HOLDS,
                                                                                           tied=False)],
        'seed_verdicts': [seeds('a', HOLDS, [True, True, False]), seeds('d', TIED, [True, False, False])],
        'claim_table': [dict(key='a', label='robust', cells=dict(t45=dict(verdict=HOLDS, held_on=5, seeds=5)))],
        'real_claims': [dict(statement='k3 is unbiased', verdict='carries over')],
        verdict_shift.ENTROPY_LAW_KEY: dict(rule='the law beats both forecasts', verdict='mixed', seeds=[0, 1]),
        'clip_higher_claim': dict(key='e', held=[True, False], held_on=1, verdict=DOES_NOT_HOLD),
        'comparison': ['none | 0.43 -> 0.18'], 'found': dict(exact=True, premise_held=[True]),
        chapter.STABILITY_KEY: [dict(key='a', verdict=DOES_NOT_HOLD, label='fragile', held_on=1, n=3, others=[])],
        chapter.EXPLANATIONS_KEY: [dict(key='d', verdict=TIED, premise_held=[True, False, False])],
    }
    assert verdicts_in(recorded) == {
        'verdicts[a]': Verdict(HOLDS, False, 'a', True), 'verdicts[b]': Verdict(TIED, True, 'b', True),
        'verdicts[c]': Verdict(HOLDS, False, 'c', True),  # the outcome under the tie rule, not the bare check
        'seed_verdicts[a]': Verdict(HOLDS, False, 'a', False), 'seed_verdicts[d]': Verdict(TIED, True, 'd', False),
        'claim_table[a].cells.t45': Verdict(HOLDS, False, 'a', False),
        'real_claims[k3 is unbiased]': Verdict('carries over', False, None, False),
        f'{verdict_shift.ENTROPY_LAW_KEY}': Verdict('mixed', False, 'entropy-law', False),
        'clip_higher_claim': Verdict(DOES_NOT_HOLD, False, 'e', False)}


def test_a_moved_verdict_is_named_and_a_tied_or_fragile_one_is_exempt():
    committed = verdicts_in({'verdicts': [seed0('a', True), seed0('b', True), seed0('c', True), seed0('d', True),
                                          seed0('h', True)],
                             'seed_verdicts': [seeds('f', HOLDS, [True, True, False]),
                                               seeds('h', HOLDS, [True, True, False])]})
    fresh = verdicts_in({'verdicts': [seed0('a', True), seed0('b', False), seed0('c', False, outcome=TIED, tied=True),
                                      seed0('d', False), seed0('h', False), seed0('g', True)],
                         'seed_verdicts': [seeds('f', DOES_NOT_HOLD, [True, False, False]),
                                           seeds('h', DOES_NOT_HOLD, [False, True, False])]})
    found = compare_verdicts(committed, fresh, fragile={'d', 'f'}, moved_draws={'h'})
    assert found['held'] == ['verdicts[a]']
    # a draw that moved between streams exempts the seed-0 verdict only, not the five-seed one
    assert found['moved'] == [('verdicts[b]', HOLDS, DOES_NOT_HOLD), ('seed_verdicts[h]', HOLDS, DOES_NOT_HOLD),
                              ('verdicts[g]', 'not recorded', HOLDS)]
    assert found['exempt'] == [('verdicts[c]', 'tied'), ('verdicts[d]', 'fragile'),
                               ('verdicts[h]', 'its seed-0 draw moved between streams'), ('seed_verdicts[f]', 'fragile')]
    assert compare_verdicts(committed, committed, set())['moved'] == []


def test_a_draw_moved_between_streams_is_one_whose_seed_0_check_differs_on_two_of_them(tmp_path, monkeypatch):
    def stream(held):
        return dict(short='s', label='s', cpu='c', arithmetic='a', seeds=[0, 1, 2], held=held)
    monkeypatch.setattr(stability, 'recorded_streams', lambda: [stream({'a': [True, True, False], 'b': [True] * 3}),
                                                               stream({'a': [True, False, False], 'b': [False] * 3})])
    results.record(chapter.SEED_NOTEBOOK, chapter.SEED_SUMMARY_KEY, dict(seeds=[0, 1, 2]), tmp_path)
    results.record(chapter.SEED_NOTEBOOK, chapter.SEED_VERDICTS_KEY, [seeds('a', HOLDS, [False, True, False]),
                                                                      seeds('c', HOLDS, [True] * 3)], tmp_path)
    assert fragile_draws(tmp_path) == {'a', 'b'} and fragile_draws(tmp_path, seed=1) == {'a', 'b'}
    assert fragile_draws(tmp_path, seed=2) == {'b'}


def test_printed_lines_leave_out_figures_and_warnings_and_name_what_differs():
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell('x')])
    nb.cells[0].outputs = [
        nbformat.v4.new_output('stream', name='stdout', text='k1 | 1.000\nk3 | 1.000\n'),
        nbformat.v4.new_output('stream', name='stderr', text='UserWarning: slow\n'),
        nbformat.v4.new_output('display_data', data={'text/plain': '<Figure size 640x480 with 1 Axes>',
                                                     'image/png': ''}),
        nbformat.v4.new_output('display_data', data={'text/plain': '<IPython.core.display.Markdown object>',
                                                     'text/markdown': '**mean** 0.25'}),
        nbformat.v4.new_output('execute_result', data={'text/plain': 'a | b'}, execution_count=1)]
    lines = printed_lines(nb)
    assert lines == ['k1 | 1.000', 'k3 | 1.000', '**mean** 0.25', 'a | b']
    assert line_differences(lines, lines) == []
    moved = lines[:1] + ['k3 | 1.001'] + lines[2:] + ['extra']
    assert line_differences(lines, moved) == [('k3 | 1.000', 'k3 | 1.001'), ('', 'extra')]


class Item:
    """A collected test as skip_snapshots sees it: its markers, and the ones added."""

    def __init__(self, *marks):
        self.marks, self.added = set(marks), []

    def get_closest_marker(self, name):
        return name if name in self.marks else None

    def add_marker(self, mark):
        self.added.append(mark)


def test_where_the_bits_differ_the_snapshots_are_skipped_and_the_verdict_tests_run():
    snapshot, verdict, plain = Item('slow', 'snapshot'), Item('slow', 'verdict'), Item()
    assert skip_snapshots([snapshot, verdict, plain], None) == [] and not snapshot.added
    assert skip_snapshots([snapshot, verdict, plain], 'this machine computes other bits') == [snapshot]
    assert [mark.name for mark in snapshot.added] == ['skip'] and verdict.added == plain.added == []


def test_the_summary_says_what_was_checked_in_place_of_the_bits():
    record = [dict(kind='lines', notebook='01_bandit_closed_form', checked=9, exempt=[], moved=[]),
              dict(kind='lines', notebook='02_estimator_moments', checked=3, exempt=[],
                   moved=[('k3 | 1.000', 'k3 | 1.001')]),
              dict(kind='verdicts', notebook='07_tinyagent_comparison', checked=14,
                   exempt=[('verdicts[more-invalid-calls]', 'fragile')], moved=[]),
              dict(kind='verdicts', notebook='13_engine', checked=0, exempt=[], moved=[]),
              dict(kind='lines', notebook='14_real_model', checked=0, exempt=[], moved=[], failed='cell 5: silent'),
              dict(kind='verdicts', notebook='14_real_model', checked=0, exempt=[], moved=[], failed='cell 5: silent')]
    assert verdict_summary(record) == [
        'the lines printed by 2 exact notebooks (01, 02): 12 equal to the committed ones; 02: 1 differ',
        'the verdicts recorded by 2 executed notebooks (07, 13): 14 equal to the committed ones; 1 exempt, not '
        'compared: verdicts[more-invalid-calls] (fragile); notebooks recording no verdict, only executed: 13',
        'nothing of 14_real_model (cell 5: silent): its execution failed']
    moved = [dict(kind='verdicts', notebook='07_tinyagent_comparison', checked=13, exempt=[],
                  moved=[('07 verdicts[collapse]', 'holds', 'does not hold')])]
    assert verdict_summary(moved) == ['the verdicts recorded by 1 executed notebooks (07): 13 equal to the committed '
                                      'ones, 1 moved: 07 verdicts[collapse] (holds -> does not hold); none exempt']
    assert verdict_summary([]) == []


# --- the committed results: the comparison finds what it is meant to judge ----------------------------------------

def test_the_verdicts_the_chapter_records_are_all_found_in_the_committed_results():
    """Every seed-0 verdict, seed verdict and real-model claim the results hold is found, so that a renamed field
    cannot leave the verdict tests comparing nothing."""
    found = {name: verdicts_in(results.load(name, RESULTS)) for name in VERDICT_NOTEBOOKS}
    for stem in chapter.VERDICT_NOTEBOOKS:
        keys = [v['key'] for v in results.load(stem, RESULTS)[chapter.VERDICTS_KEY]]
        assert [f'{chapter.VERDICTS_KEY}[{key}]' in found[stem] for key in keys] == [True] * len(keys), stem
    nine = results.load(chapter.SEED_NOTEBOOK, RESULTS)
    for key in (chapter.SEED_VERDICTS_KEY, chapter.SCALE_VERDICTS_KEY):
        assert {f'{key}[{v["key"]}]' for v in nine[key]} <= set(found[chapter.SEED_NOTEBOOK]), key
    assert verdict_shift.ENTROPY_LAW_KEY in found[chapter.SEED_NOTEBOOK]
    real = results.load('14_real_model', RESULTS)['real_claims']
    assert sum(where.startswith('real_claims[') for where in found['14_real_model']) == len(real) > 0


def test_the_fragile_claims_are_claims_the_committed_results_judge():
    fragile = fragile_claims()
    recorded = {v.claim for name in VERDICT_NOTEBOOKS for v in verdicts_in(results.load(name, RESULTS)).values()}
    assert fragile and fragile <= recorded
    nine = results.load(chapter.SEED_NOTEBOOK, RESULTS)
    assert {r['key'] for r in nine.get(chapter.STABILITY_KEY, []) if r['label'] == stability.FRAGILE} <= fragile
    assert not any(where.startswith(ABOUT_VERDICTS) for where in verdicts_in(nine))


def test_a_verdict_changed_in_a_committed_file_is_a_moved_verdict():
    """What the verdict test does when a committed verdict differs from a fresh one: taken from the committed seed-0
    verdicts of notebook 07, one of them turned."""
    committed = results.load('07_tinyagent_comparison', RESULTS)
    fragile = fragile_claims()
    judged = verdicts_in(committed)
    draws = fragile_draws()
    turned = next(v for v in committed[chapter.VERDICTS_KEY] if v['key'] not in fragile | draws
                  and not judged[f'verdicts[{v["key"]}]'].tied)
    changed = {**committed, chapter.VERDICTS_KEY: [
        {**v, 'held': not v['held'], **({'outcome': DOES_NOT_HOLD if verdict_word(v) == HOLDS else HOLDS}
                                        if 'outcome' in v else {})} if v is turned else v
        for v in committed[chapter.VERDICTS_KEY]]}
    found = compare_verdicts(judged, verdicts_in(changed), fragile, draws)
    assert [where for where, _, _ in found['moved']] == [f'verdicts[{turned["key"]}]']


# --- fresh runs: printed lines and verdicts held to the committed ones ------------------------------------------

@pytest.mark.slow
@pytest.mark.verdict
@pytest.mark.parametrize('name', EXACT_NOTEBOOKS)
def test_a_fresh_run_prints_the_committed_lines(name, notebook_runs):
    """Every line an exact notebook prints equals the committed one; a rounding flip here is fixed by printing fewer
    digits. The book's exact lines among them are found verbatim (white space collapsed) in what it prints."""
    committed = printed_lines(nbformat.read(NOTEBOOKS / f'{name}.ipynb', as_version=4))
    printed = from_fresh_run('lines', name, lambda: printed_lines(notebook_runs.run(name)))
    differ = line_differences(committed, printed)
    VERDICT_RECORD.append(dict(kind='lines', notebook=name, checked=len(committed) - sum(bool(a) for a, _ in differ),
                               exempt=[], moved=differ))
    assert not differ, f'{name}: (committed, fresh) printed lines differ: {differ}'
    printed = {chapter.collapse(line) for line in printed}
    for block in chapter.book_blocks():
        if block.notebook == name:
            missing = [line for line, exact in zip(block.lines, block.exact) if exact and line not in printed]
            assert not missing, f'{block.label()}: exact lines of the book not printed: {missing}'


@pytest.mark.slow
@pytest.mark.verdict
@pytest.mark.parametrize('name', VERDICT_NOTEBOOKS)
def test_a_fresh_run_gives_the_committed_verdicts(name, notebook_runs):
    """Every verdict a fresh execution records is the committed one, except those labelled tied or fragile and the
    seed-0 draws the rounding has moved on record (named in the terminal summary as exempt). A notebook that records none is executed all the same."""
    recorded = from_fresh_run('verdicts', name, lambda: notebook_runs.results(name))
    found = compare_verdicts(verdicts_in(results.load(name, RESULTS)), verdicts_in(recorded), fragile_claims(),
                             fragile_draws())
    VERDICT_RECORD.append(dict(kind='verdicts', notebook=name, checked=len(found['held']),
                               exempt=[(f'{name[:2]} {where}', why) for where, why in found['exempt']],
                               moved=[(f'{name[:2]} {where}', before, after)
                                      for where, before, after in found['moved']]))
    assert not found['moved'], f'{name}: verdicts (where, committed, fresh) moved: {found["moved"]}'


def test_a_failed_execution_is_not_repeated_for_the_next_test_that_reads_it(tmp_path, monkeypatch):
    """Several tests read each notebook; one that fails after minutes must not cost those minutes once per test."""
    import conftest
    from machinery import notebook_runner

    calls = []

    def failing(src, dest, parameters=None, **options):
        calls.append(src)
        raise NotebookFailed(f'{src}: cell 5: silent for 600 s')
    monkeypatch.setattr(notebook_runner, 'execute_notebook', failing)
    runs = conftest.NotebookRuns(tmp_path)
    with pytest.raises(NotebookFailed, match='silent for 600 s$'):
        runs.run('14_real_model')
    with pytest.raises(NotebookFailed, match=r'silent for 600 s \(failed earlier in this session; not executed again'):
        runs.results('14_real_model')
    assert len(calls) == 1
    with pytest.raises(NotebookFailed):
        runs.run('14_real_model', seed=1)  # other parameters: another execution
    assert len(calls) == 2
