"""Section 10.6's clip-higher measurement on batch seeds, and the book's reading judged as a claim."""
import pytest
import torch

from agentrl import chapter, results
from agentrl.ch10 import clip_higher, ties
from agentrl.ch10.claims import DOES_NOT_HOLD, HOLDS, OBSERVATION, TIED, outcome_rule
from agentrl.paths import RESULTS

NOTEBOOK = '06_entropy_collapse'


def fake_batch(seed, ends, positive=(0.3, 0.3, 0.3), rows_above=((4, 3), (5, 3), (1, 1)), rewarded=100, rare=10):
    """A measure_batch dict with the given whole-batch ends (SETTINGS order)."""
    rows = [dict(clip_high=c, start=0.5, end=e, above=a, above_rare=r, last_clip_frac=0.1)
            for c, e, (a, r) in zip(clip_higher.SETTINGS, ends, rows_above)]
    return dict(seed=seed, rewarded=rewarded, rewarded_rare=rare, rows=rows, only_positive=list(positive))


def measured_with(holding, n=10):
    """n fake batches, the tightest clip ending strictly highest on the first `holding` of them."""
    return [fake_batch(k, (0.45 + 0.01 * k, 0.40, 0.35) if k < holding else (0.40, 0.45 + 0.01 * k, 0.35))
            for k in range(n)]


def test_the_claim_is_judged_by_the_seed_rule_on_ten_batches():
    # each batch's outcome under the tie rule, counted by the majority of 10: at least 6 holds, at least 6 fails
    for holding in (6, 5, 4, 10, 0):
        judged = clip_higher.claim(measured_with(holding))
        assert judged['held'] == [k < holding for k in range(10)]  # the bare check, batch by batch
        ends = clip_higher.ends(measured_with(holding))
        assert judged['outcomes'] == [clip_higher.tightest_outcome({c: ends[c][k] for c in clip_higher.SETTINGS},
                                                                   judged['tolerance_one']) for k in range(10)]
        assert judged['held_on'] == judged['outcomes'].count(HOLDS)
        assert judged['tied_on'] == judged['outcomes'].count(TIED)
        assert judged['verdict'] == outcome_rule(judged['outcomes'])
    # when the tightest clip swaps places with another from batch to batch, that swap is the batches' spread, and the
    # gaps fall inside it: tied, not a count of wins
    assert clip_higher.claim(measured_with(6))['verdict'] == TIED
    steady = [fake_batch(k, (0.50 + 0.001 * k, 0.40, 0.35)) for k in range(10)]
    judged = clip_higher.claim(steady)
    assert (judged['held_on'], judged['tied_on'], judged['verdict']) == (10, 0, HOLDS)
    beaten = [fake_batch(k, (0.40, 0.50 + 0.001 * k, 0.35)) for k in range(10)]
    assert clip_higher.claim(beaten)['verdict'] == DOES_NOT_HOLD
    judged = clip_higher.claim(measured_with(6))
    assert (judged['holds_from'], judged['fails_up_to'], judged['kind']) == (6, 4, OBSERVATION)
    assert judged['seeds'] == list(range(10))
    assert judged['tightest_above_loosest_on'] == 10 and judged['binds_on_rare_on'] == 10


def test_the_tightest_clip_must_end_strictly_highest():
    assert clip_higher.tightest_keeps_most({0.2: 0.5, 0.28: 0.4, 100.0: 0.3})
    assert not clip_higher.tightest_keeps_most({0.2: 0.5, 0.28: 0.5, 100.0: 0.3})  # a draw is not 'the most'
    assert not clip_higher.tightest_keeps_most({0.2: 0.3, 0.28: 0.4, 100.0: 0.5})


def test_the_claim_records_means_counts_and_the_tolerances_of_the_tie_rule():
    measured = measured_with(6)
    judged = clip_higher.claim(measured)
    by_setting = clip_higher.ends(measured)
    assert judged['mean_end']['0.2'] == pytest.approx(sum(by_setting[0.2]) / 10)
    assert judged['tolerance_one'] == pytest.approx(ties.tolerance(by_setting))
    assert judged['tolerance_mean'] == pytest.approx(ties.tolerance(by_setting, 10))
    assert judged['highest_on'] == {'0.2': 6, '0.28': 4, '100': 0}
    assert judged['book_end'] == {'0.2': 0.538, '0.28': 0.531, '100': 0.508}


