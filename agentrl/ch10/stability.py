"""How much a verdict hangs on the last bit of the arithmetic: the same claims judged on two arithmetic streams.

A stream is one full set of TinyAgent runs on seeds 0-4, computed under one arithmetic: a CPU (AMD or Intel), MKL's
branch, the optimiser's square root. Two streams start from the same code and seeds; they differ only in rounding,
which training amplifies until a seed's run is, in effect, another draw. A stream is stored as data
(data/streams/*.json): for every claim, whether it held on each seed.

A seed rule turns a claim's per-seed outcomes into one word. A good rule gives the same word on both streams for as
many claims as it can; a claim whose word still moves between streams is *fragile*, and is shown with both counts.
"""
import json
from pathlib import Path

from agentrl.ch10.claims import DOES_NOT_HOLD, HOLDS, SEED_DEPENDENT, seed_rule
from agentrl.paths import REPO

STREAMS = REPO / 'data' / 'streams'  # the recorded streams, one JSON file each
STABLE, FRAGILE = 'stable', 'fragile'


def rule_share(held_on, n_seeds, holds_share, fails_share):
    """HOLDS if held on at least holds_share of the seeds, DOES_NOT_HOLD if on at most fails_share, else
    SEED_DEPENDENT."""
    if not 0 <= held_on <= n_seeds or n_seeds < 1:
        raise ValueError(f'held_on must be between 0 and n_seeds >= 1, got {held_on} of {n_seeds}')
    if held_on >= holds_share * n_seeds - 1e-9:
        return HOLDS
    return DOES_NOT_HOLD if held_on <= fails_share * n_seeds + 1e-9 else SEED_DEPENDENT


# The rules weighed against each other, written down before any stream was compared under them.
CANDIDATE_RULES = {
    '4 of 5': ('holds on at least 80% of the seeds, does not hold on at most 20%, seed-dependent between '
               '(the rule until 2026-12-05)', lambda k, n: rule_share(k, n, 0.8, 0.2)),
    'majority': ('holds on more than half the seeds, does not hold on fewer than half, seed-dependent on a tie',
                 seed_rule),
    'unanimous': ('holds on every seed, does not hold on none, seed-dependent otherwise',
                  lambda k, n: rule_share(k, n, 1.0, 0.0)),
}


def load_stream(path):
    """A recorded stream: {'short' (a table heading), 'label', 'cpu', 'arithmetic', 'seeds', 'held': {claim key:
    [bool per seed]}}."""
    path = Path(path)
    data = json.loads(path.read_text(encoding='utf-8'))
    missing = {'short', 'label', 'cpu', 'arithmetic', 'seeds', 'held'} - set(data)
    if missing:
        raise ValueError(f'{path}: a stream needs short, label, cpu, arithmetic, seeds and held; missing '
                         f'{sorted(missing)}')
    if not all(isinstance(w, str) for w in data.get('words', {}).values()):
        raise ValueError(f'{path}: "words" maps a verdict not counted over seeds to its word, got {data["words"]}')
    for key, held in data['held'].items():
        if len(held) != len(data['seeds']) or not all(isinstance(h, bool) for h in held):
            raise ValueError(f'{path}: claim {key!r} needs one true/false per seed ({len(data["seeds"])}), got {held}')
    return data


def recorded_streams(folder=STREAMS):
    """Every stream recorded in folder, sorted by file name."""
    return [load_stream(p) for p in sorted(Path(folder).glob('*.json'))]


def stream_from_verdicts(seed_verdicts, short, label, cpu, arithmetic):
    """A stream from seed-verdict dicts (agentrl.ch10.claims.seed_verdict): the per-seed outcomes, nothing else."""
    seeds = {tuple(v['seeds']) for v in seed_verdicts}
    if len(seeds) != 1:
        raise ValueError(f'a stream is judged on one set of seeds; the verdicts have {sorted(seeds)}')
    return dict(short=short, label=label, cpu=cpu, arithmetic=arithmetic, seeds=list(seeds.pop()),
                held={v['key']: [bool(h) for h in v['held']] for v in seed_verdicts})


def moved(rule, first, second):
    """The claim keys (in first's order) that both streams judge and whose word under rule differs between them."""
    return [key for key, held in first['held'].items() if key in second['held']
            and rule(sum(held), len(held)) != rule(sum(second['held'][key]), len(second['held'][key]))]


def rule_comparison(first, second, rules=None):
    """[(name, description, moved keys)] for every candidate rule, in CANDIDATE_RULES order."""
    rules = CANDIDATE_RULES if rules is None else rules
    return [(name, text, moved(rule, first, second)) for name, (text, rule) in rules.items()]


