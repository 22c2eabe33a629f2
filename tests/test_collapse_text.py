"""Notebook 06's printed blocks and sentences: the book's exact lines, the tie rule in every comparison, the report."""
import pytest
import torch

from agentrl import chapter, results
from agentrl.ch10 import claims, clip_higher, collapse_text
from agentrl.ch10.claims import DOES_NOT_HOLD, HOLDS, SEED_DEPENDENT, TIED
from agentrl.paths import RESULTS

NOTEBOOK = '06_entropy_collapse'
EPS = collapse_text.EPS


def recorded():
    return results.load(NOTEBOOK, RESULTS)


def recorded_rows():
    return {r['clip_high']: {k: v for k, v in r.items() if k != 'clip_high'} for r in recorded()['clip_higher_rows']}


def judged(held_on=4, means=(0.436, 0.430, 0.369), tol_mean=0.0672, above=9):
    """A claim record like clip_higher.claim's."""
    n = 10
    verdict = HOLDS if held_on > 5 else SEED_DEPENDENT if held_on == 5 else DOES_NOT_HOLD
    return dict(key='clip_higher_tightest', kind='observation', text=clip_higher.CLAIM_TEXT, seeds=list(range(n)),
                held=[k < held_on for k in range(n)], held_on=held_on, verdict=verdict, holds_from=6, fails_up_to=4,
                book_end={'0.2': 0.538, '0.28': 0.531, '100': 0.508},
                mean_end=dict(zip(['0.2', '0.28', '100'], means)), highest_on={'0.2': held_on, '0.28': 9 - held_on,
                                                                             '100': 1},
                tolerance_one=0.212, tolerance_mean=tol_mean, tightest_above_loosest_on=above, binds_on_rare_on=10)


def test_covariance_lines_are_the_books_to_the_character():
    z = torch.tensor([3.0, 1.5, 1.0, 0.5, 0.0, -0.5, -1.0, -2.0])
    probs = torch.softmax(z, -1)
    h_start = -(probs * torch.log_softmax(z, -1)).sum().item()
    lines = collapse_text.covariance_lines(h_start, probs[0].item(), probs[7].item(), clip_higher.first_order_cases())
    assert [chapter.collapse(line) for line in lines] == list(chapter.blocks_of('10.6')[0].lines)
    assert lines == recorded()['covariance_check']  # and to the space, as the notebook prints them


def test_the_printed_blocks_are_the_recorded_ones():
    data = recorded()
    first = data['clip_higher'][0].split()
    assert collapse_text.clip_higher_lines(int(first[0]), int(first[7]), recorded_rows()) == data['clip_higher']
    split = data['clip_higher_split_rows']
    ends = {c: r['end'] for c, r in recorded_rows().items()}
    positive = {float(k): v for k, v in split['only_positive'].items()}
    assert collapse_text.split_lines(split['penalised'], split['penalised_likely'], split['mean_reward'], ends,
                                     positive, split['only_negative']) == data['clip_higher_split']
    assert collapse_text.identity_lines(0.0) == list(chapter.blocks_of('10.6')[1].lines)


def test_ranking_calls_a_gap_below_the_tolerance_a_tie():
    ends = {0.2: 0.392, 0.28: 0.376, 100.0: 0.390}
    assert collapse_text.ranking(ends, 0.212).startswith('the three settings are tied (they span 0.016, below 0.212)')
    assert collapse_text.ranking(ends, 0.01) == f'{EPS} = 0.2 and 100 tie for the highest end'
    assert collapse_text.ranking(ends, 0.001) == f'it ends highest with {EPS} = 0.2, by more than 0.001'
    assert collapse_text.dapo_word(ends, 0.212) == 'neither supports nor refutes'
    assert collapse_text.dapo_word(ends, 0.001) == 'goes against'
    assert collapse_text.dapo_word(ends, 0.01) == 'is compatible with'
    assert collapse_text.dapo_word({0.2: 0.3, 0.28: 0.3, 100.0: 0.5}, 0.01) == 'supports'


def test_the_loosening_paragraph_states_the_rule_once_and_follows_it():
    rows, book = recorded_rows(), clip_higher.book_batch()[2]
    tied = collapse_text.loosening(rows, book, 0.212, 10)
    assert tied.count('called tied when they differ by less than 0.212') == 1
    assert 'neither supports nor refutes' in tied and 'ends highest' not in tied
    ordered = collapse_text.loosening(rows, book, 0.001, 10)
    assert f'it ends highest with {EPS} = 0.2, by more than 0.001' in ordered and 'goes against' in ordered


def test_the_claim_paragraph_gives_the_verdict_and_the_edge():
    text = collapse_text.claim_note(judged(held_on=4))
    assert 'held on 4 of 10 batch seeds (0, 1, 2 and 3)' in text and '**does not hold**, one batch from' in text
    assert claims.seed_rule_text(10) in text
    assert 'tied by that rule' in text  # 0.0672 > 0.436 - 0.369
    clear = collapse_text.claim_note(judged(held_on=8, tol_mean=0.01))
    assert '**holds**.' in clear and 'one batch from' not in clear and 'higher by that rule' in clear


def test_the_split_paragraph_ties_the_rewarded_only_ends():
    data = recorded()
    split = data['clip_higher_split_rows']
    positive = {float(k): v for k, v in split['only_positive'].items()}
    ends = {c: r['end'] for c, r in recorded_rows().items()}
    args = (180, split['penalised'], split['penalised_likely'], split['mean_reward'], 0.45, ends, positive,
            split['only_negative'])
    assert 'the three settings are tied' in collapse_text.split_text(*args, 0.132)
    assert f'it ends highest with {EPS} = 100' in collapse_text.split_text(*args, 0.01)
    rising = {c: 0.6 for c in ends}
    assert 'the penalised tokens win' in collapse_text.split_text(*args[:5], rising, *args[6:], 0.132)


