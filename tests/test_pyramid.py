"""MAINTAINING.md's test table is the suite pytest collects, layer by layer, and every test file has one layer."""
import pytest

from agentrl.paths import MAINTAINING
from machinery import pyramid
from conftest import REPO


def test_the_maintainers_table_is_the_collected_suite():
    lines = pyramid.table(pyramid.counts(pyramid.collected()))
    assert pyramid.readme_block(MAINTAINING.read_text(encoding='utf-8')) == lines, \
        "MAINTAINING.md's test table disagrees with the collected tests: run `make pyramid`"


def test_every_file_a_layer_names_exists():
    named = [name for _, _, files in pyramid.LAYERS for name in files]
    assert sorted(named) == sorted(p.name for p in (REPO / 'tests').glob('test_*.py'))


def test_a_test_file_in_no_layer_stops_the_count():
    item = {'file': 'test_new.py', 'id': 'tests/test_new.py::test_x', 'marks': []}
    with pytest.raises(ValueError, match=r'tests in no layer: test_new\.py; add each to one of LAYERS'):
        pyramid.counts([item])


def test_each_test_counts_once_by_its_markers():
    items = [{'file': 'test_math_core.py', 'id': f'x{i}', 'marks': marks}
             for i, marks in enumerate([[], [], ['slow'], ['slow', 'snapshot']])]
    assert pyramid.counts(items)['math core'] == {'fast': 2, 'slow': 1, 'snapshot': 1}


def test_a_snapshot_test_must_also_be_slow():
    with pytest.raises(ValueError, match=r'x is marked snapshot but not slow'):
        pyramid.kind({'file': 'test_math_core.py', 'id': 'x', 'marks': ['snapshot']})


def test_the_table_goes_between_the_markers_and_nowhere_else():
    text = f'before\n{pyramid.PYRAMID_BEGIN}\nold\n{pyramid.PYRAMID_END}\nafter\n'
    assert pyramid.with_table(text, ['new']) == f'before\n{pyramid.PYRAMID_BEGIN}\nnew\n{pyramid.PYRAMID_END}\nafter\n'
    with pytest.raises(ValueError, match='MAINTAINING.md lacks the markers'):
        pyramid.with_table('no markers', ['new'])
