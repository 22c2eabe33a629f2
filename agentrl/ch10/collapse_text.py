"""Notebook 06's printed blocks and sentences, written from what its cells measured (agentrl.ch10.clip_higher).

Every comparison between two settings follows agentrl.ch10.ties: the tolerance comes from the spread of the same
quantity over the ten batch seeds, and a gap below it is called a tie.
"""
from agentrl.ch10 import ties
from agentrl.ch10.clip_higher import BATCH_SEEDS, SETTINGS, binds_on_rare, change
from agentrl.ch10.claims import DOES_NOT_HOLD, HOLDS, SEED_DEPENDENT, TIED, seed_rule_text
from agentrl.prose import and_join

EPS = r'$\epsilon_{\text{high}}$'
CLIPPED = SETTINGS[:-1]  # the settings whose upper clip can bind
LOOSEST, TIGHTEST = max(SETTINGS), min(SETTINGS)


# --- the printed blocks ------------------------------------------------------------------------------------------

def covariance_lines(h_start, p_likely, p_rare, checks):
    """The first-order check's block: the softmax's entropy, then one line per case {label: (predicted, exact)}."""
    head = f'entropy {h_start:.4f} | pi(likely) {p_likely:.3f} | pi(rare) {p_rare:.4f}'
    return [head] + [f'{label:<14} | predicted dH {predicted:+.5f} | actual dH {exact:+.5f}'
                     for label, (predicted, exact) in checks.items()]


def identity_lines(gap):
    """The three-step identity's block."""
    return [f'largest parameter difference after 3 steps: {gap}']


def clip_higher_lines(n_pos, n_rare, rows):
    """The clip-higher block in the book's layout; rows: {clip_high: dict(start, end, last_clip_frac, above,
    above_rare)}."""
    return [f'{n_pos} policy tokens with A > 0, {n_rare} of them with pi_old < 0.5'] + [
        f'clip_high {c:6.2f} | entropy {r["start"]:.3f} -> {r["end"]:.3f} | last-step clip_frac '
        f'{r["last_clip_frac"]:.3f} | A>0 tokens above the upper clip: {r["above"]}, {r["above_rare"]} of them with '
        'pi_old < 0.5' for c, r in rows.items()]


def split_lines(n_neg, n_neg_likely, mean_reward, ends, only_positive, only_negative):
    """The block of the runs whose loss sees one sign of the advantage."""
    head = 'entropy after 8 steps, loss on'
    return ([f'{n_neg} policy tokens with A < 0, {n_neg_likely} of them with pi_old >= 0.5; batch mean reward '
             f'{mean_reward:.3f}', f'{head} | whole batch | A > 0 tokens only | A < 0 tokens only']
            + [f'{"clip_high " + format(c, "6.2f"):<{len(head)}} | {ends[c]:11.3f} | {only_positive[c]:17.3f} |'
               f' {only_negative:17.3f}' for c in ends])


def seed_lines(measured, claim):
    """The batch seeds' block: per seed the entropy after the steps at each clip (whole batch, then the rewarded tokens
    only) and whether the tightest clip ends highest; then the means."""
    def cells(values):
        return ' '.join(f'{v:5.3f}' for v in values)

    head = (f'batch seed | start | whole batch at {"/".join(f"{c:g}" for c in SETTINGS)} | '
            f'A > 0 only at {"/".join(f"{c:g}" for c in SETTINGS)} | tightest highest')
    said = {HOLDS: 'yes', DOES_NOT_HOLD: 'no', TIED: 'tied'}
    outcomes = claim.get('outcomes') or [HOLDS if held else DOES_NOT_HOLD for held in claim['held']]
    rows = [f'{m["seed"]:>10} | {m["rows"][0]["start"]:5.3f} | {cells(r["end"] for r in m["rows"])} | '
            f'{cells(m["only_positive"])} | {said[outcome]}' for m, outcome in zip(measured, outcomes)]
    means = [sum(values) / len(values) for values in zip(*[[r['end'] for r in m['rows']] for m in measured])]
    positive = [sum(values) / len(values) for values in zip(*[m['only_positive'] for m in measured])]
    tied = outcomes.count(TIED)
    return [head] + rows + [f'{"mean":>10} | {sum(m["rows"][0]["start"] for m in measured) / len(measured):5.3f} | '
                            f'{cells(means)} | {cells(positive)} | {claim["held_on"]} of {len(measured)}'
                            + (f', {tied} tied' if tied else '')]


