"""The freeze rule applied: the candidates it names measured on the confirmation seeds, stored in the study."""
import multiprocessing
import signal
import time

from agentrl.calibration.freeze import ALL_ROWS, decide
from agentrl.substrate.config import SubstrateConfig
from machinery.search.record import log, write_record
from machinery.search.space import expression
from machinery.search.storage import budget_used, exclusive, open_study, plain, records
from machinery.search.workers import measure, rows_record


def _ignore_sigint():
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def measure_confirmation(search, config, protocol, pool=None):
    """A configuration measured on the confirmation protocol -> its record (rows, rows held, band distance)."""
    started = time.time()
    measurement = search.measurement()
    run = pool.map if pool else lambda f, jobs: [f(job) for job in jobs]
    run(measure, [('prepare', search.measure, config, None, protocol)])
    jobs = ([('seed', search.measure, config, seed, protocol) for seed in protocol.seeds]
            + [('batch', search.measure, config, seed, protocol) for seed in protocol.batch_seeds])
    results = run(measure, jobs)
    seeds, batches = results[:len(protocol.seeds)], results[len(protocol.seeds):]
    record = rows_record(measurement.judge(seeds, batches), measurement)
    return plain(dict(record, seeds=list(protocol.seeds), batch_seeds=list(protocol.batch_seeds),
                      protocol=protocol, config_key=config.key(), seconds=time.time() - started))


def run_confirm(search):
    """Apply the freeze rule: measure what it asks to confirm, store it in the study, say what it decided."""
    with exclusive(search) as free:
        return _confirm(search) if free else 1


def _confirm(search):
    study = open_study(search)
    decision = decide(records(study), budget_used(study, search))
    if decision.action == 'confirm':
        _, protocol = search.protocols()
        log(search, f'confirming: {decision.reason}')
        pool = (multiprocessing.get_context('spawn').Pool(search.processes, initializer=_ignore_sigint)
                if search.processes > 1 else None)
        try:
            for number in decision.confirm:
                record = next(r for r in records(study) if r['number'] == number)
                result = measure_confirmation(search, SubstrateConfig.from_description(record['config']), protocol,
                                              pool)
                study.set_user_attr(f'confirmation:{number}', result)
                write_record(study, search)
                log(search, f'trial {number} on the confirmation seeds: {result["rows_held"]} of {ALL_ROWS} rows, '
                            f'band distance {result["band_distance"]:.3f}')
        except KeyboardInterrupt:
            log(search, 'confirmation stopped: the confirmations finished so far are kept in the study')
            return 1
        finally:
            if pool:
                pool.terminate()
        decision = decide(records(study), budget_used(study, search))
    write_record(study, search)
    log(search, f'the freeze rule decided ({decision.action}): {decision.reason}')
    if decision.action == 'freeze':
        frozen = next(r for r in records(study) if r['number'] == decision.frozen)
        print('\nPaste as config.DEFAULT in agentrl/substrate/config.py (the freeze commit is made by hand):\n')
        print(expression(SubstrateConfig.from_description(frozen['config'])))
    return 0
