"""The RL frameworks' KL, entropy, aggregation, ratio and sampler options, mapped to this package's functions.

Each file of data/frameworks/ describes one framework at one commit: a [framework] table and one [[option]] per
option, with what the framework computes for it (written by reading its code), where that differs from its docs,
and `ours`: the function here that computes the same thing ("" when none does), with the test that checks it.
The prose fields (computes, ours_note, differs) write their formulas as TeX between dollar signs and may set code
between backticks; everything else in them is plain text.
This module reads and checks those files, and lays their options out as rows and Markdown tables.
"""
import re
import tomllib
from pathlib import Path

from agentrl.paths import REPO

FRAMEWORKS_DIR = REPO / 'data' / 'frameworks'
TOPICS = ('KL placement', 'KL estimator', 'KL off-policy correction', 'loss aggregation', 'advantage', 'entropy',
          'policy ratio', 'sampler correction')

FRAMEWORK_FIELDS = ('name', 'repo', 'commit', 'commit_date', 'version')
FRAMEWORK_OPTIONAL = ('not_run',)  # why the framework's code was not executed beside ours (machinery/differential)
REQUIRED_FIELDS = ('name', 'default', 'defined_in', 'computed_in', 'topic', 'values', 'computes', 'ours',
                   'checked_by')
# not_run: why the option's computation was not executed beside ours (make frameworks-test), when it has an ours;
# changed_later: what a release after the documented commit changed, naming that release
OPTIONAL_FIELDS = ('doc_says', 'differs', 'ours_note', 'not_run', 'changed_later')
PROSE_FIELDS = ('computes', 'ours_note', 'differs', 'not_run', 'changed_later')  # rendered by marked_prose
ROW_KEYS = ('framework', 'version', 'commit', 'option', 'default', 'topic', 'computes', 'ours', 'ours_note',
            'checked_by', 'differs', 'not_run', 'changed_later')

_COMMIT = re.compile(r'[0-9a-f]{40}')  # a full git hash: a short one may stop being unique as the repository grows
_DOTTED = re.compile(r'[A-Za-z_]\w*(\.[A-Za-z_]\w*)+')  # module.attribute, at least one dot
_NODE_ID = re.compile(r'[\w./-]+\.py::[A-Za-z_]\w*')  # file::function, no parametrisation brackets


def _check_framework(table, where):
    if not isinstance(table, dict):
        raise ValueError(f'{where}: no [framework] table')
    for field in FRAMEWORK_FIELDS:
        if not isinstance(table.get(field), str) or not table[field]:
            raise ValueError(f'{where}: [framework] needs a non-empty string {field!r}, got {table.get(field)!r}')
    unknown = sorted(set(table) - set(FRAMEWORK_FIELDS) - set(FRAMEWORK_OPTIONAL))
    if unknown:
        raise ValueError(f'{where}: [framework] has unknown fields {unknown}; allowed: '
                         f'{list(FRAMEWORK_FIELDS + FRAMEWORK_OPTIONAL)}')
    for field in FRAMEWORK_OPTIONAL:
        if field in table and (not isinstance(table[field], str) or not table[field]):
            raise ValueError(f'{where}: [framework] {field} must be a non-empty string, got {table[field]!r}')
    if not _COMMIT.fullmatch(table['commit']):
        raise ValueError(f"{where}: [framework] commit must be 40 lower-case hex digits, got {table['commit']!r}")


def _check_marks(text, here):
    # an unpaired '$' or '`' would swallow the prose after it into a formula or a code span
    for sign, kind in (('$', 'formula'), ('`', 'code span')):
        if text.count(sign) % 2:
            raise ValueError(f'{here}: an unclosed {kind} ({sign!r} appears {text.count(sign)} times)')
    for formula in re.findall(r'\$([^$]*)\$', text):
        if formula != formula.strip() or not formula:  # '$ x$' is not a formula to every Markdown renderer
            raise ValueError(f'{here}: the formula ${formula}$ is empty or starts or ends with a space')


def _check_option(option, where):
    name = option.get('name')
    here = f'{where}, option {name!r}'
    missing = [field for field in REQUIRED_FIELDS if field not in option]
    if missing:
        raise ValueError(f'{here}: missing fields {missing}')
    unknown = sorted(set(option) - set(REQUIRED_FIELDS) - set(OPTIONAL_FIELDS))
    if unknown:
        raise ValueError(f'{here}: unknown fields {unknown}; allowed: {list(REQUIRED_FIELDS + OPTIONAL_FIELDS)}')
    for field, value in option.items():
        if field == 'values':
            if not (isinstance(value, list) and all(isinstance(v, str) for v in value)):
                raise ValueError(f'{here}: values must be a list of strings, got {value!r}')
        elif not isinstance(value, str):
            raise ValueError(f'{here}: {field} must be a string, got {value!r}')
    if not name:
        raise ValueError(f'{here}: name must not be empty')
    for field in PROSE_FIELDS:
        _check_marks(option.get(field, ''), f'{here}, {field}')
    if option['topic'] not in TOPICS:
        raise ValueError(f"{here}: topic {option['topic']!r} is not one of {list(TOPICS)}")
    ours, checked_by = option['ours'], option['checked_by']
    if ours and not _DOTTED.fullmatch(ours):
        raise ValueError(f'{here}: ours must be "" or a dotted path such as agentrl.core.kl.kl_penalty, got {ours!r}')
    # a function of ours is only worth naming with the test that checks its mathematics, and a test only with one
    if bool(ours) != bool(checked_by):
        raise ValueError(f'{here}: checked_by must be empty exactly when ours is (ours={ours!r}, '
                         f'checked_by={checked_by!r})')
    if checked_by and not _NODE_ID.fullmatch(checked_by):
        raise ValueError(f'{here}: checked_by must be a pytest node id file.py::test_name, got {checked_by!r}')