# --- sentences -----------------------------------------------------------------------------------------------------

def covariance_note(checks, p_likely, p_rare):
    """How well the first-order formula does, and the directions of the four cases."""
    worst = max(abs(predicted - exact) / abs(exact) for predicted, exact in checks.values())
    direction = {label: 'raises' if exact > 0 else 'lowers' for label, (_, exact) in checks.items()}
    flips = all(direction[f'{kind}, A > 0'] != direction[f'{kind}, A < 0'] for kind in ('likely', 'rare'))
    return (f'In all four cases the first-order formula is within {worst:.1%} of the exact change. Rewarding the likely '
            f'token (probability {p_likely:.3f}) {direction["likely, A > 0"]} the entropy; rewarding the rare one '
            f'(probability {p_rare:.4f}) {direction["rare, A > 0"]} it; '
            + ('a negative advantage reverses the direction in both cases.' if flips else
               'a negative advantage does not simply reverse the direction here.'))


def identity_note(gap, same_logs):
    """Whether the plug-in path with every coefficient at zero is chapter 9's loop."""
    if gap == 0 and same_logs:
        return ('Every parameter is bit-for-bit the same after three steps, and so is every logged number: each '
                "regularised run in notebooks 07-10 differs from chapter 9's `train_rl` only by the regulariser it "
                'switches on.')
    return f'The two paths differ (largest parameter difference {gap:.3g}): the plug-in path is not a pure extension.'


def moves(start, ends):
    """'falls in all three settings', or 'rises with ε_high = 0.2 and 0.28 and falls with 100'."""
    groups = {}
    for c, e in ends.items():
        groups.setdefault(change(start, e), []).append(f'{c:g}')
    if len(groups) == 1:
        return f'{next(iter(groups))} in all three settings'
    parts = [f'{word} with {and_join(settings)}' for word, settings in groups.items()]
    return parts[0].replace(' with ', f' with {EPS} = ', 1) + ' and ' + ' and '.join(parts[1:])


def listing(start, ends):
    """'0.450 → 0.392, 0.376 and 0.390 for ε_high = 0.2, 0.28 and 100'."""
    return (f'{start:.3f} → {and_join(f"{e:.3f}" for e in ends.values())} for {EPS} = '
            f'{and_join(f"{c:g}" for c in ends)}')


def ranking(ends, tol):
    """Which settings end highest, with ties: 'the three settings are tied', or 'it ends highest with ε_high = 0.2
    (0.28 and 100 lower)', or 'ε_high = 0.2 and 0.28 tie for the highest'."""
    top = ties.leaders(ends, tol)
    gap = max(ends.values()) - min(ends.values())
    if len(top) == len(ends):
        return f'the three settings are tied (they span {gap:.3f}, below {tol:.3f})'
    names = and_join(f'{c:g}' for c in top)
    if len(top) == 1:
        return f'it ends highest with {EPS} = {names}, by more than {tol:.3f}'
    return f'{EPS} = {names} tie for the highest end'


def dapo_word(ends, tol):
    """What one set of ends says about DAPO's prediction that the loosest clip keeps the most entropy."""
    top = ties.leaders(ends, tol)
    if len(top) == len(ends):
        return 'neither supports nor refutes'
    if top == [LOOSEST]:
        return 'supports'
    return 'is compatible with' if LOOSEST in top else 'goes against'


