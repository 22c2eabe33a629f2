"""The chapter's distribution statements judged on SmolLM2: one row per statement, the book's number, ours, and
whether the statement carries over, each by the rule its row states.

The rules were written on 2026-12-06, after a first exploratory run of notebook 14 at seed 0 and before the runs
at other seeds; each is stated in the row, so a reader can apply it to the numbers beside it.
"""
from agentrl.pretrained import bonus
from agentrl.pretrained.estimator_text import IDENTITY_TOLERANCE, book_gradient_rows, book_moment_rows

import math

HOLDS, FAILS, TIED = 'carries over', 'does not carry over', 'tied'
MOSTLY = 0.5  # "mostly" means more than half
BEGIN = '<!-- real-model claims: begin (written by make report; do not edit by hand) -->'
END = '<!-- real-model claims: end -->'


def _row(section, statement, book, ours, holds, rule, forced_by=None):
    """One statement. holds: True, False, or TIED when the decisive gap is inside its noise. forced_by: why no data
    of this kind could make the row fail, when that is so (the row is then a check, not evidence)."""
    verdict = TIED if holds == TIED else HOLDS if holds else FAILS
    return {'section': section, 'statement': statement, 'book': book, 'ours': ours, 'verdict': verdict, 'rule': rule,
            'forced_by': forced_by}


def raised_bound(entropy, vocab_size):
    """The fewest tokens with log pi < -H that any distribution of entropy H over vocab_size tokens has: at most e^H
    tokens can have pi >= e^-H, so at least V - floor(e^H) lie below it."""
    return vocab_size - math.floor(math.exp(entropy))


def _mostly(values, tol_z=bonus.Z):
    """True, False or TIED: whether the mean of per-position values is above MOSTLY, tied when within z standard
    errors of it."""
    word = bonus.paired_compare(values, [MOSTLY] * len(values), tol_z)
    return TIED if word == 'tied' else word == 'higher'


def _increasing(values):
    return all(a < b for a, b in zip(values, values[1:]))


