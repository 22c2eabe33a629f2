"""The frameworks' option files (data/frameworks/*.toml): they load, they are checked, and what they name exists."""
import ast
import importlib
import inspect
import re

import pytest

from agentrl.ch10.framework_map import (FRAMEWORKS_DIR, TOPICS, load_frameworks, markdown_entries, markdown_table,
                                        marked_prose, option_rows)
from agentrl.paths import REPO

FRAMEWORK_NAMES = {'verl', 'slime', 'TRL', 'OpenRLHF', 'NeMo-RL', 'ms-swift'}


@pytest.fixture(scope='module')
def frameworks():
    return load_frameworks()


def all_options(frameworks):
    return [(f['framework']['name'], o) for f in frameworks for o in f['options']]


def test_the_six_framework_files_load_sorted_by_name(frameworks):
    assert len(list(FRAMEWORKS_DIR.glob('*.toml'))) == 6
    names = [f['framework']['name'] for f in frameworks]
    assert set(names) == FRAMEWORK_NAMES
    assert names == sorted(names, key=str.lower)
    assert all(f['options'] for f in frameworks)


def test_every_framework_has_a_full_commit_and_a_version(frameworks):
    for entry in frameworks:
        head = entry['framework']
        assert re.fullmatch(r'[0-9a-f]{40}', head['commit']), head['name']
        assert head['version'].strip(), head['name']


def test_every_topic_is_covered_and_every_option_has_ours_and_checked_by(frameworks):
    options = all_options(frameworks)
    assert {o['topic'] for _, o in options} == set(TOPICS)
    for name, option in options:
        assert 'ours' in option and 'checked_by' in option, (name, option['name'])
        assert bool(option['ours']) == bool(option['checked_by']), (name, option['name'])
        if not option['ours']:  # an option with no counterpart says why
            assert option.get('ours_note', '').strip(), (name, option['name'])


def test_every_ours_path_imports_and_is_callable_or_a_class(frameworks):
    paths = {o['ours'] for _, o in all_options(frameworks) if o['ours']}
    assert paths  # the files do map something
    for path in sorted(paths):
        module_name, attribute = path.rsplit('.', 1)
        target = getattr(importlib.import_module(module_name), attribute)  # AttributeError names a bad path
        assert inspect.isclass(target) or callable(target), path


def test_every_checked_by_names_a_top_level_test_of_its_file(frameworks):
    node_ids = {o['checked_by'] for _, o in all_options(frameworks) if o['checked_by']}
    for node_id in sorted(node_ids):
        file, function = node_id.split('::')
        path = REPO / file
        assert path.is_file(), node_id
        tree = ast.parse(path.read_text(encoding='utf-8'))
        tops = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
        assert function in tops, node_id
        assert function.startswith('test'), node_id


FRAMEWORK_TABLE = '''[framework]
name = "{name}"
repo = "someone/toy"
commit = "{commit}"
commit_date = "2026-01-01"
version = "1.0"
'''

OPTION_LINES = {
    'name': '"--toy-coef"', 'default': '"0.1"', 'defined_in': '"toy/args.py:1"', 'computed_in': '"toy/loss.py:2"',
    'topic': '"KL placement"', 'values': '[]', 'computes': '"beta times a KL"',
    'ours': '"agentrl.substrate.grpo.ReferenceKL"',
    'checked_by': '"tests/test_mechanisms.py::test_the_kl_term_in_the_loss_estimates_kl_of_the_policy_from_the_reference"',
}


def write_toy(folder, commit='0123456789abcdef0123456789abcdef01234567', name='toy', file='toy.toml', options=1,
              **changes):
    """A framework file in folder with `options` copies of one option; changes: field -> TOML value text, or None
    to leave the field out."""
    lines = {**OPTION_LINES, **changes}
    body = '\n'.join(f'{key} = {value}' for key, value in lines.items() if value is not None)
    path = folder / file
    path.write_text(FRAMEWORK_TABLE.format(commit=commit, name=name) + ('\n[[option]]\n' + body + '\n') * options)
    return path


def test_a_valid_toy_file_loads(tmp_path):
    write_toy(tmp_path)
    (entry,) = load_frameworks(tmp_path)
    assert entry['framework']['name'] == 'toy' and entry['options'][0]['name'] == '--toy-coef'


def test_frameworks_are_sorted_by_name_whatever_their_file_names(tmp_path):
    write_toy(tmp_path, name='Zeta', file='a.toml')
    write_toy(tmp_path, name='alpha', file='b.toml')
    assert [f['framework']['name'] for f in load_frameworks(tmp_path)] == ['alpha', 'Zeta']


