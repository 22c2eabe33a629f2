"""Notebooks as tests: the chapter's printed lines, committed outputs equal to a fresh run, seeds, figures."""
import re
from pathlib import Path

import nbformat
import pytest
import torch

from agentrl.notebook_runner import NotebookFailed, execute_notebook, main
from conftest import NOTEBOOKS, REPO, chapter_outputs, stream_lines

EXACT_SECTIONS = {'10.1': '01_bandit_closed_form', '10.2': '02_estimator_moments', '10.3': '03_loss_gradients',
                  '10.4': '04_reward_vs_loss', '10.5': '05_forward_reverse'}
ALL_NOTEBOOKS = sorted(p.stem for p in NOTEBOOKS.glob('[0-9][0-9]_*.ipynb'))
NUMBER = re.compile(r'[-+]?\d+\.\d+(?:e[-+]?\d+)?')


def numbers(line):
    """The decimal numbers printed on a line, with their printed precision: [(value, unit of last digit)]."""
    found = []
    for text in NUMBER.findall(line):
        mantissa = text.split('e')[0]
        unit = 10.0 ** -len(mantissa.split('.')[1])
        if 'e' in text:
            unit *= 10.0 ** int(text.split('e')[1])
        found.append((float(text), unit))
    return found


def assert_line_matches(line, expected, label):
    """Every number printed on the line equals the independently computed one to within its last printed digit."""
    printed = numbers(line)
    assert len(printed) == len(expected), f'{label}: expected {len(expected)} numbers in {line!r}'
    for (value, unit), want in zip(printed, expected):
        assert abs(value - want) <= 0.6 * unit + 1e-12, f'{label}: printed {value} but computed {want:.6g} in {line!r}'


def code_outputs(nb):
    """Per code cell: the text of its stream outputs and of its text/plain, text/html and SVG results."""
    cells = []
    for cell in nb.cells:
        if cell.cell_type != 'code':
            continue
        parts = []
        for out in cell.outputs:
            if out.output_type == 'stream':
                parts.append((out.name, out.text))
            elif out.output_type in ('execute_result', 'display_data'):
                data = out.get('data', {})
                parts.extend((mime, data[mime]) for mime in ('text/plain', 'text/html', 'image/svg+xml') if mime in data)
            elif out.output_type == 'error':
                parts.append(('error', f'{out.ename}: {out.evalue}'))
        cells.append(parts)
    return cells


@pytest.mark.parametrize('section', sorted(EXACT_SECTIONS))
def test_every_chapter_line_is_printed(section, notebook_runs):
    expected = chapter_outputs()[section]
    assert expected, f'no output lines found for section {section} in the chapter'
    printed = set(stream_lines(notebook_runs.run(EXACT_SECTIONS[section])))
    missing = [line for line in expected if line not in printed]
    assert not missing, f'{EXACT_SECTIONS[section]} does not print these lines of section {section}: {missing}'


@pytest.mark.parametrize('name', ALL_NOTEBOOKS)
def test_committed_outputs_equal_a_fresh_run(name, notebook_runs):
    committed = nbformat.read(NOTEBOOKS / f'{name}.ipynb', as_version=4)
    fresh = notebook_runs.run(name)
    assert [c.source for c in committed.cells] == [c.source for c in fresh.cells]
    assert code_outputs(committed) == code_outputs(fresh), f'{name}: committed outputs differ from a fresh run'
    assert fresh.metadata.get('papermill') is None
    for cell in fresh.cells:
        assert not {'papermill', 'execution'} & set(cell.metadata), f'{name}: volatile metadata left in a cell'


def test_regenerated_figures_are_byte_identical(notebook_runs, figures_tmp):
    for name in ALL_NOTEBOOKS:
        notebook_runs.run(name)
    made = sorted(figures_tmp.glob('*.svg'))
    assert {p.name for p in made} >= {'ch10-bandit-tilt.svg', 'ch10-kl-estimators.svg', 'ch10-forward-reverse.svg'}
    for path in made:
        committed = REPO / 'figures' / path.name
        assert committed.is_file(), f'{path.name} is generated but not committed'
        assert path.read_bytes() == committed.read_bytes(), f'{path.name} differs from the committed figure'