def claim_rows(estimates, steps, bonuses, checkpoint='next checkpoint'):
    """[row dict] for notebook 14's statements, from the three studies' records (EstimatorStudy, CovarianceRun,
    BonusRun)."""
    book, book_grad = book_moment_rows(), book_gradient_rows()
    pairs = sorted(estimates.pairs, key=lambda p: p['kl_mean'])
    step = next(p for p in pairs if p['name'] == checkpoint)
    far = pairs[-1]
    unbiased = [p['pooled'][k][0] for p in pairs for k in ('k1', 'k3')]
    k2 = [p['pooled']['k2'][0] for p in pairs]
    k3_spread = [p['pooled']['k3'][1] for p in pairs]
    grad_errors = [p['gradients']['k3']['error reverse'] for p in sorted(pairs, key=lambda p: p['gradients']['kl_mean'])]
    identities = all(p['gradients'][kind][f'error {target}'] < IDENTITY_TOLERANCE
                     for p in pairs for kind, target in (('k2', 'reverse'), ('k3', 'forward'), ('k3+', 'reverse')))
    k1_zero = max(p['gradients']['k1']['norm'] / p['gradients']['norms']['reverse KL'] for p in pairs)
    worst = max(steps.cases, key=lambda c: c.relative_error)
    signs = all((c.predicted > 0) == (c.actual > 0) == (c.ideal_predicted > 0) for c in steps.cases)
    typical = bonuses.typical
    alone, ref = bonuses.variant('bonus'), bonuses.reference
    never = bonus.paired_compare(alone.per_position['never_emitted'], ref.per_position['never_emitted'])
    bound = raised_bound(typical['entropy'], bonuses.vocab_size)
    never_mostly = _mostly(alone.per_position['never_emitted']) if never == 'higher' else never == 'higher'
    small_ratio = step['pooled']['k1'][1] / step['pooled']['k3'][1]
    book_small = book[0]['k1'][1] / book[0]['k3'][1]
    return [
        _row('10.2', 'k1 and k3 are unbiased (mean/KL 1.000)', '1.000 at 4 distances',
             f'{min(unbiased):.3f} to {max(unbiased):.3f} at {len(pairs)} pairs',
             all(abs(v - 1) < 5e-4 for v in unbiased), 'every pair rounds to 1.000',
             forced_by='summed exactly over the vocabulary, E[k1] and E[k3] equal the KL for any two distributions, so '
                       'only a wrong sum could miss 1.000'),
        _row('10.2', 'k2 overestimates the KL, more so with distance',
             f'mean/KL {book[0]["k2"][0]:.3f} to {book[-1]["k2"][0]:.3f}',
             f'{" ".join(f"{v:.3f}" for v in k2)}, pairs by KL', all(v > 1 for v in k2) and _increasing(k2),
             'every pair above 1, rising with KL'),
        _row('10.2', 'the per-token KL between adjacent checkpoints is about 0.001', f'{book[0]["kl"]:g} (not measured)',
             f'{step["kl_mean"]:.1e} after one Adam step at lr {estimates.step["lr"]:g}',
             1 / 3 <= step['kl_mean'] / book[0]['kl'] <= 3, 'within a factor 3 of 0.001'),
        _row('10.2', 'near the reference one k1 draw is far noisier than one k3 draw',
             f'std/KL {book[0]["k1"][1]} against {book[0]["k3"][1]} (ratio {book_small:.0f})',
             f'{step["pooled"]["k1"][1]:.1f} against {step["pooled"]["k3"][1]:.2f} (ratio {small_ratio:.0f})',
             small_ratio > 10, 'ratio above 10 at the closest pair'),
        _row('10.2', 'one k3 draw scatters about as widely as the KL itself',
             f'std/KL {min(r["k3"][1] for r in book)} to {max(r["k3"][1] for r in book)}',
             f'{min(k3_spread):.2f} to {max(k3_spread):.1f}', max(k3_spread) <= 2, 'std/KL at most 2 at every pair'),
        _row('10.2', 'near KL 1, k3 scatters about as much as k1',
             f'{book[-1]["k3"][1]} against {book[-1]["k1"][1]} at KL {book[-1]["kl"]}',
             f'{far["pooled"]["k3"][1]:.1f} against {far["pooled"]["k1"][1]:.2f} at KL {far["kl_mean"]:.2f}',
             0.5 <= far['pooled']['k3'][1] / far['pooled']['k1'][1] <= 2, 'ratio within a factor 2'),
        _row('10.3', 'as losses, k1 gives zero, k2 the reverse-KL, k3 the forward-KL gradient, k3+ follows reverse',
             'errors 0.0000 (6 outcomes)', f'‖k1‖ ≤ {k1_zero:.0e} of ‖reverse‖; identities within {IDENTITY_TOLERANCE} '
             f'through {estimates.parameters:,} parameters', identities and k1_zero < IDENTITY_TOLERANCE,
             f'every relative error under {IDENTITY_TOLERANCE} at every pair',
             forced_by='each gradient is an identity of its estimator\'s algebra, whatever the model, so only rounding '
                       'or a wrong loss could break it'),
        _row('10.3', "k3's gradient error against reverse KL grows with distance",
             f'{book_grad[0]["k3"]:.3f} at KL {book_grad[0]["kl"]} to {book_grad[-1]["k3"]:.3f} at {book_grad[-1]["kl"]}',
             f'{grad_errors[0]:.3f} to {grad_errors[-1]:.2f}', _increasing(grad_errors), 'rising with KL at every pair'),
        _row('10.6', 'the first-order rule -Cov(log pi, dz) predicts the entropy change within 1%',
             'within 1% (8 free logits)', f'within {worst.relative_error:.1%} after one SGD step at lr {worst.lr:g}',
             worst.relative_error <= 0.01, 'every case within 1%'),
        _row('10.6', 'the entropy change follows the covariance sign in the four cases', 'all four',
             'all four' if signs else 'not all four', signs, 'network, rule and idealised step agree in sign'),
        _row('10.6', 'the entropy bonus raises every token with log pi below -H: nearly the whole vocabulary',
             'said, on 316 tokens', f'{typical["raised"]:,} of {bonuses.vocab_size:,} at the median position; the '
             f'median entropy there, {typical["entropy"]:.2f} nats, forces at least {bound:,} (at most e^H = '
             f'{math.exp(typical["entropy"]):.2f} tokens can sit above e^-H)',
             typical['raised'] >= 0.99 * bonuses.vocab_size, 'at least 99% of the vocabulary',
             forced_by=f'at entropy H at most e^H tokens can have log pi >= -H, so any position with H below '
                       f'{math.log(0.01 * bonuses.vocab_size):.1f} nats meets the rule'),
        _row('10.6', 'the tokens it raises are mostly ones the policy should never emit', 'said, not measured',
             f'mass on tokens the reference never emitted {ref.mean("never_emitted"):.3f} → {alone.mean("never_emitted"):.3f} '
             f'after {bonuses.steps} steps of the bonus alone ({never} than the reference)', never_mostly,
             f'more than half ({MOSTLY:g}) of the mass on tokens the reference never emitted after the bonus, beyond 2 '
             'standard errors (within them: tied)'),
    ]


def markdown(rows, seed=0):
    """The rows as a Markdown table, with a line that says how to read it (and which seed measured them)."""
    forced = [row for row in rows if row.get('forced_by')]
    lines = ['Each of the chapter\'s statements about distributions, measured exactly on SmolLM2-135M-Instruct '
             f'(notebook 14, seed {seed}), beside the book\'s number; a statement **carries over** when it meets the rule '
             'in its row, and is **tied** when the gap that decides it is inside its noise.'
             + ''.join(f' The row "{row["statement"]}" could not fail here: {row["forced_by"]}.' for row in forced),
             '',
             '| section | the chapter says | book | SmolLM2 | verdict | rule |', '|---|---|---|---|---|---|']
    for row in rows:
        lines.append(f'| {row["section"]} | {row["statement"]} | {row["book"]} | {row["ours"]} | **{row["verdict"]}** '
                     f'| {row["rule"]} |')
    return lines
