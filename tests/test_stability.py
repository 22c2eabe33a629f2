"""Verdicts judged on two arithmetic streams (agentrl/ch10/stability.py) and the rule chosen between them."""
import json

import pytest

from agentrl.ch10 import claims, stability
from machinery import verdict_rule


def stream(short, held, seeds=(0, 1, 2, 3, 4)):
    return dict(short=short, label=f'the {short} stream', cpu='X', arithmetic='Y', seeds=list(seeds), held=held)


def verdict(key, held):
    return dict(key=key, kind='mechanism', text=f'claim {key}', seeds=list(range(len(held))), held=held,
                held_on=sum(held), verdict=claims.seed_rule(sum(held), len(held)))


T, F = True, False


def test_a_verdict_that_keeps_its_word_is_stable_and_one_that_moves_is_fragile_with_both_counts():
    now = [verdict('a', [T, T, T, F, F]), verdict('b', [T, T, F, F, F]), verdict('c', [T] * 5)]
    other = stream('other', {'a': [T, T, T, T, F], 'b': [T, T, T, F, F]})
    rows = stability.stability(now, [other])
    assert [r['label'] for r in rows] == [stability.STABLE, stability.FRAGILE, stability.STABLE]
    assert rows[2]['others'] == []  # the other stream did not record claim c
    assert stability.fragile_phrase(rows[1]) == 'fragile: the bare check does not hold, 2/5 here; holds, 3/5 on other'
    assert stability.fragile_phrase(rows[0]) == ''
    assert stability.stability_summary(rows).startswith(
        'By their bare checks (the tie set aside, as the other streams recorded only those), 1 of 2 claims get the same '
        'word on these runs and on the 1 other arithmetic stream recorded; 1 is fragile: claim b')


def test_a_stream_on_other_seeds_is_not_compared():
    rows = stability.stability([verdict('a', [T, T, T, F, F])], [stream('other', {'a': [F] * 5}, seeds=range(5, 10))])
    assert rows[0]['others'] == [] and rows[0]['label'] == stability.STABLE
    assert 'not measured here' in stability.stability_summary(rows)


def test_the_markdown_table_has_a_column_per_stream_and_a_legend():
    now = [verdict('a', [T, T, T, F, F])]
    text = stability.stability_markdown(stability.stability(now, [stream('one', {'a': [T] * 5})]),
                                        [stream('one', {'a': [T] * 5})])
    assert '| claim (bare check) | these runs | one | |' in text
    assert '| claim a | holds, 3/5 | holds, 5/5 | stable |' in text
    assert '- *one*: the one stream; Y.' in text


def test_moved_counts_words_not_counts():
    first = stream('a', {'x': [T, T, T, F, F], 'y': [T, F, F, F, F]})
    second = stream('b', {'x': [T, T, T, T, F], 'y': [F] * 5})
    assert stability.moved(claims.seed_rule, first, second) == []
    four_of_five = stability.CANDIDATE_RULES['4 of 5'][1]
    assert stability.moved(four_of_five, first, second) == ['x']


def test_a_malformed_stream_is_refused(tmp_path):
    path = tmp_path / 's.json'
    path.write_text(json.dumps(dict(stream('a', {'x': [T, T]}))))
    with pytest.raises(ValueError, match="claim 'x' needs one true/false per seed"):
        stability.load_stream(path)
    path.write_text(json.dumps({'label': 'a'}))
    with pytest.raises(ValueError, match='missing'):
        stability.load_stream(path)


def test_the_committed_rule_record_is_what_the_recorded_streams_give():
    """reports/verdict-rule.md is recomputed from data/streams/, and the rule it chose is the one claims uses."""
    streams = stability.recorded_streams()[:2]
    assert verdict_rule.RECORD.read_text(encoding='utf-8') == '\n'.join(verdict_rule.record_lines(*streams)) + '\n'
    chosen = verdict_rule.choose(stability.rule_comparison(*streams))
    assert stability.CANDIDATE_RULES[chosen][1] is claims.seed_rule


def test_a_one_word_verdict_is_compared_word_for_word():
    others = [stream('a', {}) | {'words': {'law': 'not supported'}}, stream('b', {})]
    row = stability.word_stability('law', 'the law', 'mixed', others)
    assert row['label'] == stability.FRAGILE and row['others'] == [['a', 'not supported', None, None]]
    assert stability.fragile_phrase(row) == 'fragile: mixed here; not supported on a'
    assert stability.word_stability('law', 'the law', 'not supported', others)['label'] == stability.STABLE


def test_the_committed_judgement_of_the_rule_is_what_the_committed_results_give():
    expected = verdict_rule.judged_lines(verdict_rule.committed_stream(), stability.recorded_streams())
    assert verdict_rule.JUDGED.read_text(encoding='utf-8') == '\n'.join(expected) + '\n'
