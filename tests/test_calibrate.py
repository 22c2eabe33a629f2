"""make calibrate's table: means over seeds checked against the bands, each row read from the measurements."""
import copy
import dataclasses
import json
import re

import pytest
import torch

import agentrl as arl
from agentrl import chapter
from agentrl.calibration import fit, measure as calibration_measure, rows as calibration_rows
from agentrl.calibration.freeze import FALLBACK_CANDIDATES
from agentrl.substrate.config import CANDIDATES, DEFAULT, SubstrateConfig
from machinery import calibrate


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
               heldout=dict(pass1=0.725, pass8=0.8, distinct=4.3, invalid=0.04, kl_start=0.237))
    out.update(overrides)
    return out


def push(**overrides):
    """One batch seed's push with the book's values."""
    return {**dict(rewarded=121, rare=17, last_clip_frac=0.114, entropy_before=0.55, entropy_after=0.50), **overrides}


def test_the_books_own_values_hold_every_row_at_distance_zero():
    rows = calibration_rows.judge([measurements()] * 3, [push()] * 10)
    assert len(rows) == len(calibration_rows.ROWS) == 26
    assert calibration_rows.rows_held(rows) == 26 and calibration_rows.band_distance(rows) == 0.0, [r for r in rows if not r.holds]


@pytest.mark.parametrize('seed_change, batch_change, quantity', [
    (dict(vocab=260), {}, 'vocabulary'),
    (dict(heldout=dict(pass1=0.725, pass8=1.0, distinct=4.3, invalid=0.04, kl_start=0.237)), {}, 'pass@8'),
    ({}, dict(last_clip_frac=0.55), 'clip_frac'),
])
def test_a_measurement_outside_its_band_fails_its_row_only(seed_change, batch_change, quantity):
    rows = calibration_rows.judge([measurements(**seed_change)] * 3, [push(**batch_change)] * 10)
    failing = [row.quantity for row in rows if not row.holds]
    assert failing and all(quantity in name for name in failing), failing


def test_the_band_is_judged_on_the_mean_over_seeds_not_on_each_seed():
    low, high = measurements(vocab=270), measurements(vocab=340)  # 270 alone is outside 280-350; the mean 305 is in
    assert calibration_rows.judge([low, high], [push()])[0].holds is True
    assert calibration_rows.judge([low, low], [push()])[0].holds is False


def test_the_push_rows_are_judged_over_the_batch_seeds():
    rows = calibration_rows.judge([measurements()], [push(last_clip_frac=0.30), push(last_clip_frac=0.0)])  # mean 0.15
    clip = next(r for r in rows if 'clip_frac' in r.quantity)
    assert clip.values == (0.30, 0.0) and clip.holds
    rows = calibration_rows.judge([measurements()], [push(last_clip_frac=0.30), push(last_clip_frac=0.20)])
    assert not next(r for r in rows if 'clip_frac' in r.quantity).holds


def test_band_distance_is_the_gap_to_the_nearest_edge_in_band_widths():
    # two-sided: vocabulary band 280-350 (width 70); 385 is 35 above: half a width
    row = calibration_rows.judge([measurements(vocab=385)], [push()])[0]
    assert not row.holds and row.distance == pytest.approx(0.5)
    row = calibration_rows.judge([measurements(vocab=266)], [push()])[0]
    assert row.distance == pytest.approx(0.2)
    # one-sided: invalid calls <= 0.10, width 0.1; 0.25 is 1.5 widths above
    held = dict(pass1=0.725, pass8=0.8, distinct=4.3, invalid=0.25, kl_start=0.237)
    rows = calibration_rows.judge([measurements(heldout=held)], [push()])
    assert calibration_rows.band_distance(rows) == pytest.approx(1.5) and calibration_rows.rows_held(rows) == 25


def test_a_named_or_described_configuration_is_chosen_and_a_bad_one_refused():
    assert calibrate.chosen_config(None, None) == DEFAULT
    assert calibrate.chosen_config('c18', None) == CANDIDATES['c18']
    described = json.dumps(CANDIDATES['c18'].describe())
    assert calibrate.chosen_config(None, described) == CANDIDATES['c18']
    with pytest.raises(ValueError, match='not a named configuration'):
        calibrate.chosen_config('c99', None)
    with pytest.raises(ValueError, match='unknown fields'):
        SubstrateConfig.from_description({'optimizer': 'sgd'})


def test_the_long_run_keeps_the_short_run_and_its_policy_bit_for_bit():
    """measure_seed trains once for long_steps and evaluates the policy after short_steps: the same as two runs."""
    protocol = calibration_measure.Protocol(seeds=(0,), short_steps=2, long_steps=3, attempts=8)
    measured = calibration_measure.measure_seed(DEFAULT, 0, protocol)
    tok, train, heldout, base = calibration_measure.prepare(DEFAULT)
    model = copy.deepcopy(base)
    short = arl.train_rl(model, train, tok, arl.RLConfig(seed=0, eval_every=0), 2)
    assert measured['run40'] == short and measured['run80'][:2] == short and len(measured['run80']) == 3
    assert measured['heldout'] == arl.diversity(model, base, heldout, tok, n=8)


def test_a_step_without_learning_signal_counts_as_clipping_nothing():
    seed = measurements()
    for step in (3, 4):  # skipped_update's record: entropy and grad_norm, no clip_frac
        del seed['run40'][step]['clip_frac']
    clip = next(r for r in calibration_rows.judge([seed], [push()]) if 'clipped over the run' in r.quantity)
    assert clip.mean == pytest.approx(0.0013 * 38 / 40)


