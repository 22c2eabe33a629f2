"""The mechanisms chapter 10 demonstrates, asserted on our TinyAgent runs (the runs notebooks 07 and 08 use).

Some of the chapter's mechanisms do not hold on our substrate (a different implementation of the book's chapters 1-9,
one seed). They are not tuned away: they are listed here with what we measured, the test asserts that they still do
not hold (so a change that makes them hold fails loudly and this list gets updated), and the notebooks and
REPRODUCTION.md print them as NOT held. Where the failing mechanism is a threshold (KL 1.0 holding the entropy, the
bonus 0.1 breaking the format), the same check at twice the coefficient or twice the steps is asserted to hold.
"""
import pytest

from agentrl import experiments
from agentrl.claims import AT_SCALE, CLAIMS, MECHANISM, evaluate_claims

NOT_HOLDING_HERE = {
    'kl-ordering': 'KL from the start falls with the coefficient, but the final entropy and the distinct count are not '
                   'monotone (KL 0.3 ends below KL 0.05)',
    'kl-1.0-holds-entropy': 'KL k3+ 1.0 loses about a fifth of its entropy, not under 15%',
    'bonus-breaks-format': 'entropy bonus 0.1 raises the entropy but nowhere near log V within 40 steps; about 2 invalid '
                           'calls per episode and pass@1 well above 0 (its runaway starts after step 40: see the '
                           '80-step re-check below)',
}


@pytest.fixture(scope='module')
def runs():
    """The nine chapter settings, the two reference-reset continuations and the three runs at twice the coefficient or
    the steps (from the run cache, else trained)."""
    arms = experiments.chapter_arms()
    anchored = next(spec for spec in arms if spec.name == 'KL k3+ 0.3')
    resets = [experiments.RunSpec(name, anchored.fields, steps=20, seed=1, init=anchored, reference=reference)
              for name, reference in [('keep the start as reference', 'rl_base'), ('reset reference to current', 'start')]]
    return experiments.run_all(arms + resets + experiments.scale_arms(), processes=2)


@pytest.mark.parametrize('claim', [c for c in CLAIMS if c.kind == MECHANISM], ids=lambda c: c.key)
def test_mechanism(claim, runs):
    result = claim.evaluate(runs)
    assert result is not None, f'a run that {claim.key} needs is missing'
    held, evidence = result
    if claim.key in NOT_HOLDING_HERE:
        assert not held, f'{claim.text} now holds ({evidence}): remove it from NOT_HOLDING_HERE and from the notes'
    else:
        assert held, f'{claim.text}: {evidence}'


# Each mechanism that does not hold at the chapter's setting must hold at twice its coefficient or its steps: the
# mechanism is there on our substrate, at a different scale (notebook 09 checks these on every seed).
@pytest.mark.parametrize('claim', [c for c in CLAIMS if c.kind == AT_SCALE], ids=lambda c: c.key)
def test_mechanism_at_twice_the_scale(claim, runs):
    held, evidence = claim.evaluate(runs)
    assert held, f'{claim.text}: {evidence}'


def test_every_claim_can_be_evaluated(runs):
    assert all(result is not None for _, result in evaluate_claims(runs))
