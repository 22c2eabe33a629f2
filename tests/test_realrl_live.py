"""Notebook 15's live steps, held to the real-model sweep's record: bit for bit where this machine's arithmetic is
the one that made the record, and as a complete, finite run of the same steps everywhere else."""
import math

import pytest

from agentrl.realrl import findings, replay

NOTEBOOK = '15_real_grpo'


def live_and_recorded(notebook_runs):
    from agentrl import side_runs

    seed = side_runs.committed_parameters(NOTEBOOK)['seed']
    live = notebook_runs.results(NOTEBOOK)['live_steps']
    return live, findings.load_record()['runs'][str(seed)]['none']['history'][:len(live)]


@pytest.mark.slow
@pytest.mark.snapshot
def test_the_live_steps_are_the_records_first_steps_bit_for_bit(notebook_runs):
    live, recorded = live_and_recorded(notebook_runs)
    assert live and replay.first_difference(live, recorded) is None, replay.first_difference(live, recorded)


@pytest.mark.slow
@pytest.mark.verdict
def test_the_live_steps_are_the_records_steps_in_kind_on_any_machine(notebook_runs):
    live, recorded = live_and_recorded(notebook_runs)
    assert [s['step'] for s in live] == [s['step'] for s in recorded] == list(range(len(live)))
    for mine, theirs in zip(live, recorded):
        assert mine.keys() == theirs.keys()
        assert all(math.isfinite(v) for v in mine.values() if isinstance(v, float))
        assert mine['signal'] == 1.0 and 0 <= mine['reward'] <= 1