def test_an_option_named_twice_or_a_framework_described_twice_is_refused(tmp_path):
    write_toy(tmp_path, options=2)
    with pytest.raises(ValueError, match='toy.toml.*--toy-coef.*twice'):
        load_frameworks(tmp_path)
    write_toy(tmp_path)
    write_toy(tmp_path, name='TOY', file='other.toml')
    with pytest.raises(ValueError, match='same framework'):
        load_frameworks(tmp_path)


@pytest.mark.parametrize('changes, says', [
    (dict(topic='"KL shape"'), 'topic'),
    (dict(computes=None), 'missing'),
    (dict(values='"k1"'), 'values'),
    (dict(default='0.1'), 'default'),
    (dict(ours='"ReferenceKL"'), 'dotted'),
    (dict(ours='""'), 'checked_by'),
    (dict(checked_by='""'), 'checked_by'),
    (dict(checked_by='"tests/test_mechanisms.py::test_x[1]"'), 'node id'),
    (dict(speed='"fast"'), 'unknown'),
    (dict(computes='"beta times $k_3"'), 'unclosed formula'),
    (dict(ours_note='"see `token_*"'), 'unclosed code span'),
    (dict(computes='"beta times $ k_3$"'), 'starts or ends with a space'),
])
def test_a_bad_option_is_refused_naming_the_file_and_the_option(tmp_path, changes, says):
    write_toy(tmp_path, **changes)
    with pytest.raises(ValueError, match=says) as refused:
        load_frameworks(tmp_path)
    assert 'toy.toml' in str(refused.value) and '--toy-coef' in str(refused.value)


@pytest.mark.parametrize('commit', ['0123456', '0123456789abcdef0123456789abcdef0123456z', ''])
def test_a_bad_commit_is_refused_naming_the_file(tmp_path, commit):
    write_toy(tmp_path, commit=commit)
    with pytest.raises(ValueError, match='toy.toml.*commit'):
        load_frameworks(tmp_path)


def test_broken_toml_is_refused_naming_the_file(tmp_path):
    (tmp_path / 'toy.toml').write_text('[framework\nname = "toy"\n')
    with pytest.raises(ValueError, match='toy.toml.*TOML'):
        load_frameworks(tmp_path)


def test_option_rows_follow_the_topics_then_the_frameworks_then_the_files(frameworks):
    rows = option_rows(frameworks)
    assert len(rows) == sum(len(f['options']) for f in frameworks)
    keys = [(TOPICS.index(r['topic']), r['framework'].lower()) for r in rows]
    assert keys == sorted(keys)
    assert all(len(r['commit']) == 7 for r in rows)
    for entry in frameworks:  # within one framework and topic, the file's order stays
        name = entry['framework']['name']
        for topic in TOPICS:
            in_file = [o['name'] for o in entry['options'] if o['topic'] == topic]
            assert [r['option'] for r in rows if r['framework'] == name and r['topic'] == topic] == in_file
    only = option_rows(frameworks, topic='entropy')
    assert only and {r['topic'] for r in only} == {'entropy'}
    assert only == [r for r in rows if r['topic'] == 'entropy']
    with pytest.raises(ValueError, match='topic'):
        option_rows(frameworks, topic='KL')


def test_markdown_table_escapes_bars_and_newlines():
    rows = [{'a': 'x | y', 'b': 'one\ntwo'}, {'a': 3}]
    assert markdown_table(rows, ['a', 'b']).split('\n') == [
        '| a | b |', '|---|---|', '| x \\| y | one two |', '| 3 |  |']


def test_markdown_entries_keep_the_datas_signs_literal():
    row = dict(framework='X', option='a.b', default='None', computes='loss = beta * agg(w*k) with pi_ref [1]',
               ours='', ours_note='', checked_by='', differs='')
    text = markdown_entries([row])
    assert 'beta \\* agg(w\\*k) with pi\\_ref [1]' in text and '*Here:* nothing.' in text
    assert 'differ' not in text
    mapped = markdown_entries([{**row, 'ours': 'agentrl.core.kl.kl_penalty', 'checked_by': 't.py::test_x',
                                'differs': 'docs say k2'}])
    assert '`agentrl.core.kl.kl_penalty`, checked by `t.py::test_x`' in mapped
    assert '*Code and documentation differ:* docs say k2' in mapped


def test_marked_prose_keeps_formulas_and_code_and_escapes_the_rest():
    text = r"loss = $\beta \cdot k_{3,t}$ over `token_*` modes, with pi_ref * 2 and a_b"
    assert marked_prose(text) == r"loss = $\beta \cdot k_{3,t}$ over `token_*` modes, with pi\_ref \* 2 and a\_b"
    row = dict(framework='X', option='a.b', default='None', computes=text, ours='', ours_note='', checked_by='',
               differs='')
    assert r'$\beta \cdot k_{3,t}$ over `token_*`' in markdown_entries([row])
