"""The make clock: the runner's notebook lines, the record a timed `make` leaves, and the README paragraph it renders."""
import json
import subprocess
import sys

import pytest

from agentrl.paths import README
from machinery import make_clock
from machinery.readme_blocks import between_markers


def events(trained, loaded):
    """Run events as agentrl.progress reports them: a trained run carries its seconds."""
    return ([dict(run=f't{i}', seconds=1.0) for i in range(trained)] + [dict(run=f'l{i}') for i in range(loaded)])


def test_the_runner_writes_nothing_unless_asked(tmp_path):
    make_clock.note_notebook('notebooks/07_x.ipynb', 3.0, events(1, 1), environ={})
    assert list(tmp_path.iterdir()) == []


def test_the_runner_appends_one_line_per_notebook_counting_a_run_trained_then_loaded_as_trained(tmp_path):
    times = tmp_path / 'times.jsonl'
    environ = {make_clock.TIMES_VARIABLE: str(times)}
    make_clock.note_notebook('notebooks/07_x.ipynb', 12.345, events(2, 3) + [dict(run='t0')], environ=environ)
    make_clock.note_notebook('notebooks/08_y.ipynb', 1.0, [], environ=environ)
    assert make_clock.read_lines(times) == [dict(notebook='07_x', seconds=12.3, trained=2, loaded=3),
                                            dict(notebook='08_y', seconds=1.0, trained=0, loaded=0)]


@pytest.mark.parametrize('seconds, said', [(4.4, '4 s'), (59.4, '59 s'), (120.4, '2 min 00 s'),
                                           (431, '7 min 11 s'), (3725, '1 h 02 min'), (7170, '2 h 00 min')])
def test_times_are_spoken_as_the_readme_writes_them(seconds, said):
    assert make_clock.spoken(seconds) == said


def git_repo(path):
    for args in (['init', '-q'], ['config', 'user.email', 'a@b'], ['config', 'user.name', 'a'],
                 ['commit', '-q', '--allow-empty', '-m', 'start']):
        subprocess.run(['git', *args], cwd=path, check=True)
    return path


def stand_in_make(lines, status=0, dirty=None):
    """A stand-in for subprocess.run(['make', ...]): it appends the runner's lines where the clock asked for them."""
    def run(command, cwd, env):
        assert command[0] == 'make'
        for line in lines:
            make_clock.note_notebook(line[0], line[1], events(*line[2:]), environ=env)
        if dirty:
            (cwd / dirty).write_text('x')
        return subprocess.CompletedProcess(command, status)
    return run


def test_a_timed_make_records_its_total_its_notebooks_and_a_clean_tree(tmp_path):
    repo = git_repo(tmp_path)
    ticks = iter([100.0, 250.5])
    entry = make_clock.measure('second', repo=repo, run=stand_in_make([('nb/07_a.ipynb', 80.0, 0, 70),
                                                                        ('nb/14_b.ipynb', 60.0, 0, 0)]),
                               clock=lambda: next(ticks))
    assert entry['seconds'] == 150.5 and entry['kind'] == 'second'
    assert [n['notebook'] for n in entry['notebooks']] == ['07_a', '14_b']
    assert entry['clean_before'] and entry['changed_after'] == []
    lines = make_clock.second_make_lines(make_clock.save(entry, tmp_path / 'times.json'))
    assert '(70 run loads from the run cache over the notebooks, no run trained) took 2 min 30 s' in lines[0]
    assert 'notebook 07, the longest, took 1 min 20 s' in lines[0] and 'left `git status` clean' in lines[0]


def test_a_make_that_dirties_the_tree_says_so_and_one_that_fails_records_nothing(tmp_path):
    repo = git_repo(tmp_path)
    ticks = iter([0.0, 10.0])
    entry = make_clock.measure('second', repo=repo, run=stand_in_make([], dirty='stray.txt'), clock=lambda: next(ticks))
    assert entry['changed_after'] == ['?? stray.txt']
    assert 'changed 1 path in `git status`' in make_clock.second_make_lines({'second': entry})[0]
    record = tmp_path / 'times.json'
    with pytest.raises(RuntimeError, match='status 2'):
        make_clock.measure('second', repo=repo, run=stand_in_make([], status=2), clock=lambda: 0.0)
    assert not record.exists()
    with pytest.raises(ValueError, match='fresh, second'):
        make_clock.measure('third', repo=repo)


def test_saving_one_kind_keeps_the_other(tmp_path):
    record = tmp_path / 'times.json'
    make_clock.save(dict(kind='fresh', seconds=1.0), record)
    make_clock.save(dict(kind='second', seconds=2.0), record)
    assert set(json.loads(record.read_text())) == {'fresh', 'second'}


def test_the_readme_paragraph_is_the_one_the_committed_record_renders():
    block = between_markers(README.read_text(encoding='utf-8'), make_clock.BEGIN, make_clock.END)
    assert block is not None, 'README.md lacks the second-make markers'
    assert block == make_clock.second_make_lines(make_clock.load()), 'run `make report` after timing a make'


def test_the_command_refuses_an_unknown_kind():
    done = subprocess.run([sys.executable, '-m', 'machinery.make_clock', 'third'], capture_output=True, text=True)
    assert done.returncode == 2 and "invalid choice: 'third'" in done.stderr
