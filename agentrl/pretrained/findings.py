"""Notebook 14's opening: what the runs found, as markdown bullets written from the three studies' records."""
from agentrl.pretrained import bonus, covariance, estimator_text


def findings(estimates, steps, bonuses):
    """Bullets for 10.2 and 10.3 (estimator_text), 10.6's covariance rule and the entropy bonus -> markdown."""
    return '\n'.join([estimator_text.estimator_findings(estimates),
                      '- **10.6 on a real network.** ' + ' '.join(covariance.sentences(steps)),
                      '- **The entropy bonus on 49,152 tokens.** ' + ' '.join(bonus.sentences(bonuses))])
