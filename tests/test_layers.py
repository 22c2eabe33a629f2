"""The package's layers: explicit imports, no cycles, each layer importing only from the layers below it; the
machinery beside the package, which agentrl never imports and notebooks never import."""
import ast
import re
from pathlib import Path

import pytest

from agentrl.fingerprint import TRAINING_MODULES, source_fingerprint

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / 'agentrl'
MACHINERY = REPO / 'machinery'
# rank of each part of the package: a module may import only from parts of lower or equal rank
RANK = {'paths': 0, 'atomic': 0, 'verified_cache': 0, 'progress': 0, 'fingerprint': 0, 'cpu': 0, 'plotting': 0, 'results': 0,
        'stopping': 0, 'executors': 0, 'run_times': 0, 'chapter': 0, 'side_runs': 0, 'prose': 0,
        'core': 1, 'substrate': 2, 'ch10': 3, 'pretrained': 3, 'calibration': 4, 'realrl': 4}


def modules():
    return sorted(p for p in PACKAGE.rglob('*.py'))


def part(module_name):
    """'agentrl.substrate.gym' -> 'substrate'; 'agentrl.paths' -> 'paths'."""
    return module_name.split('.')[1]


def imports_of(path, top='agentrl'):
    """The modules of package `top` that the file at `path` imports (anywhere in it, lazily too)."""
    tree = ast.parse(path.read_text())
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == top:  # from agentrl import results
            found += [f'{top}.{alias.name}' for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(top + '.'):
            found.append(node.module)
        elif isinstance(node, ast.Import):
            found += [alias.name for alias in node.names if alias.name == top or alias.name.startswith(top + '.')]
    return found


def name_of(path):
    return '.'.join(('agentrl',) + path.relative_to(PACKAGE).with_suffix('').parts).removesuffix('.__init__')


@pytest.mark.parametrize('path', [p for p in modules() if p.name != '__init__.py' or p.parent != PACKAGE],
                         ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_are_explicit_and_go_down_the_layers(path):
    tree = ast.parse(path.read_text())
    self_references = [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Name) and node.id == 'arl']
    assert not self_references, f'{path.name} uses arl. on lines {self_references}: use explicit imports'
    mine = part(name_of(path)) if '.' in name_of(path) else None
    for target in imports_of(path):
        assert target != 'agentrl', f'{path.name} imports the package root (a cycle)'
        assert RANK[part(target)] <= RANK[mine], f'{name_of(path)} ({mine}) imports {target} from a higher layer'


def test_there_is_no_import_cycle():
    graph = {name_of(p): [t for t in imports_of(p) if t != name_of(p)] for p in modules()}
    state = {}

    def visit(node, trail):
        if state.get(node) == 'done':
            return
        assert state.get(node) != 'open', 'import cycle: ' + ' -> '.join(trail + [node])
        state[node] = 'open'
        for nxt in graph.get(node, []):
            visit(nxt, trail + [node])
        state[node] = 'done'
    for node in graph:
        visit(node, [])


def test_no_module_reads_a_path_outside_the_repository():
    for path in modules():
        source = path.read_text()
        assert "'shared'" not in source and 'parents[2]' not in source, f'{path} reaches outside the repository'
        if path.name != 'paths.py':
            assert 'parents[' not in source and '__file__' not in source, f'{path}: paths belong in agentrl/paths.py'


def test_the_fingerprint_ignores_docstrings_and_comments_but_not_code():
    code = 'def f(x):\n    """Double x."""\n    return 2 * x  # twice\n'
    assert source_fingerprint(code) == source_fingerprint('def f(x):\n    """Twice x, in other words."""\n\n    return 2 * x\n')
    assert source_fingerprint(code) == source_fingerprint('def f(x):\n    return 2 * x\n')
    assert source_fingerprint(code) != source_fingerprint('def f(x):\n    """Double x."""\n    return 3 * x\n')
    assert source_fingerprint(code) != source_fingerprint('def f(y):\n    """Double x."""\n    return 2 * y\n')


def test_the_fingerprint_covers_every_module_training_depends_on():
    listed = set(TRAINING_MODULES)
    for relative in sorted(listed):  # whatever a fingerprinted module imports decides results too
        for module in imports_of(PACKAGE / relative):
            parts = module.split('.')[1:]
            if parts and parts[0] in ('core', 'substrate', 'ch10') and len(parts) == 2:
                assert f'{parts[0]}/{parts[1]}.py' in listed, (
                    f'{relative} imports {module}, which is not in the code fingerprint')
    for path in (PACKAGE / 'substrate').glob('*.py'):  # the substrate is training code through and through
        if path.name != '__init__.py':
            assert f'substrate/{path.name}' in listed, f'substrate/{path.name} is not in the code fingerprint'


def test_the_package_never_imports_the_machinery():
    for path in modules():
        assert not imports_of(path, 'machinery'), f'{path.relative_to(REPO)} imports the machinery'


def test_every_part_of_the_package_has_a_layer():
    parts = {part(name_of(path)) for path in modules() if '.' in name_of(path)}
    assert parts <= set(RANK), f'parts of agentrl with no layer in RANK: {sorted(parts - set(RANK))}'


def test_notebooks_import_the_package_only():
    import nbformat

    for path in sorted((REPO / 'notebooks').glob('*.ipynb')):
        for cell in nbformat.read(path, as_version=4).cells:
            if cell.cell_type == 'code':
                tree = ast.parse(cell.source)
                names = [alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names]
                names += [node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module]
                assert not [n for n in names if n.split('.')[0] == 'machinery'], f'{path.name} imports the machinery'



def test_the_maintainers_section_table_names_every_section_its_notebook_and_modules_that_exist():
    from agentrl import chapter

    text = (REPO / 'MAINTAINING.md').read_text()
    table = text.split("### Where each section's code lives", 1)[1].split('\n\n', 2)[1]
    rows = [line.split(' | ') for line in table.splitlines()[2:]]
    by_section = {row[0].lstrip('| ').split()[0]: row for row in rows}
    for section in chapter.SECTIONS:
        assert section.number in by_section, f'{section.number} has no row in the MAINTAINING.md section table'
        assert f'notebooks/{section.notebook}.ipynb' in by_section[section.number][1]
    for row in rows:
        for path in re.findall(r'`((?:agentrl|notebooks)/[^`]+)`', ' '.join(row[1:])):
            assert (REPO / path).exists(), f'the MAINTAINING.md section table names {path}, which does not exist'


def test_the_machinery_is_not_too_big_for_one_job_a_module():
    """A module of the machinery over 400 lines is a sign of several jobs in one file."""
    big = {p.relative_to(REPO).as_posix(): n for p in MACHINERY.rglob('*.py')
           if (n := len(p.read_text().splitlines())) > 400}
    assert not big, f'modules over 400 lines: {big}'


def test_what_make_runs_imports_nothing_only_the_tests_and_tools_install():
    """`make` installs requirements.txt alone: its steps must not import what requirements-dev.txt adds."""
    import subprocess
    import sys

    repo = Path(__file__).resolve().parents[1]
    pinned = {line.split('==')[0].strip().lower() for line in (repo / 'requirements-dev.txt').read_text().splitlines()}
    # the tools themselves; what they bring in (msgpack, click, ...) the notebooks' own packages may bring in too
    blocked = ['alembic', 'dask', 'distributed', 'hypothesis', 'libcst', 'mutmut', 'optuna', 'pytest', 'sqlalchemy',
               'textual']
    assert set(blocked) <= pinned
    script = ('import sys\n'
              f'BLOCKED = {blocked!r}\n'
              'class Refuse:\n'
              '    def find_spec(self, name, path=None, target=None):\n'
              '        if name.split(".")[0].lower() in BLOCKED:\n'
              '            raise ImportError(f"{name} is a test or tool requirement, not one of make\'s")\n'
              'sys.meta_path.insert(0, Refuse())\n'
              'import agentrl, machinery.notebook_runner, machinery.report, machinery.arithmetic, machinery.site\n')
    done = subprocess.run([sys.executable, '-c', script], cwd=repo, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