def test_a_calibration_can_be_measured_on_seeds_no_notebook_uses_and_refuses_bad_seed_lists():
    protocol = calibrate.chosen_protocol('search', [10, 11, 12], list(range(20, 30)))
    assert protocol.seeds == (10, 11, 12) and protocol.batch_seeds == tuple(range(20, 30))
    assert protocol.short_steps == calibration_measure.SEARCH.short_steps and protocol.long_steps == calibration_measure.SEARCH.long_steps
    assert calibrate.chosen_protocol('confirmation') == calibration_measure.CONFIRMATION
    assert calibrate.chosen_protocol('confirmation', batch_seeds=[3]).seeds == calibration_measure.CONFIRMATION.seeds
    for bad in ([1, 1], [], [-1]):
        with pytest.raises(ValueError, match='--seeds needs distinct seeds >= 0'):
            calibrate.chosen_protocol('search', bad)


def numbers_in(text):
    """The numbers written in `text` ('157,244' -> 157244.0, '0.52-0.57' -> 0.52, 0.57; a leading minus only after a
    space or at the start)."""
    return [float(n.replace(',', '')) for n in re.findall(r'(?:(?<=\s)|^)-?\d[\d,]*(?:\.\d+)?|\d+(?:\.\d+)?', text)]


def test_every_row_said_to_be_printed_in_an_output_block_is_printed_there():
    """A row 'shown' as output of a section: each number of its book value (or, for a word such as 'falls', the
    numbers in its note) appears as a number in that section's printed lines (in the line of the run 'none' when the
    row is said to be that run's)."""
    checked = 0
    for spec in calibration_rows.ROWS:
        if not spec.shown.startswith('output'):
            continue
        sections = re.findall(r'10\.\d', spec.shown)
        lines = [line for block in chapter.book_blocks() if block.section in sections for line in block.lines
                 if 'none' not in spec.shown or line.startswith('none ')]
        printed = {value for line in lines for value in numbers_in(line.replace('|', ' ').replace(':', ' '))}
        wanted = numbers_in(spec.book.replace('-', ' ')) or numbers_in(spec.shown.split('(', 1)[1])
        assert wanted and all(value in printed for value in wanted), (spec.quantity, spec.shown, wanted)
        checked += 1
    assert checked == calibration_rows.fitted_counts()['output'] >= 19


def test_the_rows_fitted_are_counted_by_where_the_chapter_shows_them():
    assert sum(calibration_rows.fitted_counts().values()) == len(calibration_rows.ROWS) == 26
    odd = calibration_rows.ROWS[:1] + [dataclasses.replace(calibration_rows.ROWS[1], shown='somewhere 10.7')]
    with pytest.raises(ValueError, match=r"shown as \['somewhere'\]; a row is shown as one of"):
        calibration_rows.fitted_counts(odd)


def test_at_turn_cost_zero_the_advantages_are_the_chapters_group_normalised_ones_even_with_turns_recorded():
    rewards, turns = torch.tensor([1.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0]), torch.tensor([3, 2, 5, 1, 3, 3, 4, 3])
    got = arl.compute_advantages(dict(rewards=rewards, n_turns=turns), arl.RLConfig(group_size=4, turn_cost=0.0))
    groups = rewards.view(2, 4)
    chapter_grpo = (groups - groups.mean(dim=1, keepdim=True)) / (groups.std(dim=1, keepdim=True) + 1e-6)
    assert torch.equal(got, chapter_grpo.view(-1))


def test_the_worked_example_of_the_per_turn_cost():
    plain, costly = fit.turn_cost_example(0.0)
    assert plain == costly == pytest.approx(-0.125 / (8 / 7 * 0.125 * 0.875) ** 0.5, abs=1e-5)  # (0 - 1/8) / std
    plain, costly = fit.turn_cost_example(0.388)
    assert costly == pytest.approx(plain + 0.388 * (3 - 2), abs=1e-6)  # two turns against the group's mean of three
    assert sum(fit.EXAMPLE_TURNS) / len(fit.EXAMPLE_TURNS) == 3 and fit.EXAMPLE_TURNS[fit.EXAMPLE_EPISODE] == 2


def test_the_fit_note_says_what_the_record_says_and_links_the_page():
    facts = fit.fit_facts('t45')
    assert (facts['trial'], facts['rows_held'], facts['confirmation_rows_held']) == (45, 24, 23) and facts['by_fallback']
    assert facts['compared'] == FALLBACK_CANDIDATES == 5 and facts['example'][1] == pytest.approx(0.035, abs=5e-4)
    note = fit.fit_note(facts)
    assert note.count('. ') == 1 and '[TINYAGENT.md](../TINYAGENT.md)' in note  # two sentences and the link
    assert f"{facts['counts']['output']} printed in chapter 10's output blocks" in note
    assert 'only the regularised settings were held out' in note and "trial 45's `turn_cost`" in note
    assert '[TINYAGENT.md](TINYAGENT.md)' in fit.fit_note(facts, link='TINYAGENT.md')
    assert 'the best of three on the confirmation seeds, so that count is a selected maximum' in fit.below_the_rule(24, 3)


def test_the_fit_clause_of_the_readme_says_what_was_fitted_and_held_out():
    clause = fit.fit_clause(26, calibration_rows.fitted_counts())
    assert clause == ("fitted to bands around 26 of the book's numbers on the RL base, the unregularised run and the "
                      "single 10.6 batch, that batch pushed at 10.6's own settings (19 printed in chapter 10's output "
                      "blocks, 5 stated in its prose, 2 derived), with only the regularised settings held out")