def test_findings_and_summary_are_bullets_with_counts_over_the_batches():
    measured = [dict(seed=k, rewarded=100, rewarded_rare=10,
                     rows=[dict(clip_high=c, start=0.5, end=e, above=4, above_rare=3, last_clip_frac=0.1)
                           for c, e in zip(clip_higher.SETTINGS, (0.40, 0.41, 0.35))],
                     only_positive=[0.3, 0.31, 0.32 + 0.01 * k]) for k in range(10)]
    claim = clip_higher.claim(measured)
    found = collapse_text.findings(clip_higher.first_order_cases(), claim, measured)
    bullets = found.split('\n')
    assert 3 <= len(bullets) <= 6 and all(b.startswith('* **') for b in bullets)
    # the same ends on every batch: no spread, so 0.41 above 0.40 is beyond the tolerance and the claim fails
    assert 'held on 0 of 10 batch seeds (none), so by the seed rule it does not hold' in found
    assert "reading does not hold as stated" in found
    assert 'on 10 of 10 batches at every clip' in found
    # rewarded-only ends 0.30-0.41 against whole-batch ends 0.35-0.41: the last clip's gap is inside the tolerance
    assert 'at every clip on 0 of 10' in found and 'binds disproportionately on rare tokens' in found
    far = [dict(m, only_positive=[0.1, 0.11, 0.12 + 0.001 * m['seed']]) for m in measured]
    assert 'at every clip on 10 of 10' in collapse_text.findings(clip_higher.first_order_cases(), claim, far)
    summary = collapse_text.summary(clip_higher.first_order_cases(), claim, True)
    assert 3 <= summary.count('\n* ') + 1 <= 6 and 'bit-for-bit' in summary
    assert '**not**' in collapse_text.summary(clip_higher.first_order_cases(), claim, False)


def test_the_seed_table_marks_each_batch_and_counts_them():
    measured = [dict(seed=k, rewarded=100, rewarded_rare=10,
                     rows=[dict(clip_high=c, start=0.5, end=e, above=4, above_rare=3, last_clip_frac=0.1)
                           for c, e in zip(clip_higher.SETTINGS, (0.40 + 0.1 * (k < 3), 0.41, 0.35))],
                     only_positive=[0.3, 0.31, 0.32]) for k in range(10)]
    claim = clip_higher.claim(measured)
    lines = collapse_text.seed_lines(measured, claim)
    said = {HOLDS: 'yes', DOES_NOT_HOLD: 'no', TIED: 'tied'}
    assert len(lines) == 12
    assert [line.rsplit('| ', 1)[1] for line in lines[1:-1]] == [said[o] for o in claim['outcomes']]
    assert lines[1].endswith('| yes')  # 0.50 against 0.41: beyond the one-batch tolerance
    assert lines[4].endswith('| tied')  # 0.40 against 0.41: inside it, so neither yes nor no
    assert lines[-1].endswith(f'| {claim["held_on"]} of 10, {claim["tied_on"]} tied')


def test_the_report_lists_the_claim_with_its_verdict():
    lines, counts = collapse_text.report_claims(judged(held_on=4), NOTEBOOK)
    text = '\n'.join(lines)
    assert "### The chapter's claims on our runs" in text
    assert f'{clip_higher.CLAIM_TEXT} — **held on 4/10 batch seeds (does not hold)**' in text
    assert counts == 'observations: 0 of 1 hold, 1 do not'
    assert collapse_text.report_claims(judged(held_on=5), NOTEBOOK)[1] == \
        'observations: 0 of 1 hold, 0 do not, 1 seed-dependent'
    tied = dict(judged(held_on=2), verdict=TIED, tied_on=4)
    assert collapse_text.report_claims(tied, NOTEBOOK)[1] == 'observations: 0 of 1 hold, 0 do not, 1 tied'
    assert 'held on 2/10 batch seeds, tied on 4 (tied)' in '\n'.join(collapse_text.report_claims(tied, NOTEBOOK)[0])
    assert collapse_text.report_claims(None, NOTEBOOK) == ([], '')


def test_the_reports_10_6_cell_comes_from_the_recorded_claim():
    from machinery.report import claims_section

    class Fake:
        def get(self, notebook, key, default=None):
            return judged(held_on=7) if (notebook, key) == (NOTEBOOK, clip_higher.CLAIM_KEY) else default

    lines, counts = claims_section(chapter.section('10.6'), Fake())
    assert any('held on 7/10 batch seeds (holds)' in line for line in lines)
    assert counts == 'observations: 1 of 1 hold, 0 do not'


def test_covariance_and_identity_notes_follow_the_numbers():
    cases = clip_higher.first_order_cases()
    note = collapse_text.covariance_note(cases, 0.647, 0.0044)
    assert note.startswith('In all four cases the first-order formula is within 0.3%')
    assert 'reverses the direction in both cases' in note
    assert collapse_text.identity_note(0.0, True).startswith('Every parameter is bit-for-bit the same')
    assert collapse_text.identity_note(1e-7, True).startswith('The two paths differ')
    assert collapse_text.identity_note(0.0, False).startswith('The two paths differ')


@pytest.mark.parametrize('start,end,word', [(0.450, 0.392, 'falls'), (0.45, 0.4504, 'stays level'), (0.4, 0.5, 'rises')])
def test_change_reads_the_printed_decimals(start, end, word):
    assert clip_higher.change(start, end) == word
