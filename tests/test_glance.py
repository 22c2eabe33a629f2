"""The claims at a glance (agentrl.ch10.glance): the table REPRODUCTION.md and README.md show is the one the committed
records give, the fitted mark follows each claim's `needs`, across.py's 'robust' is split into two words, and a
verdict changed in a record changes the table."""
import copy
import json
import re

import pytest

from agentrl import chapter, results
from agentrl.ch10 import across, claims, glance
from agentrl.paths import README, REPRODUCTION, RESULTS
from machinery.recorded import Recorded
from machinery.report import glance_lines, write_glance


def committed_records():
    """{notebook stem: its committed results}, as the report reads them."""
    return Recorded(RESULTS).data


def test_reproduction_holds_the_table_computed_from_the_records():
    text = REPRODUCTION.read_text(encoding='utf-8')
    title = text.split('\n\n')[:2]  # '# Reproduction report' and its paragraph
    assert title[0] == '# Reproduction report'
    lines = glance.markdown(glance.glance_rows(committed_records()))
    after_title = '\n\n'.join(title) + '\n\n' + '\n'.join(lines) + '\n'
    assert text.startswith(after_title), 'REPRODUCTION.md\'s first screen is stale: run `make report`'


def test_every_recorded_claim_has_a_row():
    rows = glance.glance_rows(committed_records())
    keys = [r['key'] for r in rows]
    five = results.load(chapter.SEED_NOTEBOOK, RESULTS)
    recorded = {v['key'] for k in (chapter.SEED_VERDICTS_KEY, chapter.SCALE_VERDICTS_KEY) for v in five[k]}
    assert set(keys) == recorded | {glance.CLIP_HIGHER_KEY}
    assert len(keys) == len(set(keys))
    assert [r['section'] for r in rows] == sorted(r['section'] for r in rows)


def test_a_claim_reading_only_none_is_marked_and_one_reading_a_regularised_run_is_not():
    assert claims.by_key('collapse').needs == ('none',)
    assert claims.by_key('collapse-misses-tasks').needs == ('none',)
    rows = {r['key']: r for r in glance.glance_rows(committed_records())}
    assert rows['collapse']['fitted'] and rows['collapse-misses-tasks']['fitted']
    for key in ('kl-ordering', 'kl-costs-pass1', glance.CLIP_HIGHER_KEY):  # these read held-out runs
        assert not rows[key]['fitted'], key
    assert {k for k, r in rows.items() if r['fitted']} == {c.key for c in claims.CLAIMS if set(c.needs) <= {'none'}}


def test_robust_is_split_into_holds_and_fails_on_every_substrate():
    cells = lambda *words: {f's{i}': dict(held_on=0, seeds=5, verdict=w) for i, w in enumerate(words)}  # noqa: E731
    assert glance.substrate_words(dict(cells=cells(claims.HOLDS, claims.HOLDS))) == glance.HOLDS_EVERYWHERE
    assert glance.substrate_words(dict(cells=cells(claims.TIED))) == 'tied (the one substrate swept)'
    assert glance.substrate_words(dict(cells=cells(claims.DOES_NOT_HOLD, claims.DOES_NOT_HOLD))) == \
        glance.FAILS_EVERYWHERE
    assert glance.substrate_words(dict(cells=cells(claims.HOLDS, claims.DOES_NOT_HOLD))).startswith(
        'substrate-dependent')
    rows = {r['key']: r for r in glance.glance_rows(committed_records())}
    swept = {r['key']: r for r in committed_records()[chapter.ACROSS_NOTEBOOK][chapter.CLAIM_TABLE_KEY]}
    for key, row in rows.items():
        if key in swept:
            assert row['substrates'] == glance.substrate_words(swept[key]), key
    table = '\n'.join(glance.markdown(list(rows.values())))
    assert across.ROBUST not in table


def test_fragile_comes_from_the_other_arithmetic_streams():
    stable = {r['key']: r['label'] for r in results.load(chapter.SEED_NOTEBOOK, RESULTS)[chapter.STABILITY_KEY]}
    for row in glance.glance_rows(committed_records()):
        assert (row['seeds']['word'] == 'fragile') == (stable.get(row['key']) == 'fragile'), row['key']


def test_a_verdict_changed_in_a_record_changes_the_table():
    records = copy.deepcopy(committed_records())
    before = glance.markdown(glance.glance_rows(records))
    five = next(v for v in records[chapter.SEED_NOTEBOOK][chapter.SEED_VERDICTS_KEY] if v['key'] == 'kl-ordering')
    five.update(held=[False] * 5, outcomes=[claims.DOES_NOT_HOLD] * 5, held_on=0, tied_on=0,
                verdict=claims.DOES_NOT_HOLD)
    row = next(r for r in records[chapter.ACROSS_NOTEBOOK][chapter.CLAIM_TABLE_KEY] if r['key'] == 'kl-ordering')
    row['cells']['t45'].update(held_on=0, verdict=claims.DOES_NOT_HOLD)
    changed = {r['key']: r for r in glance.glance_rows(records)}['kl-ordering']
    assert changed['seeds']['verdict'] == claims.DOES_NOT_HOLD and changed['seeds_text'].endswith('0 of 5 seeds')
    assert changed['substrates'] == glance.substrate_words(row)
    assert glance.markdown(glance.glance_rows(records)) != before


def test_a_verdict_changed_in_a_results_file_makes_the_report_differ(tmp_path):
    for path in RESULTS.glob('*.json'):
        (tmp_path / path.name).write_text(path.read_text(encoding='utf-8'), encoding='utf-8')
    seed0 = json.loads((tmp_path / '07_tinyagent_comparison.json').read_text(encoding='utf-8'))
    flipped = next(v for v in seed0[chapter.VERDICTS_KEY] if v['key'] == 'kl-ordering')
    flipped['outcome'] = claims.TIED if claims.outcome_of(flipped) != claims.TIED else claims.HOLDS
    (tmp_path / '07_tinyagent_comparison.json').write_text(results.dumps(seed0), encoding='utf-8')
    assert glance_lines(Recorded(tmp_path)) != glance_lines(Recorded(RESULTS))


def test_the_readme_block_is_written_between_its_markers_and_missing_markers_raise(tmp_path):
    page = tmp_path / 'README.md'
    page.write_text(f'# Title\n\n{glance.CLAIMS_BEGIN}\nold\n{glance.CLAIMS_END}\n\nafter\n', encoding='utf-8')
    write_glance(page, Recorded(RESULTS))
    text = page.read_text(encoding='utf-8')
    assert text == ('# Title\n\n' + '\n'.join([glance.CLAIMS_BEGIN, *glance_lines(Recorded(RESULTS)),
                                                glance.CLAIMS_END]) + '\n\nafter\n')
    page.write_text('# Title without markers\n', encoding='utf-8')
    with pytest.raises(ValueError, match='lacks the markers'):
        write_glance(page, Recorded(RESULTS))


def test_the_readmes_count_of_exact_lines_is_the_reports():
    from machinery.recorded import exact_totals

    total, match = exact_totals(Recorded(RESULTS))
    readme = README.read_text(encoding='utf-8')
    counts = re.findall(r'\*\*(\d+) of (\d+) lines\*\*', readme)
    assert counts == [(str(match), str(total))], counts
