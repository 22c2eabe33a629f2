"""A recorded arithmetic probe as text (data/arithmetic/*.txt): '# key: value' lines, one '<16 hex digits>  <operation>'
line per row, and a digest over the rows. machinery/arithmetic.py computes the rows; this module reads and writes them.
"""
import hashlib
from pathlib import Path


def digest(rows):
    """16 hex digits naming the whole arithmetic: SHA-256 over every row."""
    return hashlib.sha256(''.join(f'{name}\0{value}\n' for name, value in rows).encode()).hexdigest()[:16]


def render(rows, about):
    """The text of a recorded probe: '# key: value' lines, then 'fingerprint  operation' per row, then the digest."""
    head = [f'# {key}: {value}' for key, value in about.items()]
    return '\n'.join(head + [f'{value}  {name}' for name, value in rows] + [f'# digest: {digest(rows)}']) + '\n'


def read(path):
    """(rows, about) from a recorded probe; a file that is not one is refused with what was expected."""
    return parse(Path(path).read_text(encoding='utf-8'), path)


def parse(text, path):
    """(rows, about) from a probe's text; path names it in errors."""
    rows, about = [], {}
    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith('# ') and ': ' in line:
            key, value = line[2:].split(': ', 1)
            about[key] = value
        elif len(line) > 18 and line[16:18] == '  ' and all(c in '0123456789abcdef' for c in line[:16]):
            rows.append((line[18:], line[:16]))
        elif line.strip():
            raise ValueError(f'{path}:{number}: expected "# key: value" or "<16 hex digits>  <operation>", '
                             f'got {line!r}')
    if not rows:
        raise ValueError(f'{path}: no probe rows in it')
    if about.get('digest') not in (None, digest(rows)):
        raise ValueError(f'{path}: its rows do not give its recorded digest {about["digest"]}: edited or truncated')
    return rows, about


def differing(rows, reference):
    """The operations whose fingerprints differ between two row lists, or that only one of them has."""
    mine, theirs = dict(rows), dict(reference)
    return [name for name in list(theirs) + [n for n in mine if n not in theirs] if mine.get(name) != theirs.get(name)]
