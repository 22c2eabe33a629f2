"""The arithmetic probe (machinery/arithmetic.py): this machine's bits against the recorded ones, and the probe's
own reading and comparing."""
import os

import pytest

from agentrl import cpu
from machinery import arithmetic
from conftest import PROBES_TO_RECORD

pin_applies = pytest.mark.skipif(not cpu.pin_wanted(), reason='the CPU pin does not apply on this machine '
                                 '(not x86-64 with AVX2, or AGENTRL_CPU_PIN=0): there is no pinned arithmetic to check')


def env_for(name):
    """This process's environment with the pin of arithmetic `name` in place of whatever was set."""
    env = {k: v for k, v in os.environ.items() if k not in cpu.PINS}
    env.update(cpu.ARITHMETICS[name], AGENTRL_ARITHMETIC=name)
    return env


def mismatch_message(rows, path):
    reference, about = arithmetic.read(path)
    changed = arithmetic.differing(rows, reference)
    return changed, (f'{len(changed)} probe rows differ from {path.name} ({about.get("cpu")}): ' + '; '.join(changed))


@pin_applies
def test_the_probe_under_the_pin_matches_this_vendors_reference():
    """Under the pin in force (pinned or portable), the probe gives the rows recorded for this arithmetic: on this
    CPU vendor for the pinned one, on any vendor for the portable one (whose point is to agree across vendors)."""
    name = cpu.arithmetic()
    paths = arithmetic.references(name, None if name == 'portable' else arithmetic.vendor())
    rows, about = arithmetic.probe_in_fresh_process(env_for(name))
    if not paths:
        # A CI machine of another vendor may be the only one at hand: its rows go to the terminal summary, so that
        # the record can be made from the log as well as by the command.
        target = f'data/arithmetic/{name}-{arithmetic.vendor()}-<model>.txt'
        PROBES_TO_RECORD.append((target, arithmetic.render(rows, {k: v for k, v in about.items() if k != 'digest'})))
        pytest.skip(f'no {name} probe is recorded for a {arithmetic.vendor()} CPU yet: record one with '
                    f'`.venv/bin/python -m machinery.arithmetic --write {target}` (its rows are in the summary)')
    for path in paths:
        changed, message = mismatch_message(rows, path)
        assert not changed, message


@pin_applies
def test_the_probe_sees_another_mkl_branch():
    """The other arithmetic (another MKL branch) changes the matrix products, and the comparison names them."""
    other = 'portable' if cpu.arithmetic() == 'pinned' else 'pinned'
    rows, _ = arithmetic.probe_in_fresh_process(env_for(other))
    mine, _ = arithmetic.probe_in_fresh_process(env_for(cpu.arithmetic()))
    changed = arithmetic.differing(rows, mine)
    assert 'torch linear: head [1920, 64] -> 316' in changed and 'TinyAgent after 11 Adam steps' in changed
    assert 'SmolLM2 linear: lm_head [96, 576] -> 49152' in changed  # the pretrained model's widths too
    assert 'numpy matmul [300, 300] (OpenBLAS)' not in changed  # MKL's branch does not touch numpy's OpenBLAS


def test_a_recorded_probe_reads_back_and_a_tampered_one_is_refused(tmp_path):
    rows = [('op a', '0123456789abcdef'), ('op b', 'fedcba9876543210')]
    path = tmp_path / 'probe.txt'
    path.write_text(arithmetic.render(rows, {'cpu': 'X', 'arithmetic': 'pinned'}))
    assert arithmetic.read(path) == (rows, {'cpu': 'X', 'arithmetic': 'pinned', 'digest': arithmetic.digest(rows)})
    path.write_text(path.read_text().replace('fedcba9876543210', 'fedcba9876543211'))
    with pytest.raises(ValueError, match='do not give its recorded digest'):
        arithmetic.read(path)
    path.write_text('# cpu: X\nnot a row\n')
    with pytest.raises(ValueError, match=r'probe.txt:2: expected "# key: value" or "<16 hex digits>  <operation>"'):
        arithmetic.read(path)


def test_differing_names_changed_missing_and_extra_rows():
    reference = [('a', '1' * 16), ('b', '2' * 16), ('c', '3' * 16)]
    assert arithmetic.differing(reference, reference) == []
    assert arithmetic.differing([('a', '1' * 16), ('b', '9' * 16), ('d', '4' * 16)], reference) == ['b', 'c', 'd']