def test_parameters_cell_comes_first_and_holds_the_seed():
    for name in ALL_NOTEBOOKS:
        code = [c for c in nbformat.read(NOTEBOOKS / f'{name}.ipynb', as_version=4).cells if c.cell_type == 'code']
        assert 'parameters' in code[0].metadata.get('tags', []), f'{name}: first code cell is not tagged parameters'
        assert re.match(r'seed = 0\b', code[0].source), f'{name}: the parameters cell does not start with seed = 0'


# --- seed 1: the notebooks rerun on fresh draws and agree with an independent float64 computation ---------------

def test_estimator_moments_with_seed_1(notebook_runs):
    lines = [l for l in stream_lines(notebook_runs.run('02_estimator_moments', seed=1)) if l.startswith('KL ')]
    torch.manual_seed(1)
    logp = torch.log_softmax(torch.randn(50).double(), -1)
    noise = torch.randn(50).double()
    assert len(lines) == 4
    for line, scale in zip(lines, [0.05, 0.3, 1.0, 2.0]):
        ref = torch.log_softmax(logp + scale * noise, -1)
        p, l = logp.exp(), ref - logp
        kl = (p * -l).sum().item()
        expected = [kl]
        for k in [-l, l ** 2 / 2, torch.exp(l) - 1 - l]:
            mean = (p * k).sum()
            expected += [mean.item() / kl, (p * (k - mean) ** 2).sum().sqrt().item() / kl]  # mean/KL, std/KL
        assert_line_matches(line, expected, f'02 seed 1 scale {scale}')


def softmax_kl_grads(theta, ref_logp):
    """Reverse- and forward-KL gradients with respect to softmax logits, by their closed forms, float64."""
    logp = torch.log_softmax(theta, -1)
    p, q = logp.exp(), ref_logp.exp()
    return p * (logp - ref_logp - (p * (logp - ref_logp)).sum()), p - q


def test_loss_gradients_with_seed_1(notebook_runs):
    lines = stream_lines(notebook_runs.run('03_loss_gradients', seed=1))
    torch.manual_seed(1)
    theta = torch.randn(6).double()
    ref = torch.log_softmax(torch.randn(6).double(), -1)
    noise = torch.randn(6).double()
    reverse, forward = softmax_kl_grads(theta, ref)
    rel = lambda g, t: ((g - t).norm() / t.norm()).item()
    grads = {'k1': torch.zeros(6, dtype=torch.float64), 'k2': reverse, 'k3': forward, 'k3+': reverse}
    rows = [l for l in lines if re.match(r'k[123]\+? \| \|E grad\|', l)]
    assert [r.split()[0] for r in rows] == ['k1', 'k2', 'k3', 'k3+']
    for row, (kind, g) in zip(rows, grads.items()):
        assert_line_matches(row, [g.norm().item(), rel(g, reverse), rel(g, forward)], f'03 seed 1 {kind}')
    rows = [l for l in lines if 'gradient error vs reverse KL' in l]
    assert len(rows) == 4
    for row, scale in zip(rows, [0.1, 0.5, 1.0, 2.0]):
        ref = torch.log_softmax(theta + scale * noise, -1)
        logp = torch.log_softmax(theta, -1)
        reverse, forward = softmax_kl_grads(theta, ref)
        assert_line_matches(row, [(logp.exp() * (logp - ref)).sum().item(), 0.0, rel(forward, reverse), 0.0],
                            f'03 seed 1 scale {scale}')


