"""The real model's claim rules on made-up runs: each can hold, fail and tie, and reads what it says it reads."""
import math

import pytest

from agentrl.ch10.claims import DOES_NOT_HOLD, HOLDS, TIED, seed_verdict
from agentrl.realrl import claims

V = 49152


def fake_run(start=1.0, end=0.2, kl=0.05, kl_ref=None, fmt=0.9, pass1=0.7, pass8=0.85, steps=12, jitter=0.0):
    """A run whose quantities are the given numbers: entropy falls linearly from `start` to `end` over the first
    and last claims.WINDOW steps' means, the other logs are flat. Like the sweep's runs, only a run given kl_ref (a KL
    term in its loss) logs one."""
    history = []
    for step in range(steps):
        share = step / (steps - 1)
        history.append(dict(entropy=start + (end - start) * share + jitter, kl_exact=kl + jitter, format=fmt - jitter))
        if kl_ref is not None:
            history[-1]['kl_ref'] = kl_ref + jitter
    # move the two windows' means onto the given numbers exactly
    first, last = history[:claims.WINDOW], history[-claims.WINDOW:]
    for window, target in ((first, start + jitter), (last, end + jitter)):
        shift = target - sum(s['entropy'] for s in window) / len(window)
        for s in window:
            s['entropy'] += shift
    curve = [min(1.0, pass1 + (pass8 - pass1) * (k - 1) / 7) + jitter for k in range(1, 33)]
    return dict(history=history, evaluation=dict(pass_at_k=curve), vocab_size=V)


def world(jitter=0.0, **changes):
    """One seed's runs in which every claim holds by a wide margin; changes: {setting: fake_run overrides}."""
    runs = {
        'none': dict(start=1.0, end=0.2, kl=0.30, pass1=0.80, pass8=0.85, fmt=0.95),
        'KL k3 0.3': dict(start=1.0, end=0.5, kl=0.10, kl_ref=0.10, pass1=0.70, pass8=0.90),
        'KL k3 1.0': dict(start=1.0, end=0.95, kl=0.02, kl_ref=0.02, pass1=0.60, pass8=0.92),
        'KL reward 0.3': dict(start=1.0, end=0.7, kl=0.05, pass1=0.70, pass8=0.93),
        'entropy 0.03': dict(start=1.0, end=0.6, kl=0.60, fmt=0.5),
        'temperature 1.3': dict(start=1.2, end=0.6, kl=0.60, fmt=0.5),
        'clip-higher 0.28': dict(start=1.0, end=0.5),
        'Clip-Cov': dict(start=1.0, end=0.5),
        'KL-Cov': dict(start=1.0, end=0.5),
        'KL k3 0.3, reset at half': dict(start=1.0, end=0.3, kl_ref=0.02),
        'entropy 0.1': dict(start=1.0, end=10.5, fmt=0.01, pass1=0.0, pass8=0.0),
    }
    for name, extra in changes.items():
        runs[name] = {**runs[name], **extra}
    return {name: fake_run(jitter=jitter, **options) for name, options in runs.items()}


def verdicts(seeds_runs):
    return {c.key: seed_verdict(c, seeds_runs, list(range(len(seeds_runs))))['verdict'] for c in claims.CLAIMS}


SMALL_NOISE = [world(j) for j in (-0.002, 0.0, 0.002)]


def test_every_claim_reads_only_settings_the_sweep_defines():
    for claim in claims.CLAIMS:
        assert set(claim.needs) <= set(claims.SETTINGS), claim.key
    assert len({c.key for c in claims.CLAIMS}) == len(claims.CLAIMS)
    assert set(claims.ARMS) | {'entropy 0.1'} == set(claims.SETTINGS)


def test_in_a_world_made_to_agree_every_claim_holds():
    assert set(verdicts(SMALL_NOISE).values()) == {HOLDS}


@pytest.mark.parametrize('key, change', [
    ('collapse', {'none': dict(end=0.9)}),
    ('kl-ordering', {'KL k3 1.0': dict(end=0.3)}),
    ('kl-1.0-holds-entropy', {'KL k3 1.0': dict(end=0.5)}),
    ('reward-placement-stronger', {'KL reward 0.3': dict(kl=0.5)}),
    ('bonus-and-temperature-move-away', {'temperature 1.3': dict(kl=0.01)}),
    ('reset-lowers-kl', {'KL k3 0.3, reset at half': dict(kl_ref=0.5)}),
    ('bonus-breaks-format', {'entropy 0.1': dict(fmt=0.6)}),
    ('kl-raises-pass8', {'KL reward 0.3': dict(pass8=0.5)}),
    ('kl-costs-pass1', {'KL k3 1.0': dict(pass1=0.9)}),
    ('bonus-slows-collapse', {'entropy 0.03': dict(end=0.05)}),
    ('temperature-delays-only', {'temperature 1.3': dict(end=1.5)}),
    ('more-invalid-calls', {'entropy 0.03': dict(fmt=0.99)}),
    ('collapse-misses-tasks', {'none': dict(pass8=1.0, pass1=0.95)}),
    ('reset-lowers-entropy', {'KL k3 0.3, reset at half': dict(end=0.9)}),
    ('clip-higher-keeps-entropy', {'clip-higher 0.28': dict(end=0.1)}),
    ('clip-cov-keeps-entropy', {'Clip-Cov': dict(end=0.1)}),
    ('kl-cov-keeps-entropy', {'KL-Cov': dict(end=0.1)}),
])
def test_each_claim_fails_when_its_own_numbers_go_the_other_way(key, change):
    found = verdicts([world(j, **change) for j in (-0.002, 0.0, 0.002)])
    assert found[key] == DOES_NOT_HOLD
    assert all(v == HOLDS for k, v in found.items() if k != key and not set(change) & set(
        next(c for c in claims.CLAIMS if c.key == k).needs))


def test_a_gap_inside_the_seeds_noise_is_a_tie_not_a_finding():
    # entropy 0.03 ends 0.01 above none while the final entropies scatter by 0.1 over the seeds
    noisy = [world(j, **{'entropy 0.03': dict(end=0.21)}) for j in (-0.1, 0.0, 0.1)]
    assert verdicts(noisy)['bonus-slows-collapse'] == TIED


def test_the_format_claim_reads_the_log_of_the_vocabulary():
    runs = world()
    bound = next(c for c in claims.CLAIMS if c.key == 'bonus-breaks-format').bounds[0]
    assert bound.read(runs) == pytest.approx(10.5 - 0.9 * math.log(V))
