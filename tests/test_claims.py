"""The mechanisms chapter 10 demonstrates, asserted on our TinyAgent runs (the runs notebooks 07 and 08 use)."""
import pytest

from agentrl import experiments
from agentrl.claims import CLAIMS, MECHANISM, evaluate_claims


@pytest.fixture(scope='module')
def runs():
    """The nine chapter settings and the two reference-reset continuations (from the run cache, else trained)."""
    arms = experiments.chapter_arms()
    anchored = next(spec for spec in arms if spec.name == 'KL k3+ 0.3')
    resets = [experiments.RunSpec(name, anchored.fields, steps=20, seed=1, init=anchored, reference=reference)
              for name, reference in [('keep the start as reference', 'rl_base'), ('reset reference to current', 'start')]]
    return experiments.run_all(arms + resets, processes=2)


@pytest.mark.parametrize('claim', [c for c in CLAIMS if c.kind == MECHANISM], ids=lambda c: c.key)
def test_mechanism_holds(claim, runs):
    result = claim.evaluate(runs)
    assert result is not None, f'a run that {claim.key} needs is missing'
    held, evidence = result
    assert held, f'{claim.text}: {evidence}'


def test_every_claim_can_be_evaluated(runs):
    assert all(result is not None for _, result in evaluate_claims(runs))