def binds_text(rows):
    """'12 of 17 with ε_high = 0.2 and 11 of 26 with 0.28'."""
    first, second = CLIPPED
    return (f'{rows[first]["above_rare"]} of {rows[first]["above"]} with {EPS} = {first:g} and '
            f'{rows[second]["above_rare"]} of {rows[second]["above"]} with {second:g}')


def where_clip_binds(rows, n_pos, n_rare, book, n_batches_binding, n_batches):
    """The first step of DAPO's argument on our batch, the book's and the batch seeds. book: (rewarded, rare, rows)."""
    book_pos, book_rare, book_rows = book
    ours, theirs = binds_on_rare(rows, n_pos, n_rare), binds_on_rare(book_rows, book_pos, book_rare)
    return (f'**1. Where the upper clip binds.** {n_rare} of the {n_pos} positive-advantage tokens in our batch '
            f'({n_rare / max(n_pos, 1):.0%}) started below probability 0.5. Of the positive-advantage tokens that '
            f'ended above the upper clip, {binds_text(rows)} had started there. '
            + ('On our batch the clip falls disproportionately on the rare tokens, as DAPO argues. ' if ours else
               'On our batch the clip does not single out the rare tokens. ')
            + f"The book's batch {'agrees' if theirs == ours else 'disagrees'}: {binds_text(book_rows)}, against "
            f'{book_rare} of {book_pos} overall. Over the {n_batches} batch seeds the clip falls disproportionately on '
            f'rare tokens on {n_batches_binding}.')


def loosening(rows, book_rows, tol, n_batches):
    """The second step of DAPO's argument on our batch and the book's, ties by tol (one batch's ends)."""
    ends = {c: r['end'] for c, r in rows.items()}
    book_ends = {c: r['end'] for c, r in book_rows.items()}
    start, book_start = rows[TIGHTEST]['start'], book_rows[TIGHTEST]['start']
    text = (f'**2. Whether loosening the clip raises the entropy.** '
            + ties.rule_sentence(tol, 'end-of-batch entropy', 'batch seeds', n_batches) + ' '
            f'Over the 8 steps our entropy {moves(start, ends)} ({listing(start, ends)}): {ranking(ends, tol)}, so '
            f"our batch {dapo_word(ends, tol)} DAPO's prediction that the loosest clip keeps the most. The book's "
            f'entropy {moves(book_start, book_ends)} ({listing(book_start, book_ends)}); by the same tolerance '
            f'{ranking(book_ends, tol)}. ')
    opposite = [c for c in ends if change(start, ends[c]) != change(book_start, book_ends[c])]
    if opposite:
        text += (f'The direction differs with {EPS} = {and_join(f"{c:g}" for c in opposite)} '
                 '(the split below looks for a cause). ')
    fracs = [r['last_clip_frac'] for r in rows.values()]
    book_fracs = [r['last_clip_frac'] for r in book_rows.values()]
    return text + (f"Our last-step clip fraction is {min(fracs):.2f} to {max(fracs):.2f}, the book's "
                   f'{min(book_fracs):.2f} to {max(book_fracs):.2f}: '
                   + ("our policy moves much further within the batch than the book's." if min(fracs) > 2 * max(book_fracs)
                      else 'the two policies move comparably far within the batch.' if max(fracs) >= min(book_fracs) / 2
                      else "our policy moves less far within the batch than the book's."))


def reading(rows, n_pos, n_rare, book, claim):
    """The three numbered paragraphs on the clip-higher batch: where the clip binds, loosening it, the book's reading."""
    n = len(claim['seeds'])
    return '\n\n'.join([where_clip_binds(rows, n_pos, n_rare, book, claim['binds_on_rare_on'], n),
                        loosening(rows, book[2], claim['tolerance_one'], n), claim_note(claim)])


HEADLINE = {HOLDS: 'holds', DOES_NOT_HOLD: 'does not hold as stated', TIED: 'is tied: the batches decide nothing',
            SEED_DEPENDENT: 'is seed-dependent'}


