"""Notebook 14's opening: what the runs found, as markdown bullets written from the three studies' records."""
from agentrl.pretrained import bonus, covariance, estimator_text


def findings(estimates, steps, bonuses):
    """Bullets for 10.2 and 10.3 (estimator_text), 10.6's covariance rule and the entropy bonus -> markdown."""
    return '\n'.join([estimator_text.estimator_findings(estimates),
                      '- **10.6 on a real network.** ' + ' '.join(covariance.sentences(steps)),
                      '- **The entropy bonus on 49,152 tokens.** ' + ' '.join(bonus.sentences(bonuses))])


def summary(claim_rows):
    """The closing bullets: how many of the chapter's statements carry over to SmolLM2, and which do not."""
    from agentrl.pretrained.claims import FAILS, HOLDS, TIED

    held = [row for row in claim_rows if row['verdict'] == HOLDS]
    failed = [row for row in claim_rows if row['verdict'] == FAILS]
    tied = [row for row in claim_rows if row['verdict'] == TIED]
    forced = [row for row in held if row.get('forced_by')]
    lines = [f'* Of the chapter\'s {len(claim_rows)} statements about distributions judged here, {len(held)} carry over '
             f'to a real 135M-parameter language model and {len(failed)} do not'
             + (f', {len(tied)} tied' if tied else '') + ', each by the rule in its row.'
             + (f' {len(forced)} of those that carry over could not have failed on any model, so they check our '
                'arithmetic rather than the chapter: '
                + '; '.join(f'{row["statement"]} ({row["forced_by"]})' for row in forced) + '.' if forced else '')]
    if failed:
        lines.append('* Those that do not: ' + '; '.join(f'{row["statement"]} ({row["section"]}: {row["ours"]})'
                                                       for row in failed) + '.')
    if tied:
        lines.append('* Tied, inside their noise: ' + '; '.join(f'{row["statement"]} ({row["ours"]})' for row in tied)
                     + '.')
    return '\n'.join(lines)
