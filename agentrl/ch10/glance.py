"""The chapter's TinyAgent claims at a glance: one row per claim with its verdict on seed 0, on five seeds and on every
substrate the sweep record holds, and a mark where the claim reads only numbers the substrate was fitted to.

Everything is read from the records the notebooks write (the caller loads them with agentrl.results and passes them
in as `records`, {notebook stem: its results dict}); nothing here trains or runs a notebook.

The words: a claim *holds* or *does not hold* by the seed rule (claims.seed_rule); it is *seed-dependent* on a tie;
it is *fragile* when its word differs on another recorded arithmetic stream (notebook 09's stability rows). Across
the substrates, across.py's label 'robust' is split by the verdict shared on every substrate: *holds on every
substrate* or *fails on every substrate*.

The substrate was fitted to the RL base, the unregularised run `none` and the single 10.6 batch at clip_high 0.2;
every regularised setting was held out. A claim whose runs (its `needs`) are all among the fitted ones reads only
fitted numbers, so its verdict is close to built in.
"""
from agentrl import chapter
from agentrl.ch10 import across, claims, clip_higher, stability

FITTED_RUNS = frozenset({'none', 'clip_high 0.2'})  # the runs the calibration rows read (agentrl/calibration/rows.py)
CLIP_HIGHER_NEEDS = tuple(f'clip_high {s:g}' for s in clip_higher.SETTINGS)  # the 10.6 claim compares these
CLIP_HIGHER_KEY = 'clip-higher'
HOLDS_EVERYWHERE, FAILS_EVERYWHERE = 'holds on every substrate', 'fails on every substrate'
FITTED_MARK = 'reads only fitted numbers'
NOT_SWEPT = 'not swept'
CLAIMS_BEGIN = '<!-- claims: begin (written by make report; do not edit by hand) -->'
CLAIMS_END = '<!-- claims: end -->'


def needs_of(key):
    """The runs a claim reads: its Claim's `needs`, or the three upper clips of the 10.6 batch."""
    return CLIP_HIGHER_NEEDS if key == CLIP_HIGHER_KEY else claims.by_key(key).needs


def reads_only_fitted(needs):
    """Whether every run in needs is one the substrate was fitted to."""
    return bool(needs) and set(needs) <= FITTED_RUNS


def substrate_words(row):
    """A row of across.claim_table -> its label in words; the label is recomputed from the cells by across.label."""
    verdicts = [cell['verdict'] for cell in row['cells'].values()]
    if len(verdicts) == 1:  # one substrate swept: nothing to say about a change of substrate yet
        return f'{verdicts[0]} (the one substrate swept)'
    found = across.label(verdicts)
    if found == across.ROBUST:
        return HOLDS_EVERYWHERE if verdicts[0] == claims.HOLDS else FAILS_EVERYWHERE
    if found == across.SUBSTRATE_DEPENDENT:
        return (f'substrate-dependent: holds on {verdicts.count(claims.HOLDS)} of {len(verdicts)}, fails on '
                f'{verdicts.count(claims.DOES_NOT_HOLD)}')
    if found == across.TIED_EVERYWHERE:
        return f'tied on every substrate ({len(verdicts)})'
    undecided = verdicts.count(claims.SEED_DEPENDENT) + verdicts.count(claims.TIED)
    return f'tied or seed-dependent on {undecided} of {len(verdicts)} substrates'


def seed_word(verdict, stable_row):
    """The five-seed word: 'fragile' if the stability row says the word moves between streams, else the verdict."""
    return 'fragile' if stable_row and stable_row['label'] == stability.FRAGILE else verdict


def _seeds_cell(summary, stable_row, unit='seeds'):
    """'holds, 4 of 5 seeds', or for a fragile claim its word here and on the other streams."""
    text = claims.count_phrase(summary, unit)
    if seed_word(summary['verdict'], stable_row) != 'fragile':
        return text
    moved = [f'{word}, {k2} of {n2} {unit} on {label}' for label, word, k2, n2 in stable_row['others']
             if word != stable_row['verdict']]
    return (f'fragile: {text} here; its bare check {stable_row["verdict"]}, {stable_row["held_on"]} of '
            f'{stable_row["n"]} {unit} here and ' + '; '.join(moved))