def claim_verb(verdict):
    """The seed rule's word as the end of a sentence: 'holds', 'does not hold', 'is tied', 'is seed-dependent'."""
    return verdict if verdict in (HOLDS, DOES_NOT_HOLD) else f'is {verdict}'


def batch_counts(claim):
    """'held on 3 of 10 batch seeds (0, 4, 7) and tied on 2 (1, 5)', from the recorded claim's per-batch outcomes."""
    n = len(claim['seeds'])
    outcomes = claim.get('outcomes') or [HOLDS if h else DOES_NOT_HOLD for h in claim['held']]

    def on(word):
        seeds = [str(s) for s, o in zip(claim['seeds'], outcomes) if o == word]
        return f'({and_join(seeds)})' if seeds else '(none)'
    said = f'held on {outcomes.count(HOLDS)} of {n} batch seeds {on(HOLDS)}'
    if TIED in outcomes:
        said += (f' and was tied on {outcomes.count(TIED)} {on(TIED)}, where another clip ended within the one-batch '
                 f'tolerance of {claim["tolerance_one"]:.3f}')
    return said


def claim_note(claim):
    """The book's reading judged on the batch seeds, with our reading of the outcome."""
    n, book = len(claim['seeds']), claim['book_end']
    means = claim['mean_end']
    keys = [f'{c:g}' for c in SETTINGS]
    tight, loose = keys[0], keys[-1]
    gap = means[tight] - means[loose]
    word = ties.compare(means[tight], means[loose], claim['tolerance_mean'])
    edge = claim['held_on'] in (claim['holds_from'], claim['fails_up_to'])
    return (f"**3. The book's reading as a claim.** The book's batch ends with the most entropy at the tightest clip "
            f'({and_join(f"{book[k]:.3f}" for k in keys)} at {EPS} = {and_join(keys)}). Judged like every other claim '
            f'({seed_rule_text(n)}), it {batch_counts(claim)}: it **{claim_verb(claim["verdict"])}**' + (', one batch from the other word' if edge else '') + '. '
            f'The setting that ends highest is {and_join(f"{k} on {n_top}" for k, n_top in claim["highest_on"].items())}. '
            f'What the batches do show is the loosest clip ending lowest: {EPS} = {tight} ends above {loose} on '
            f'{claim["tightest_above_loosest_on"]} of {n} batches, and their means over the {n} '
            f'({means[tight]:.3f} and {means[loose]:.3f}) differ by {gap:.3f}, against a tolerance of '
            f'{claim["tolerance_mean"]:.3f} for means of {n}: '
            + ('tied by that rule, though one-sided on nearly every batch.' if word == ties.TIED and
               2 * claim['tightest_above_loosest_on'] > n else f'{word} by that rule.'))


def split_text(n_pos, n_neg, n_neg_likely, mean_reward, start, ends, only_positive, only_negative, tol):
    """What the runs restricted to one sign of the advantage show; ties among the rewarded-only ends by tol."""
    text = (f'With only the {n_pos} rewarded tokens in the loss, the entropy {moves(start, only_positive)} '
            f'({listing(start, only_positive)}); with only the {n_neg} penalised tokens it '
            f'{change(start, only_negative)} {"at" if change(start, only_negative) == "stays level" else "to"} '
            f'{only_negative:.3f}. {n_neg_likely} of the penalised tokens started at probability 0.5 or more, '
            + ('so most of the push from that side is the "likely, $A < 0$" case. ' if 2 * n_neg_likely > n_neg
               else 'so the "likely, $A < 0$" case is not the main push from that side. ')
            + (f'The penalised tokens outnumber the rewarded ones {n_neg / max(n_pos, 1):.1f} to 1 in this batch '
               if n_neg > n_pos else f'This batch has {n_pos} rewarded tokens against {n_neg} penalised ones ')
            + f'(its mean reward is {mean_reward:.2f}). ')
    won = [c for c in ends if change(start, ends[c]) == 'rises' and change(start, only_positive[c]) == 'falls'
           and change(start, only_negative) == 'rises']
    if won:
        text += (f'With {EPS} = {and_join(f"{c:g}" for c in won)} the whole-batch entropy rises although the rewarded '
                 'tokens alone lower it: there the penalised tokens win. ')
    return text + ('Among the rewarded tokens alone, the only ones the upper clip acts on, '
                   f'{ranking(only_positive, tol)}; this tolerance comes from the rewarded-only entropy\'s own spread '
                   f"over the {len(BATCH_SEEDS)} batch seeds. So this batch {dapo_word(only_positive, tol)} DAPO's "
                   'argument.')


