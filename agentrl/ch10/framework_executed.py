"""What running the frameworks' own functions beside ours found: the records of `make frameworks-test`, read.

Each record (results/frameworks/<set>.json) holds, for one set of releases, every check: a framework's function and
ours on the same float64 tensors, each case's outcome ('agrees', 'differs', 'raised') and the difference declared
for it ('' when the two should agree). This module counts them, rolls them up per option of the map
(data/frameworks/*.toml), and compares the reference releases with the latest ones. It runs nothing.
"""
import json

from agentrl import prose
from agentrl.ch10.framework_options import K3_CLAMPS, k3_reaches
from agentrl.paths import REPO

RECORDS = REPO / 'results' / 'frameworks'
SETS = ('reference', 'latest', 'swift')  # the swift set holds ms-swift, which needs an older TRL beside it
EXECUTED = ('verl', 'TRL', 'OpenRLHF', 'ms-swift')


def load_records(directory=RECORDS):
    """{set name: record} for every set whose record exists; a ValueError names a record that is not one."""
    records = {}
    for name in SETS:
        path = directory / f'{name}.json'
        if not path.exists():
            continue
        try:
            record = json.loads(path.read_text(encoding='utf-8'))
        except json.JSONDecodeError as error:
            raise ValueError(f'{path}: not valid JSON ({error}); run make frameworks-test to write it again') from None
        if record.get('set') != name or not isinstance(record.get('checks'), list):
            raise ValueError(f'{path}: not the record of the {name!r} set; run make frameworks-test to write it again')
        records[name] = record
    return records


def check_outcome(check):
    """'agrees' when every case agrees; 'differs as declared' when every case is as declared and some differ;
    'not as declared' otherwise (a difference nobody named, or a named one that did not appear)."""
    results = check['results']
    if any((r['outcome'] == 'agrees') == bool(r['expected']) for r in results):
        return 'not as declared'
    return 'agrees' if all(r['outcome'] == 'agrees' for r in results) else 'differs as declared'


def reasons(check):
    """The distinct declared differences of a check that showed, in case order."""
    seen = []
    for r in check['results']:
        if r['outcome'] != 'agrees' and r['expected'] and r['expected'] not in seen:
            seen.append(r['expected'])
    return seen


def home_set(framework):
    """The set whose reference release of `framework` is executed (ms-swift has its own)."""
    return 'swift' if framework == 'ms-swift' else 'reference'


def option_status(frameworks, records):
    """One row per option of the executed frameworks that has a function of ours: framework, option, the checks
    that execute it in its reference set and how they came out, or why none does (its map entry's not_run)."""
    rows = []
    for entry in frameworks:
        name = entry['framework']['name']
        if name not in EXECUTED:
            continue
        checks = records.get(home_set(name), {}).get('checks', [])
        for option in entry['options']:
            if not option['ours']:
                continue
            mine = [c for c in checks if c['framework'] == name and option['name'] in c['options']]
            outcomes = [check_outcome(c) for c in mine]
            if not mine:
                status = 'not run'
            elif 'not as declared' in outcomes:
                status = 'not as declared'
            elif all(o == 'agrees' for o in outcomes):
                status = 'agrees'
            else:
                status = 'differs as declared'
            rows.append(dict(framework=name, option=option['name'], status=status, checks=len(mine),
                             reasons=[why for c in mine for why in reasons(c)],
                             not_run=option.get('not_run', '')))
    return rows


def set_counts(record):
    """{'checks', 'agrees', 'differs as declared', 'not as declared', 'cases'} for one record."""
    outcomes = [check_outcome(c) for c in record['checks']]
    return {'checks': len(outcomes), 'cases': sum(len(c['results']) for c in record['checks']),
            **{word: outcomes.count(word) for word in ('agrees', 'differs as declared', 'not as declared')}}


def _key(check):
    return check['framework'], check['function'], check['setting']


def _finding(check):
    """A check's finding in a word: 'absent' when the function raised on every case (the option is not there)."""
    if all(r['outcome'] == 'raised' for r in check['results']):
        return 'absent'
    return check_outcome(check)


