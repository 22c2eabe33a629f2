"""make calibrate's table: means over seeds checked against the bands, each row read from the measurements."""
import pytest

from agentrl.build import calibrate


def measurements(**overrides):
    """One seed's measurements with every quantity in the middle of its band (the book's values where given)."""
    history = [dict(reward=0.17, reads=0.22, entropy=0.55, policy_tokens=13.0, clip_frac=0.0013) for _ in range(80)]
    for step, reward, entropy in [(5, 0.22, 0.5), (10, 0.41, 0.37), (20, 0.72, 0.18), (39, 0.86, 0.12)]:
        history[step].update(reward=reward, entropy=entropy)
    for step in range(35, 40):
        history[step]['entropy'] = 0.12
    history[39]['reads'] = 0.98
    long = [dict(h) for h in history]
    for step in range(75, 80):
        long[step]['entropy'] = 0.08
    out = dict(seed=0, vocab=316, params=157_244, run40=history[:40], run80=long,
               push=dict(rewarded=121, rare=17, last_clip_frac=0.114, entropy_before=0.55, entropy_after=0.50),
               heldout=dict(pass1=0.725, pass8=0.8, distinct=4.3, invalid=0.04, kl_start=0.237))
    out.update(overrides)
    return out


def test_the_books_own_values_hold_every_row():
    rows = calibrate.table([measurements()] * 3)
    assert len(rows) == len(calibrate.ROWS) and all(row[-1] for row in rows), [r for r in rows if not r[-1]]


@pytest.mark.parametrize('change, quantity', [
    (dict(vocab=260), 'vocabulary'),
    (dict(heldout=dict(pass1=0.725, pass8=1.0, distinct=4.3, invalid=0.04, kl_start=0.237)), 'pass@8'),
    (dict(push=dict(rewarded=121, rare=17, last_clip_frac=0.55, entropy_before=0.5, entropy_after=0.6)), 'clip_frac'),
])
def test_a_measurement_outside_its_band_fails_its_row_only(change, quantity):
    rows = calibrate.table([measurements(**change)] * 3)
    failing = [row[0] for row in rows if not row[-1]]
    assert len(failing) >= 1 and all(quantity in name or 'after minus before' in name for name in failing), failing


def test_the_band_is_judged_on_the_mean_over_seeds_not_on_each_seed():
    low, high = measurements(vocab=270), measurements(vocab=340)  # 270 alone is outside 280-350; the mean 305 is in
    assert calibrate.table([low, high])[0][-1] is True
    assert calibrate.table([low, low])[0][-1] is False


def test_a_variant_with_unknown_parts_is_refused():
    with pytest.raises(ValueError, match='unknown parts'):
        calibrate.Variant.from_json('{"optimizer": {}}')
    assert calibrate.Variant.from_json('{"rl": {"lr": 3e-4}}').rl_config().lr == 3e-4