# --- what we found, the summary, the report ----------------------------------------------------------------------

def _mean_tied(claim):
    """Whether the tightest and loosest clips' mean ends over the batch seeds are within the tolerance of means."""
    return claim['mean_end']['0.2'] - claim['mean_end']['100'] < claim['tolerance_mean']


def findings(checks, claim, measured):
    """The opening bullets: what held and what did not, on how many batches."""
    first = measured[0]
    n = len(measured)
    worst = max(abs(p - e) / abs(e) for p, e in checks.values())
    seed0 = {c: r['end'] for c, r in zip(SETTINGS, (r for r in first['rows']))}
    positive0 = dict(zip(SETTINGS, first['only_positive']))
    falls = sum(all(e < m['rows'][0]['start'] for e in m['only_positive']) for m in measured)
    tol_positive = ties.tolerance({c: [m['only_positive'][i] for m in measured] for i, c in enumerate(SETTINGS)})
    tol_below = ties.tolerance({**{f'{c} rewarded only': [m['only_positive'][i] for m in measured]
                                   for i, c in enumerate(SETTINGS)},
                                **{f'{c} whole batch': [m['rows'][i]['end'] for m in measured]
                                   for i, c in enumerate(SETTINGS)}})
    below = sum(all(ties.compare(p, r['end'], tol_below) == ties.LOWER
                    for p, r in zip(m['only_positive'], m['rows'])) for m in measured)
    return '\n'.join([
        f'* **The covariance rule holds.** To first order the entropy moves by minus the covariance of log-probability '
        f'and logit update: in all four cases of an 8-token softmax the prediction is within {worst:.1%} of the exact '
        'change, rewarding a probable token lowers the entropy and rewarding a rare one raises it.',
        f'* **The upper clip binds disproportionately on rare tokens** on {claim["binds_on_rare_on"]} of {n} batch '
        'seeds: the rewarded tokens that end above it started below probability 0.5 more often than rewarded tokens in '
        'general (a larger share, not necessarily most of them).',
        f"* **The book's clip-higher reading {HEADLINE[claim['verdict']]}.** \"The tightest clip keeps the most "
        f'entropy\" {batch_counts(claim)}, so by the seed rule it {claim_verb(claim["verdict"])}. Our reading: '
        f'{EPS} = 0.2 and 0.28 barely differ (mean ends {claim["mean_end"]["0.2"]:.3f} and '
        f'{claim["mean_end"]["0.28"]:.3f}), so which of them ends highest changes from batch to batch (0.28 on '
        f'{claim["highest_on"]["0.28"]}, 0.2 on {claim["highest_on"]["0.2"]}, by the bare numbers). The bare numbers '
        f'also put the loosest clip below the tightest on {claim["tightest_above_loosest_on"]} of {n} batches, each '
        'gap inside the one-batch tolerance, and the mean gap '
        f'({claim["mean_end"]["0.2"] - claim["mean_end"]["100"]:.3f}) is '
        + (f'under the tie tolerance of {claim["tolerance_mean"]:.3f} for means of {n}: tied as well.'
           if _mean_tied(claim) else f'over the tie tolerance of {claim["tolerance_mean"]:.3f} for means of {n}.'),
        f"* **DAPO's prediction, the loosest clip keeps the most entropy, is not seen.** On the chapter's batch "
        f'{ranking(seed0, claim["tolerance_one"])}, the tolerance coming from the spread over the {n} batch seeds; '
        f'over the {n} batches {EPS} = 100 ends highest, by the bare numbers, on {claim["highest_on"]["100"]}.',
        f'* **Rewarded tokens alone lower the entropy** on {falls} of {n} batches at every clip, and end below the '
        f'whole batch beyond the one-batch tolerance ({tol_below:.3f}) at every clip on {below} of {n}: the '
        'penalised tokens are what holds the entropy up. On the chapter\'s batch '
        f'the rewarded-only ends are {and_join(f"{v:.3f}" for v in positive0.values())} at {EPS} = '
        f'{and_join(f"{c:g}" for c in SETTINGS)}, tied by their own tolerance of {tol_positive:.3f}.',
    ])