def drift_rows(records):
    """Per check run on both the reference and the latest releases: what it found in each, and what changed.

    Each row: framework, function, setting, options, both versions and findings, and 'change': '' when the two found
    the same thing case by case, else the named differences that appeared ('now: ...') and went ('no longer: ...').
    A difference that a longer one extends (the same clamp, plus a second) is not said to have gone."""
    if 'reference' not in records or 'latest' not in records:
        return []
    latest = {_key(c): c for c in records['latest']['checks']}
    rows = []
    for old in records['reference']['checks']:
        new = latest.get(_key(old))
        if new is None:
            continue
        before = [(r['case'], r['outcome'], r['expected']) for r in old['results']]
        after = [(r['case'], r['outcome'], r['expected']) for r in new['results']]
        change = ''
        if before != after:
            came = [why for why in reasons(new) if why not in reasons(old)]
            gone = [why for why in reasons(old) if why not in reasons(new)
                    and not any(later.startswith(why) for later in came)]
            change = '; '.join([f'now: {why}' for why in came] + [f'no longer: {why}' for why in gone]) \
                or 'the cases that differ changed'
        rows.append(dict(framework=old['framework'], function=old['function'], setting=old['setting'],
                         options=old['options'], reference=old['version'], latest=new['version'],
                         before=_finding(old), after=_finding(new), change=change))
    return rows


def option_drift(rows):
    """The drift rows per map option: framework, option, both versions, and the changes of its checks ('' if none),
    in the order the options first appear."""
    options = {}
    for row in rows:
        for option in row['options']:
            entry = options.setdefault((row['framework'], option), dict(
                framework=row['framework'], option=option, reference=row['reference'], latest=row['latest'],
                changes=[]))
            if row['change']:
                call = row['function'] + (f" ({row['setting']})" if row['setting'] else '')
                entry['changes'].append(f"`{call}`: {row['before']} → {row['after']}; {row['change']}")
    return list(options.values())


def drift_table(rows):
    """The options whose computation changed between the reference and the latest release, as a Markdown table,
    then how many did not."""
    per_option = option_drift(rows)
    changed = [o for o in per_option if o['changes']]
    lines = ['| framework | option | reference → latest | what changed |', '|---|---|---|---|']
    for o in changed:
        lines.append(f"| {o['framework']} | `{o['option']}` | {o['reference']} → {o['latest']} | "
                     + '<br>'.join(o['changes']).replace('|', '\\|').replace('\n', ' ') + ' |')
    lines += ['', f'{len(per_option) - len(changed)} of the {len(per_option)} options executed in both releases '
                  'compute what the map says in both, case by case; the table lists the others.']
    return '\n'.join(lines)


def opening(frameworks, records):
    """Notebook 12's first sentence about execution: how many map entries were executed and how they came out."""
    rows = option_status(frameworks, records)
    if not records:
        return ('None of the map\'s entries has been executed on this checkout: `make frameworks-test` builds the '
                'frameworks\' environments and writes the records.')
    counts = {word: sum(r['status'] == word for r in rows)
              for word in ('agrees', 'differs as declared', 'not as declared', 'not run')}
    executed = len(rows) - counts['not run']
    checks = sum(set_counts(records[s])['checks'] for s in records if s in ('reference', 'swift'))
    parts = [f"{counts['agrees']} agree on every edge case",
             f"{counts['differs as declared']} differ only where a named difference says they should (a clamp, an "
             'epsilon, a divisor)']
    if counts['not as declared']:
        parts.append(f"{counts['not as declared']} depart from what was declared")
    versions = prose.and_join([f"{name} {records[home_set(name)]['versions'][name]}" for name in EXECUTED
                               if home_set(name) in records and records[home_set(name)]['versions'].get(name)])
    return (f'Of the {len(rows)} entries of {prose.and_join(list(EXECUTED))} that name a function of ours, '
            f'{executed} were executed beside it ({checks} checks of value and gradient on five edge cases, with '
            f'{versions}): {prose.and_join(parts)}. The other {counts["not run"]} were not executed; '
            'each map entry says why.')


def sets_table(records):
    """One Markdown row per record: its releases, and how its checks came out."""
    lines = ['| set | releases | checks | agree on every case | differ only as declared | not as declared |',
             '|---|---|---|---|---|---|']
    for name, record in records.items():
        counts = set_counts(record)
        releases = ', '.join(f'{fw} {record["versions"][fw]}' for fw in record.get('frameworks', EXECUTED)
                             if record['versions'].get(fw))
        lines.append(f"| {name} | {releases} | {counts['checks']} | {counts['agrees']} | "
                     f"{counts['differs as declared']} | {counts['not as declared']} |")
    return '\n'.join(lines)


