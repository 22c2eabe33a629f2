"""The notebooks' results as data: one JSON file per notebook, results_dir()/<notebook>.json, written key by key.

A notebook records what it prints: each table (rows as a list of dicts), each block of lines that stands for one of
the book's output blocks (the printed strings, in order), each claim verdict, each seed summary. The report, the
claims and the tests read these files with `load`; nothing reads a notebook's printed text.

    results.record('07_tinyagent_comparison', 'comparison_rows', rows)
    results.show('07_tinyagent_comparison', 'comparison', lines)   # prints the lines and records the same list

Within one process (one execution of a notebook) records merge into the file. The first record a process makes for
a notebook starts the file afresh, so a key a notebook stops recording does not linger from an older run. Every
write is atomic (a temporary file renamed into place); the JSON has sorted keys and only plain values: dicts with
string keys, lists, strings, booleans, None, ints and finite floats (tensors and NumPy scalars are converted).
"""
import json
import math
import numbers
from pathlib import Path

from agentrl.atomic import atomic_output
from agentrl.paths import results_dir

_started = set()  # (folder, notebook) pairs this process has already written: later records merge
_MISSING = object()


def results_path(notebook, folder=None):
    """The file holding a notebook's results (notebook = file stem, e.g. '07_tinyagent_comparison')."""
    if not notebook or '/' in notebook or notebook.endswith('.ipynb'):
        raise ValueError(f'results are keyed by the notebook\'s file stem, like "07_tinyagent_comparison"; '
                         f'got {notebook!r}')
    return (results_dir() if folder is None else Path(folder)) / f'{notebook}.json'


def plain(value, where='value'):
    """value as plain JSON data: tuples become lists, tensors and NumPy numbers Python numbers; anything else raises."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        number = float(value)
        if not math.isfinite(number):
            raise ValueError(f'{where} is {number}: results hold finite numbers only')
        return number
    if isinstance(value, dict):
        converted = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise TypeError(f'{where} has a key {key!r} of type {type(key).__name__}; keys must be strings')
            converted[key] = plain(item, f'{where}[{key!r}]')
        return converted
    if isinstance(value, (list, tuple)):
        return [plain(item, f'{where}[{i}]') for i, item in enumerate(value)]
    if hasattr(value, 'tolist'):  # a torch tensor or a NumPy array / scalar
        return plain(value.tolist(), where)
    raise TypeError(f'{where} of type {type(value).__name__} cannot be stored as a result')


def dumps(data):
    """The file text of a results dict: sorted keys, one-space indent, UTF-8 kept readable, a final newline."""
    return json.dumps(data, sort_keys=True, indent=1, ensure_ascii=False, allow_nan=False) + '\n'


def load(notebook, folder=None, default=_MISSING):
    """A notebook's recorded results as a dict; `default` if the file does not exist (if given), else an error."""
    path = results_path(notebook, folder)
    if not path.is_file():
        if default is not _MISSING:
            return default
        raise FileNotFoundError(f'no results for {notebook} at {path}: execute notebooks/{notebook}.ipynb '
                                f'(make nb-{notebook})')
    return json.loads(path.read_text(encoding='utf-8'))


def record(notebook, key, value, folder=None):
    """Store value under key in the notebook's results file (atomically) -> the stored plain value."""
    if not isinstance(key, str) or not key:
        raise ValueError(f'a result key must be a non-empty string, got {key!r}')
    stored = plain(value, f'{notebook}: {key}')
    path = results_path(notebook, folder)
    path.parent.mkdir(parents=True, exist_ok=True)
    marker = (path.parent.resolve(), notebook)
    data = load(notebook, folder, default={}) if marker in _started else {}
    data[key] = stored
    with atomic_output(path, '.json') as tmp:
        tmp.write_text(dumps(data), encoding='utf-8')
    _started.add(marker)
    return stored


def show(notebook, key, lines, folder=None):
    """Print each line and record the same list of strings under key: what is printed is what is recorded."""
    lines = [str(line) for line in lines]
    for line in lines:
        print(line)
    record(notebook, key, lines, folder)