def stability(seed_verdicts, others, rule=seed_rule):
    """For each seed-verdict dict (the runs at hand): its word, and the word and count on each other stream judged on
    the same seeds.

    -> [{'key', 'text', 'verdict', 'held_on', 'n', 'others': [(label, verdict, held_on, n)], 'label': STABLE or
    FRAGILE}]. A stream judged on other seeds, or without the claim, is left out of that claim's comparison.
    """
    rows = []
    for v in seed_verdicts:
        # The other streams recorded only each seed's check without the tie rule, so the words compared here are those
        # of the bare checks on both sides.
        raw = sum(bool(h) for h in v['held'])
        word = rule(raw, len(v['held']))
        seen = [(s['short'], rule(sum(s['held'][v['key']]), len(s['held'][v['key']])), sum(s['held'][v['key']]),
                 len(s['held'][v['key']])) for s in others
                if v['key'] in s['held'] and list(s['seeds']) == list(v['seeds'])]
        label = FRAGILE if any(other[1] != word for other in seen) else STABLE
        rows.append(dict(key=v['key'], text=v['text'], verdict=word, held_on=raw, n=len(v['held']),
                         others=[list(other) for other in seen], label=label))
    return rows


def word_stability(key, text, word, others):
    """A stability row for a verdict that is one word, not a count over seeds (the entropy law's judgement), against
    the streams that recorded that word (their 'words')."""
    seen = [[s['short'], s['words'][key], None, None] for s in others if key in s.get('words', {})]
    return dict(key=key, text=text, verdict=word, held_on=None, n=None, others=seen,
                label=FRAGILE if any(other[1] != word for other in seen) else STABLE)


def count_phrase(verdict, held_on, n):
    """'holds, 3/5' for a verdict and its count ('mixed' for a verdict with no count)."""
    return verdict if held_on is None else f'{verdict}, {held_on}/{n}'


def fragile_phrase(row):
    """'fragile: the bare check holds, 3/5 here; does not hold, 1/5 on <stream>' for a stability row ('' for a
    stable one). The other streams recorded the bare checks only, so the words compared are the bare checks'."""
    if row['label'] != FRAGILE:
        return ''
    moved = [f'{count_phrase(word, k, n)} on {label}' for label, word, k, n in row['others'] if word != row['verdict']]
    bare = '' if row['held_on'] is None else 'the bare check '  # a one-word judgement has no bare check to name
    return f'fragile: {bare}{count_phrase(row["verdict"], row["held_on"], row["n"])} here; ' + '; '.join(moved)


def stability_summary(rows):
    """One sentence: how many verdicts keep their word on every stream compared, and which do not."""
    compared = [r for r in rows if r['others']]
    if not compared:
        return 'No other arithmetic stream is recorded on these seeds, so the verdicts\' stability is not measured here.'
    fragile = [r for r in compared if r['label'] == FRAGILE]
    streams = len({other[0] for r in compared for other in r['others']})
    head = (f'By their bare checks (the tie set aside, as the other streams recorded only those), '
            f'{len(compared) - len(fragile)} of {len(compared)} claims get the same word on these runs and on the '
            f'{streams} other arithmetic stream{"s" if streams != 1 else ""} recorded')
    if not fragile:
        return head + ': none is fragile.'
    return head + f'; {len(fragile)} {"is" if len(fragile) == 1 else "are"} fragile: ' + '; '.join(
        f'{r["text"]} ({fragile_phrase(r).split(": ", 1)[1].removeprefix("the bare check ")})' for r in fragile) + '.'


def stability_markdown(rows, others):
    """The summary sentence, then a table: each claim, its word and count here and on each other stream, its label."""
    shown = [s for s in others if any(s['short'] == o[0] for r in rows for o in r['others'])]
    labels = [s['short'] for s in shown]
    lines = [stability_summary(rows), '']
    if not labels:
        return '\n'.join(lines)
    lines += ['| claim (bare check) | these runs | ' + ' | '.join(labels) + ' | |',
              '|---|---|' + '---|' * len(labels) + '---|']
    for r in rows:
        theirs = {label: count_phrase(word, k, n) for label, word, k, n in r['others']}
        cells = [theirs.get(label, 'not recorded') for label in labels]
        mark = '**fragile**' if r['label'] == FRAGILE else 'stable'
        lines.append(f'| {r["text"]} | {count_phrase(r["verdict"], r["held_on"], r["n"])} | ' + ' | '.join(cells)
                     + f' | {mark} |')
    lines += [''] + [f'- *{s["short"]}*: {s["label"]}; {s["arithmetic"]}.' for s in shown]
    return '\n'.join(lines)