def summary(checks, claim, identical):
    """The closing bullets: the findings restated."""
    n = len(claim['seeds'])
    worst = max(abs(p - e) / abs(e) for p, e in checks.values())
    return '\n'.join([
        f'* The entropy moves by minus the covariance of log-probability and update, to within {worst:.1%} on the '
        'four cases: rewarding what is already probable sharpens the policy, which is why on-policy RL tends to lower '
        'the entropy.',
        '* The regularisers are plug-ins of chapter 9\'s engine; with every coefficient at zero the three-step run is '
        + ('bit-for-bit chapter 9\'s.' if identical else '**not** chapter 9\'s.'),
        f'* The upper clip binds disproportionately on rare rewarded tokens ({claim["binds_on_rare_on"]} of {n} '
        f"batches), the first step of DAPO's argument; the second, that loosening it keeps more entropy, is not seen: "
        f'{EPS} = 100 ends highest, by the bare numbers, on {claim["highest_on"]["100"]} of {n} batches.',
        f"* The book's reading, that the tightest clip keeps the most entropy, {batch_counts(claim)} "
        f'and so {claim_verb(claim["verdict"])} by the seed rule; by the bare numbers the tightest ends above the '
        f'loosest on {claim["tightest_above_loosest_on"]} of {n}, by a mean gap the tie rule '
        + ('also calls a tie.' if _mean_tied(claim) else 'calls a difference.'),
    ])


def report_claims(claim, notebook):
    """(Markdown lines for REPRODUCTION.md's 10.6 claims, the summary table's cell) from the recorded claim."""
    if not claim:
        return [], ''
    n = len(claim['seeds'])
    lines = ["### The chapter's claims on our runs\n",
             f'Judged on {n} batch seeds ({", ".join(map(str, claim["seeds"]))}; notebook {notebook[:2]}, '
             f'{seed_rule_text(n)}); the chapter prints batch seed 0.',
             '\n**Observations (the chapter\'s single-seed readings):**\n',
             f'- {claim["text"]} — **held on {claim["held_on"]}/{n} batch seeds'
             + (f', tied on {claim.get("tied_on", 0)}' if claim.get('tied_on') else '')
             + f' ({claim["verdict"]})**; the book\'s '
             f'ends {", ".join(f"{v:.3f}" for v in claim["book_end"].values())}, our means over the seeds '
             f'{", ".join(f"{v:.3f}" for v in claim["mean_end"].values())} at clip_high '
             f'{", ".join(claim["mean_end"])}', '']
    verdicts = [claim['verdict']]
    split, tied = verdicts.count(SEED_DEPENDENT), verdicts.count(TIED)
    return lines, (f'observations: {verdicts.count(HOLDS)} of 1 hold, {verdicts.count(DOES_NOT_HOLD)} do not'
                   + (f', {tied} tied' if tied else '') + (f', {split} seed-dependent' if split else ''))
