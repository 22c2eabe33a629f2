"""Notebook 15's sentences and tables (agentrl.realrl.report) and its live-run comparison (agentrl.realrl.replay),
on made-up records."""
import pytest

from agentrl.ch10.claims import HOLDS
from agentrl.realrl import claims, findings, replay, report
from test_realrl_findings import record_of


def full_record(seeds=(0, 1, 2), **changes):
    """record_of's runs, with what the notebook reads besides the claims' quantities (time, memory, replies)."""
    record = record_of(list(seeds), **changes)
    for runs in record['runs'].values():
        for name, run in runs.items():
            run.update(seconds=360.0, peak_rss_mb=5 * 1024.0)
            for step in run['history']:
                step.update(entropy_sampled=step['entropy'], reward=step['format'], replies=[f'{name} | a\nb < 2'])
    record.update(steps=12, level='code-mixed', base=dict(evaluation=dict(pass_at_k=[0.5] * 32), seconds=60.0,
                                                           peak_rss_mb=2048.0),
                  sessions=[dict(date='2026-12-07', cpu='AMD EPYC', cpus=2, scheduler='tcp://10.0.0.5:8786',
                                 workers=2, runs=[f'{name} | seed {s}' for s in seeds for name in claims.ARMS])])
    return record


TINY = {'collapse': ('holds', 'holds, 5 of 5 seeds', 'robust'),
        'kl-ordering': ('tied', 'tied, 0 of 5 seeds (5 tied)', 'undecided')}


def test_a_gap_is_judged_against_the_seeds_noise_and_a_single_seed_says_so():
    record = full_record()
    assert 'beyond the seeds\' noise' in report.gap_phrase(record, 'final entropy', 'KL k3 1.0', 'none')
    assert report.gap_phrase(record, 'final entropy', 'KL k3 1.0', 'none').startswith('KL k3 1.0: final entropy higher')
    tied = full_record(**{'KL k3 1.0': dict(end=0.2005)})  # 0.0005 from none's 0.2, seeds 0.002 apart
    assert 'are tied in final entropy' in report.gap_phrase(tied, 'final entropy', 'KL k3 1.0', 'none')
    one = full_record(seeds=(0,))
    assert 'not yet judged against noise' in report.gap_phrase(one, 'final entropy', 'KL k3 1.0', 'none')


def test_the_bullets_count_the_runs_and_the_verdicts_as_recorded():
    record = full_record()
    bullets = report.found_bullets(record, TINY)
    assert bullets[0].startswith(f'- The record holds {3 * len(claims.SETTINGS)} runs of 12 GRPO steps')
    assert 'complete on 3 seeds (0, 1, 2)' in bullets[0]
    assert f'{len(claims.CLAIMS)} have their runs on 3 seeds and are judged ({len(claims.CLAIMS)} hold)' in bullets[-1]
    assert '1 of them get the verdict TinyAgent got' in bullets[-1]  # 'collapse' agrees, 'kl-ordering' does not
    fewer = full_record(seeds=(0, 1))
    assert f'{len(claims.CLAIMS)} wait for seeds' in report.found_bullets(fewer, TINY)[-1]


def test_the_verdict_table_sets_each_claim_beside_tinyagents():
    rows = report.verdict_rows(full_record(), TINY)
    assert len(rows) == 2 + len(claims.CLAIMS)
    collapse = next(row for row in rows if row.startswith('| without regularisation'))
    assert '| holds, 3 of 3 seeds | holds, 5 of 5 seeds | robust | yes |' in collapse
    ordering = next(row for row in rows if row.startswith('| for KL k3'))
    assert ordering.endswith('| no |')
    waiting = report.verdict_rows(full_record(seeds=(0,)), TINY)
    assert all('waiting: runs on 1 of 3 seeds' in row for row in waiting[2:] if 'entropy 0.1' not in row)