def test_binds_on_rare_needs_rare_tokens_overrepresented_above_both_binding_clips():
    rows = {0.2: dict(above=4, above_rare=3), 0.28: dict(above=5, above_rare=3), 100.0: dict(above=0, above_rare=0)}
    assert clip_higher.binds_on_rare(rows, 100, 10)
    rows[0.28] = dict(above=5, above_rare=0)
    assert not clip_higher.binds_on_rare(rows, 100, 10)
    rows[0.28] = dict(above=0, above_rare=0)  # nothing above the clip: it binds on nothing
    assert not clip_higher.binds_on_rare(rows, 100, 10)


def test_the_book_batch_is_parsed_from_the_printed_block():
    rewarded, rare, rows = clip_higher.book_batch()
    assert (rewarded, rare) == (121, 17)
    assert [rows[c]['end'] for c in clip_higher.SETTINGS] == [0.538, 0.531, 0.508]
    assert (rows[0.2]['above'], rows[0.2]['above_rare']) == (20, 15)
    assert len(chapter.blocks_of('10.6')[2].lines) == 1 + len(rows)


def test_single_batch_checks_reproduce_the_recorded_ones():
    recorded = results.load(NOTEBOOK, RESULTS)
    rows = {r['clip_high']: {k: v for k, v in r.items() if k != 'clip_high'} for r in recorded['clip_higher_rows']}
    first = recorded['clip_higher'][0].split()
    checks = clip_higher.single_batch_checks(rows, int(first[0]), int(first[7]), clip_higher.book_batch())
    assert checks == recorded['clip_higher_checks']


def test_the_recorded_claim_agrees_with_its_printed_seed_table():
    recorded = results.load(NOTEBOOK, RESULTS)
    judged, lines = recorded[clip_higher.CLAIM_KEY], recorded['clip_higher_seeds']
    said = {'yes': HOLDS, 'no': DOES_NOT_HOLD, 'tied': TIED}
    per_seed = [said[line.rsplit('|', 1)[1].strip()] for line in lines[1:-1]]
    assert per_seed == judged['outcomes'] and judged['seeds'] == list(clip_higher.BATCH_SEEDS)
    tied = judged['tied_on']
    assert lines[-1].endswith(f'{judged["held_on"]} of {len(judged["seeds"])}' + (f', {tied} tied' if tied else ''))


def test_first_order_cases_predict_the_exact_change():
    cases = clip_higher.first_order_cases()
    assert list(cases) == ['likely, A > 0', 'likely, A < 0', 'rare, A > 0', 'rare, A < 0']
    for predicted, exact in cases.values():
        assert predicted == pytest.approx(exact, rel=0.01)
    assert cases['likely, A > 0'][1] < 0 < cases['rare, A > 0'][1]


class Linear(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(2, 2)


def test_measure_batches_is_cached_by_what_determines_it(tmp_path, monkeypatch):
    monkeypatch.setenv('AGENTRL_CACHE_DIR', str(tmp_path))
    calls = []

    def measure(rl_base, tok, tasks, seed):
        calls.append(seed)
        return fake_batch(seed, (0.4, 0.3, 0.2))

    monkeypatch.setattr(clip_higher, 'measure_batch', measure)
    torch.manual_seed(0)
    model = Linear()
    first = clip_higher.measure_batches(model, None, None, seeds=(0, 1))
    again = clip_higher.measure_batches(model, None, None, seeds=(0, 1))
    assert first == again and calls == [0, 1]  # the second call reads the file
    with torch.no_grad():
        model.layer.bias.add_(1.0)  # another RL base: measured afresh
    clip_higher.measure_batches(model, None, None, seeds=(0, 1))
    assert calls == [0, 1, 0, 1]
    assert len(list((tmp_path / 'clip_higher').glob('batches-*.pt'))) == 2


@pytest.mark.slow
def test_batch_seed_0_is_the_chapter_batch_the_notebook_records():
    import agentrl as arl
    torch.set_num_threads(1)
    tok = arl.build_tokenizer(arl.make_tasks('all'))
    rl_base = arl.make_rl_base(tok)
    batch = clip_higher.sample_batch(rl_base, tok, arl.make_tasks('train'), 0)
    rows = [dict(clip_high=c, **clip_higher.clip_row(rl_base, batch, c)) for c in clip_higher.SETTINGS]
    assert rows == results.load(NOTEBOOK, RESULTS)['clip_higher_rows']