def test_reward_vs_loss_with_seed_1(notebook_runs):
    lines = stream_lines(notebook_runs.run('04_reward_vs_loss', seed=1))
    torch.manual_seed(1)
    V = 4
    first, second = torch.randn(V).double(), torch.randn(V, V).double()
    ref1, ref2 = torch.log_softmax(torch.randn(V).double(), -1), torch.log_softmax(torch.randn(V, V).double(), -1)
    lp1, lp2 = torch.log_softmax(first, -1), torch.log_softmax(second, -1)  # [V], [V, V]
    p1, p2 = lp1.exp(), lp2.exp()
    # exact gradient of the sequence KL by autograd over an explicit double loop
    f, s = first.clone().requires_grad_(True), second.clone().requires_grad_(True)
    total = 0
    for a in range(V):
        for b in range(V):
            logp = torch.log_softmax(f, -1)[a] + torch.log_softmax(s[a], -1)[b]
            total = total + logp.exp() * (logp - ref1[a] - ref2[a, b])
    exact = torch.autograd.grad(total, [f, s])
    eye = torch.eye(V, dtype=torch.float64)

    def placement(c1, c2):
        """Expected gradient when token t's score is weighted by c_t (first: [V, V] by sequence; second: [V, V])."""
        g1 = sum(p1[a] * p2[a, b] * c1[a, b] * (eye[a] - p1) for a in range(V) for b in range(V))
        g2 = torch.stack([p1[a] * sum(p2[a, b] * c2[a, b] * (eye[b] - p2[a]) for b in range(V)) for a in range(V)])
        return g1, g2

    l1, l2 = (ref1 - lp1)[:, None].expand(V, V), ref2 - lp2  # l = log ref - log pi per token
    cases = {'k1': (0 * l1, 0 * l2), 'k2': (-l1, -l2), 'k3': (1 - l1.exp(), 1 - l2.exp()),
             'reward': (-(l1 + l2), -l2)}  # reward: reward-to-go of k1 = -l
    rel = lambda g, t: ((g - t).norm() / t.norm()).item()
    rows = [l for l in lines if 'error on first-token logits' in l]
    assert [r.split()[0] for r in rows] == list(cases)
    for row, (mode, (c1, c2)) in zip(rows, cases.items()):
        g1, g2 = placement(c1, c2)
        assert_line_matches(row, [rel(g1, exact[0]), rel(g2, exact[1])], f'04 seed 1 {mode}')


# --- the runner ------------------------------------------------------------------------------------------------

def write_notebook(path, sources):
    """A small notebook with the given code cells."""
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(s) for s in sources])
    for i, cell in enumerate(nb.cells):
        cell['id'] = f'c{i}'
    nb.metadata['kernelspec'] = {'name': 'agentrl-ch10', 'display_name': 'Python (agentrl ch10)', 'language': 'python'}
    nbformat.write(nb, path)


def test_a_failing_notebook_leaves_the_committed_one_untouched(tmp_path, capsys):
    good = tmp_path / 'good.ipynb'
    write_notebook(good, ['print("fine")'])
    before = good.read_bytes()
    write_notebook(tmp_path / 'bad.ipynb', ['x = 1', 'raise ValueError("broken on purpose")'])
    with pytest.raises(NotebookFailed, match=r'bad\.ipynb: cell 1 .*ValueError: broken on purpose'):
        execute_notebook(tmp_path / 'bad.ipynb', good)
    assert good.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ['bad.ipynb', 'good.ipynb']  # no temp file left
    assert main([str(tmp_path / 'bad.ipynb')]) == 1
    assert 'bad.ipynb: cell 1' in capsys.readouterr().err


def test_the_committed_report_is_the_one_the_notebooks_give():
    from agentrl.report import build_report

    assert (REPO / 'REPRODUCTION.md').read_text(encoding='utf-8') == build_report(), \
        'REPRODUCTION.md is stale: run `make report`'


def test_split_stream_outputs_are_joined():
    from agentrl.notebook_runner import coalesce_streams

    out = [nbformat.v4.new_output('stream', name='stdout', text='a'), nbformat.v4.new_output('stream', name='stdout', text='\n'),
           nbformat.v4.new_output('stream', name='stderr', text='w'), nbformat.v4.new_output('stream', name='stdout', text='b')]
    joined = coalesce_streams(out)
    assert [(o.name, o.text) for o in joined] == [('stdout', 'a\n'), ('stderr', 'w'), ('stdout', 'b')]


def test_the_report_sets_the_seed_table_beside_the_book_and_seed_0():
    from agentrl.report import build_report

    text = build_report()
    table = text.split('### Table 1 across seeds', 1)[1].split('###', 1)[0]
    rows = [line for line in table.splitlines() if line.startswith('| ')][1:]  # after the header
    sources = [row.split(' | ')[1] for row in rows]
    assert sources == ['book', 'ours, seed 0', 'ours, 3 seeds (0, 1, 2)'] * 9
    assert 'missing' not in table
    claims = text.split('## 10.7', 1)[1].split('## 10.8', 1)[0]
    assert claims.count(' — across seeds: held on ') >= 14  # every claim of notebook 07 with its seed verdict
    assert claims.count('seeds (survives)') + claims.count('seeds (seed-dependent)') + \
        claims.count('seeds (does not survive)') >= 17  # ... and the three re-checks at twice the scale