def test_the_outputs_record_names_no_machine():
    """Two machines of one arithmetic write the same outputs record, so make leaves git status clean on both."""
    _, about = arithmetic.read(arithmetic.OUTPUTS)
    assert set(about) == {'arithmetic', 'torch', 'numpy', 'capability', 'digest'}


def test_the_snapshot_skip_names_the_rows_that_differ(monkeypatch):
    monkeypatch.delenv(arithmetic.REFERENCE_VARIABLE, raising=False)
    reference, _ = arithmetic.read(arithmetic.OUTPUTS)
    moved = [(name, 'f' * 16 if name.startswith('torch linear') else value) for name, value in reference]
    monkeypatch.setattr(arithmetic, 'probe_in_fresh_process', lambda env=None: (moved, {'cpu': 'Other CPU',
                                                                                         'arithmetic': 'pinned'}))
    sentence = arithmetic.outputs_mismatch()
    assert sentence.startswith('this machine (Other CPU, arithmetic pinned) computes other bits than the committed '
                               'outputs (pinned): 5 of ')
    assert 'torch linear: head [1920, 64] -> 316' in sentence
    monkeypatch.setattr(arithmetic, 'probe_in_fresh_process', lambda env=None: (reference, {}))
    assert arithmetic.outputs_mismatch() is None


def test_a_named_reference_stands_for_the_outputs_so_a_matching_machine_can_take_the_other_path(monkeypatch):
    """AGENTRL_ARITHMETIC_REFERENCE names another recorded probe: a machine that computes the outputs' bits then
    differs from it, and the sentence says which file stood for the outputs and why."""
    outputs, _ = arithmetic.read(arithmetic.OUTPUTS)
    monkeypatch.setattr(arithmetic, 'probe_in_fresh_process', lambda env=None: (outputs, {'cpu': 'AMD EPYC',
                                                                                          'arithmetic': 'pinned'}))
    monkeypatch.setenv(arithmetic.REFERENCE_VARIABLE, 'data/arithmetic/portable-amd-epyc.txt')
    assert arithmetic.outputs_reference() == arithmetic.REFERENCES / 'portable-amd-epyc.txt'
    sentence = arithmetic.outputs_mismatch()
    assert sentence.startswith('this machine (AMD EPYC, arithmetic pinned) computes other bits than '
                               'data/arithmetic/portable-amd-epyc.txt (AMD EPYC, portable), which '
                               'AGENTRL_ARITHMETIC_REFERENCE names in place of the committed outputs\' record: ')
    assert 'torch linear: head [1920, 64] -> 316' in sentence
    monkeypatch.setenv(arithmetic.REFERENCE_VARIABLE, str(arithmetic.OUTPUTS))  # absolute, and the outputs' own
    assert arithmetic.outputs_mismatch() is None
    monkeypatch.setenv(arithmetic.REFERENCE_VARIABLE, 'data/arithmetic/no-such-probe.txt')
    with pytest.raises(FileNotFoundError, match='no-such-probe.txt: no such recorded probe'):
        arithmetic.outputs_reference()


def test_a_vendor_without_a_record_gets_its_rows_in_the_summary_to_record(monkeypatch, tmp_path):
    """Where no probe is recorded for this CPU vendor, the probe test skips naming the command, and the rows it ran
    are kept for the terminal summary in the record's own format (read back, they are the rows)."""
    rows = [('op a', '0123456789abcdef'), ('op b', 'fedcba9876543210')]
    monkeypatch.setattr(arithmetic, 'references', lambda name, cpu_vendor=None: [])
    monkeypatch.setattr(arithmetic, 'probe_in_fresh_process', lambda env=None: (
        rows, {'cpu': 'Intel(R) Xeon(R)', 'arithmetic': 'pinned', 'digest': arithmetic.digest(rows)}))
    monkeypatch.setattr(arithmetic, 'vendor', lambda: 'intel')
    before = len(PROBES_TO_RECORD)
    with pytest.raises(pytest.skip.Exception, match=r'--write data/arithmetic/\w+-intel-<model>.txt'):
        test_the_probe_under_the_pin_matches_this_vendors_reference()
    target, text = PROBES_TO_RECORD.pop()
    assert len(PROBES_TO_RECORD) == before and target.endswith('-intel-<model>.txt')
    (tmp_path / 'record.txt').write_text(text)
    assert arithmetic.read(tmp_path / 'record.txt') == (rows, {'cpu': 'Intel(R) Xeon(R)', 'arithmetic': 'pinned',
                                                              'digest': arithmetic.digest(rows)})