def where_run(records):
    """Where and with what the records were made: one sentence."""
    made = sorted({(r['cpu'], r['torch'], r['python']) for r in records.values()})
    return 'The records were made on ' + prose.and_join(
        [f'{cpu} (torch {torch_version}, Python {python})' for cpu, torch_version, python in made]) + '.'


def clamp_lines(rows):
    """The clamp table: per shift, the exact KL, the largest log-ratio, the mass where a clamp binds, and each
    clamp's bias as a share of the KL."""
    names = list(rows[0]['bias'])
    lines = ['| shift | KL(π ‖ ref) | largest log ref/π | π-mass clamped | ' + ' | '.join(names) + ' |',
             '|---|---|---|---|' + '---|' * len(names)]
    for r in rows:
        lines.append(f"| {r['shift']:g} | {r['kl']:.4f} | {r['max_log_ratio']:.2f} | {r['mass_clamped']:.4f} | "
                     + ' | '.join(f"{r['bias'][n]:+.2%}" for n in names) + ' |')
    return '\n'.join(lines)


def clamp_reading(rows, clamps=K3_CLAMPS):
    """What the clamp table says, and what this package does about it; clamps: the table's bounds (K3_CLAMPS)."""
    biased = [r for r in rows if any(abs(b) > 0 for b in r['bias'].values())]
    spread = max(max(r['bias'].values()) - min(r['bias'].values()) for r in rows)
    worst = min(min(r['bias'].values()) for r in rows)
    caps = {value[1] for _, value in clamps.values()}
    cap = caps.pop() if len(caps) == 1 else None
    first = biased[0] if biased else None
    start = 'No clamp binds on these policies. '
    if first:
        where = (f'where log(ref/π) passes {k3_reaches(cap):.2f} (there $k_3$ passes {cap:g})' if cap
                 else 'where a clamp binds')
        start = (f"The clamps leave the estimate unbiased until π puts mass {where}: from shift {first['shift']:g} "
                 f"on ({first['mass_clamped']:.2%} of π's mass clamped) they lower the expected estimate, by up to "
                 f'{-worst:.0%} of the KL in this table. ')
    alike = (f'The {len(clamps)} clamps give the same bias in every row' if spread == 0 else
             f'The {len(clamps)} clamps differ from each other by at most {spread:.1e} of the KL here')
    bounds = sorted({f'{b:+g}' for log_ratio, _ in clamps.values() for b in log_ratio if b is not None})
    shared = (f': the bound that binds is the cap of {cap:g} on $k_3$, which all {len(clamps)} share, and the '
              f'log-ratio bounds ({", ".join(bounds)}) bind only where π keeps mass on tokens the reference all but '
              'excludes' if cap and spread == 0 else '')
    return (start + alike + shared + '.\n\n'
            "*Our choice:* `kl_penalty` and `kl_estimate` stay unclamped, so $\\mathbb{E}_\\pi[k_3]$ is the KL "
            'exactly, and no clamp is offered as an option. A clamp trades that bias for a bounded loss on rare '
            'tokens; a reader who wants the frameworks\' behaviour can clamp the estimate before aggregating it, and '
            'the checks above show by how much the two then part.')


def entry_sentences(status_rows, records):
    """{(framework, option): one sentence for its map entry} for every executed option: how its checks came out on
    the reference release, and the differences they showed."""
    sentences = {}
    for row in status_rows:
        if row['status'] == 'not run':
            continue
        release = f"{row['framework']} {records[home_set(row['framework'])]['versions'][row['framework']]}"
        checks = f"{row['checks']} check{'s' * (row['checks'] != 1)}"
        if row['status'] == 'agrees':
            sentences[(row['framework'], row['option'])] = (
                f'{checks} on {release}: value and gradient agree with ours on every edge case.')
        else:
            unique = list(dict.fromkeys(row['reasons']))
            unique = [why for why in unique if not any(other != why and other.startswith(why) for other in unique)]
            sentences[(row['framework'], row['option'])] = (
                f'{checks} on {release}: {row["status"]}' + (': ' + '; '.join(unique) if unique else '') + '.')
    return sentences