def glance_rows(records):
    """One dict per claim, in section order: key, text, section, seed0 ('holds', 'does not hold' or 'tied'), seeds (held_on,
    n, verdict, word), seeds_text, substrates (in words, or 'not swept'), fitted (bool).

    records: {notebook stem: results dict} holding 06, 07, 08, 09 and 11 (a missing one leaves its claims out)."""
    get = lambda stem, key, default=None: (records.get(stem) or {}).get(key, default)  # noqa: E731
    seed0, section_of = {}, {}
    for stem in chapter.VERDICT_NOTEBOOKS:
        number = next(s.number for s in chapter.SECTIONS if s.notebook == stem)
        for v in get(stem, chapter.VERDICTS_KEY, []):
            seed0[v['key']], section_of[v['key']] = claims.outcome_of(v), number
    five = {v['key']: v for v in get(chapter.SEED_NOTEBOOK, chapter.SEED_VERDICTS_KEY, [])}
    for v in get(chapter.SEED_NOTEBOOK, chapter.SCALE_VERDICTS_KEY, []):  # re-checks of 10.7's mechanisms at 2x
        five[v['key']] = v
        seed0.setdefault(v['key'], _seed_outcome(v, 0))
        section_of.setdefault(v['key'], '10.7')
    stable = {r['key']: r for r in get(chapter.SEED_NOTEBOOK, chapter.STABILITY_KEY, [])}
    swept = {r['key']: r for r in get(chapter.ACROSS_NOTEBOOK, chapter.CLAIM_TABLE_KEY, [])}
    rows = []
    clip = get(chapter.section('10.6').notebook, clip_higher.CLAIM_KEY)
    if clip:  # 10.6's reading, judged on its own batch seeds (seed 0 is the chapter's batch)
        rows.append(dict(key=CLIP_HIGHER_KEY, text=clip['text'], section='10.6',
                         seed0=_seed_outcome(clip, 0),
                         seeds=dict(held_on=clip['held_on'], n=len(clip['seeds']), verdict=clip['verdict'],
                                    word=clip['verdict']),
                         seeds_text=_seeds_cell(clip, None, 'batch seeds'), substrates=NOT_SWEPT, swept=0,
                         fitted=reads_only_fitted(needs_of(CLIP_HIGHER_KEY))))
    order = {s.number: i for i, s in enumerate(chapter.SECTIONS)}
    keyed = [c for c in claims.CLAIMS if c.key in five and c.key in seed0]
    for claim in sorted(keyed, key=lambda c: order[section_of[c.key]]):
        summary, row = five[claim.key], stable.get(claim.key)
        rows.append(dict(key=claim.key, text=claim.text, section=section_of[claim.key], seed0=seed0[claim.key],
                         seeds=dict(held_on=summary['held_on'], n=len(summary['seeds']), verdict=summary['verdict'],
                                    word=seed_word(summary['verdict'], row)),
                         seeds_text=_seeds_cell(summary, row),
                         substrates=substrate_words(swept[claim.key]) if claim.key in swept else NOT_SWEPT,
                         swept=len(swept[claim.key]['cells']) if claim.key in swept else 0,
                         fitted=reads_only_fitted(claim.needs)))
    return rows


def _seed_outcome(summary, seed):
    """One seed's word in a seed-verdict dict: its outcome under the tie rule, or for a record written before the
    rule, held or not."""
    i = summary['seeds'].index(seed)
    if 'outcomes' in summary:
        return summary['outcomes'][i]
    return claims.HOLDS if summary['held'][i] else claims.DOES_NOT_HOLD


def substrate_heading(rows):
    """'6 substrates' (or '1 substrate'): how many substrates the sweep record judged the claims on."""
    n = max((r.get('swept', 0) for r in rows), default=0)
    return f'{n} substrate' + ('' if n == 1 else 's')


def legend(rows):
    """The one sentence above the table: the words, the rule, the fitted mark."""
    n = max((r['seeds']['n'] for r in rows if r['section'] != '10.6'), default=5)
    batches = next((r['seeds']['n'] for r in rows if r['section'] == '10.6'), None)
    fitted_clip = next(run for run in FITTED_RUNS if run.startswith('clip_high'))
    return (f'Each TinyAgent claim on seed 0 (the chapter\'s single seed), on {n} seeds and on '
            f'{substrate_heading(rows)} swept by this tree\'s training code: it '
            f'**holds**, **does not hold** or is **tied** by the seed rule ({claims.seed_rule_text(n)}; "k of n" '
            'counts the seeds where it holds beyond the noise, and the tied seeds are given apart), it is **fragile** '
            'where the bare checks\' word differs on another recorded arithmetic stream, and across the substrates it '
            'holds on every '
            'one, fails on every one, or depends on the substrate; *reads only fitted numbers* marks a claim that '
            f'reads only the unregularised run `none` (or the 10.6 batch at {fitted_clip}), numbers the substrate '
            'was fitted to, so its verdict is close to built in'
            + (f' (10.6\'s claim is judged on its own {batches} batch seeds).' if batches else '.')
            + ' For each tied claim, notebook 09 also says what the means over the seeds settle: a second look, added '
            'after the runs were seen, that changes no verdict.'
            + ' Not counted: ' + '; '.join(f'*{claims.by_key(key).text}*, which could not fail on any data ({why})'
                                           for key, why in claims.CANNOT_FAIL.items()) + '.')


def markdown(rows):
    """The legend, a blank line, then the table as Markdown lines."""
    cell = lambda text: text.replace('|', '\\|')  # noqa: E731
    lines = [legend(rows), '', f'| claim | section | seed 0 | five seeds | {substrate_heading(rows)} | fitted |',
             '|---|---|---|---|---|---|']
    for r in rows:
        lines.append(f'| {cell(r["text"])} | {r["section"]} | {r["seed0"]} | {cell(r["seeds_text"])} | '
                     f'{r["substrates"]} | {FITTED_MARK if r["fitted"] else ""} |')
    return lines


def counts(rows):
    """{'holds', 'tied', 'seed-dependent', 'fragile', 'does not hold', 'fitted'}: how many rows carry each five-seed word, and
    how many are marked fitted."""
    words = [r['seeds']['word'] for r in rows]
    found = {w: words.count(w) for w in (claims.HOLDS, claims.TIED, claims.SEED_DEPENDENT, 'fragile',
                                          claims.DOES_NOT_HOLD)}
    found['fitted'] = sum(r['fitted'] for r in rows)
    return found