def load_file(path):
    """One framework file, checked -> {'framework': {...}, 'options': [...]}; a ValueError names the file and
    the option at fault."""
    path = Path(path)
    where = path.name
    try:
        data = tomllib.loads(path.read_text(encoding='utf-8'))
    except tomllib.TOMLDecodeError as error:
        raise ValueError(f'{where}: not valid TOML: {error}') from None
    unknown = sorted(set(data) - {'framework', 'option'})
    if unknown:
        raise ValueError(f'{where}: unknown top-level keys {unknown}; allowed: framework, option')
    _check_framework(data.get('framework'), where)
    options = data.get('option')
    if not isinstance(options, list) or not options:
        raise ValueError(f'{where}: no [[option]] entries')
    seen = set()
    for option in options:
        _check_option(option, where)
        if option['name'] in seen:  # rows and tables identify an option by framework and name
            raise ValueError(f"{where}, option {option['name']!r}: the name appears twice")
        seen.add(option['name'])
    return {'framework': data['framework'], 'options': options}


def load_frameworks(directory=FRAMEWORKS_DIR):
    """Every *.toml of directory, checked, sorted by framework name (case-insensitive) -> list of
    {'framework': {...}, 'options': [...]}."""
    paths = sorted(Path(directory).glob('*.toml'))
    if not paths:
        raise ValueError(f'no *.toml framework files in {directory}')
    frameworks = [load_file(path) for path in paths]
    names = [f['framework']['name'].lower() for f in frameworks]
    if len(set(names)) != len(names):
        raise ValueError(f'{directory}: two files describe the same framework ({sorted(names)})')
    return sorted(frameworks, key=lambda f: f['framework']['name'].lower())


def option_rows(frameworks, topic=None):
    """One flat dict per option (keys ROW_KEYS), ordered by topic as in TOPICS, then framework, then file order;
    topic: keep only that topic's options."""
    if topic is not None and topic not in TOPICS:
        raise ValueError(f'topic {topic!r} is not one of {list(TOPICS)}')
    rows = []
    for entry in frameworks:
        head = entry['framework']
        for option in entry['options']:
            if topic is None or option['topic'] == topic:
                rows.append({'framework': head['name'], 'version': head['version'], 'commit': head['commit'][:7],
                             'option': option['name'], 'default': option['default'], 'topic': option['topic'],
                             'computes': option['computes'], 'ours': option['ours'],
                             'ours_note': option.get('ours_note', ''), 'checked_by': option['checked_by'],
                             'differs': option.get('differs', ''), 'not_run': option.get('not_run', ''),
                             'changed_later': option.get('changed_later', '')})
    # sorted() is stable, so within one framework and topic the file's order stays
    return sorted(rows, key=lambda row: (TOPICS.index(row['topic']), row['framework'].lower()))


def _cell(value):
    # a '|' would end the cell and a newline the row
    return str(value).replace('|', '\\|').replace('\r\n', ' ').replace('\n', ' ').replace('\r', ' ')


def markdown_table(rows, columns):
    """rows (dicts) as a Markdown table of the given columns (headers: the keys, '_' read as a space): header,
    '|---|' rule, one line per row."""
    lines = ['| ' + ' | '.join(_cell(c.replace('_', ' ')) for c in columns) + ' |', '|' + '---|' * len(columns)]
    lines += ['| ' + ' | '.join(_cell(row.get(c, '')) for c in columns) + ' |' for row in rows]
    return '\n'.join(lines)


# what would turn plain prose into emphasis, code, maths or a tag; not '[' and ']': an escaped bracket, '\\[', is a
# maths delimiter to the notebook's renderer
_MARKDOWN_SIGNS = re.compile(r'([\\`*_$<])')


def _prose(text):
    return _MARKDOWN_SIGNS.sub(r'\\\1', text)


_MARKED = re.compile(r'(\$[^$]+\$|`[^`]+`)')


def marked_prose(text):
    """A prose field as Markdown: its formulas ($...$) and code spans (`...`) as written, the rest escaped, its
    '*' and '_' being signs and parts of names, not emphasis."""
    return ''.join(part if i % 2 else _prose(part) for i, part in enumerate(_MARKED.split(text)))


def markdown_entries(rows, prose=marked_prose, executed=None):
    """rows as one Markdown paragraph each, for text too long for a table cell: the framework and the option with
    its default, what it computes, the function here with its test (or none) and its note, what executing the
    framework's code beside ours found (executed: {(framework, option): sentence}) or why it was not run, what a later
    release changed, and where the docs differ. The free text goes through `prose`: by default marked_prose."""
    entries = []
    executed = executed or {}
    for row in rows:
        here = (f'`{row["ours"]}`, checked by `{row["checked_by"]}`' if row['ours'] else 'nothing')
        parts = [f'**{row["framework"]}** `{row["option"]}` (default `{row["default"]}`). {prose(row["computes"])}',
                 f'*Here:* {here}.' + (f' {prose(row["ours_note"])}' if row.get('ours_note') else '')]
        found = executed.get((row['framework'], row['option']))
        if found:
            parts.append(f'*Executed beside ours:* {prose(found)}')
        elif row.get('not_run') and row['ours']:
            parts.append(f'*Not executed:* {prose(row["not_run"])}')
        if row.get('changed_later'):
            parts.append(f'*In later releases:* {prose(row["changed_later"])}')
        if row.get('differs'):
            parts.append(f'*Code and documentation differ:* {prose(row["differs"])}')
        entries.append('\n'.join(' '.join(part.split()) for part in parts))
    return '\n\n'.join(entries)