def test_a_claim_whose_setting_was_never_swept_is_not_run_rather_than_waiting():
    record = full_record()
    for runs in record['runs'].values():
        del runs['entropy 0.1']
    needs_it = [c for c in claims.CLAIMS if 'entropy 0.1' in c.needs]
    assert needs_it and all('entropy 0.1' not in claims.ARMS for _ in needs_it)
    rows = report.verdict_rows(record, TINY)
    row = next(r for r in rows if r.startswith(f'| {needs_it[0].text} |'))
    assert '| not run: needs entropy 0.1, which the sweep runs only when asked |' in row
    assert sum('waiting' in r for r in rows) == 0
    phrase = f'{len(needs_it)} {"was" if len(needs_it) == 1 else "were"} not run (needing entropy 0.1'
    last = report.found_bullets(record, TINY)[-1]
    assert phrase in last and 'wait for seeds' not in last
    assert phrase in report.summary(record, TINY)
    fewer = full_record(seeds=(0, 1))  # entropy 0.1 has runs here, so every claim waits for its third seed
    assert report.waiting_phrase(fewer, findings.verdicts(fewer)[1]) == f'{len(claims.CLAIMS)} wait for seeds.'


def test_the_run_table_gives_each_setting_its_mean_and_range():
    lines = report.run_table(full_record())
    assert lines[2].startswith('| base model (no training) |') and '| 0.500 | 0.500 | 1.0 | 2.00 |' in lines[2]
    none = next(line for line in lines if line.startswith('| none |'))
    assert none.startswith('| none | 3 | 1.000 (1.00-1.00) | 0.200 (0.20-0.20) |')
    assert len(lines) == 3 + len(claims.SETTINGS)


def test_the_law_table_counts_the_runs_the_law_forecasts_better():
    record = full_record(seeds=(0,))
    lines, better, total = report.law_rows(record, 6)
    assert total == len(claims.SETTINGS) and len(lines) == 2 + total
    assert report.law_sentence(better, total, 6, 12).endswith(f'on {better} of {total} runs.')


def test_the_sessions_say_where_each_run_was_trained():
    lines = report.session_lines(full_record(seeds=(0,)))
    assert lines[2].startswith('| 1 (2026-12-07) | AMD EPYC, 2 cores | tcp://10.0.0.5:8786, 2 workers | seed 0: none, ')
    assert lines[2].endswith(f'| {len(claims.ARMS) * 360 / 3600:.1f} |')


def test_replies_are_escaped_for_a_table_cell():
    lines = report.replies_table(full_record(seeds=(0,)), 'none', 0, [0])
    assert lines[2] == '| 0 | 0.95 | <code>none \\| a<br>b &lt; 2</code> |'


def test_live_steps_equal_to_the_record_are_said_to_be_and_a_difference_is_located():
    recorded = [dict(step=0, entropy=0.5, replies=['x']), dict(step=1, entropy=0.25, replies=['y'])]
    assert replay.first_difference(recorded[:1], recorded) is None
    assert 'bit for bit' in replay.comparison_sentence('none', 0, recorded[:1], recorded)
    moved = [dict(step=0, entropy=0.5, replies=['x']), dict(step=1, entropy=0.25000000000000006, replies=['y'])]
    assert replay.first_difference(moved, recorded) == (1, 'entropy', 0.25000000000000006, 0.25)
    assert 'depart from the record at step 1, in `entropy`' in replay.comparison_sentence('none', 0, moved, recorded)
    assert replay.first_difference([dict(step=0)], recorded)[1] is None  # other keys
    assert replay.first_difference(recorded, recorded[:1])[0] == 1  # more steps than the record holds


@pytest.mark.parametrize('steps', [0, True, 2.0, 21])
def test_the_live_run_refuses_a_step_count_it_cannot_hold_to_the_record(steps):
    with pytest.raises(ValueError, match='steps must be a whole number from 1 to 20'):
        replay.first_steps('none', 0, steps)


def test_the_verdicts_of_a_made_up_agreeing_record_all_hold():
    judged, _ = report.findings.verdicts(full_record())
    assert {v['verdict'] for v in judged} == {HOLDS}


def test_the_summary_names_where_the_two_substrates_agree_and_where_they_do_not():
    text = report.summary(full_record(), TINY)
    assert text.startswith(f'{len(claims.CLAIMS)} of the {len(claims.CLAIMS)} claims are judged')
    assert 'agree on: without regularisation' in text and 'They disagree on: for KL k3' in text
    assert '(holds here, tied on TinyAgent)' in text
    assert report.summary(full_record(seeds=(0, 1)), TINY).startswith('No claim is judged yet')
