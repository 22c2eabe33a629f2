"""The freeze rule of the calibration studies, over trial records: which trial becomes a study's substrate.

It was fixed before the first search started. It reads records only, so the committed trials.json of a study gives the
same decision without Optuna (decision_from_export), which is how the notebooks learn which trial a study froze.
"""
import dataclasses

ALL_ROWS = 26  # the calibration rows (agentrl.calibration.rows.ROWS)
CONFIRM_ROWS = 24  # a candidate holding all 26 rows on seeds 0-4 is frozen if it holds >= 24 on seeds 5-9
FALLBACK_CANDIDATES = 5  # budget used and nothing confirmed: confirm the 5 best, freeze the best on seeds 5-9
BUDGET_TRIALS = 300  # complete trials ...
BUDGET_SECONDS = 6 * 3600  # ... or seconds of search time (wall clock, summed over sessions), whichever comes first


def budget_exhausted(complete, seconds, budget_trials, budget_seconds):
    """Whether a budget of `budget_trials` complete trials or `budget_seconds` of search is used."""
    return complete >= budget_trials or seconds >= budget_seconds


@dataclasses.dataclass(frozen=True)
class Decision:
    """What the freeze rule says to do next."""
    action: str  # 'search' (keep searching), 'confirm' (measure `confirm` on the confirmation seeds first),
    #              'freeze' (trial `frozen` becomes config.DEFAULT), 'none' (budget used, no trial completed)
    reason: str
    confirm: tuple = ()  # trial numbers to measure on the confirmation seeds
    frozen: int = None  # the trial frozen
    confirmed: bool = False  # frozen by (a), all rows on the search seeds and enough on the confirmation seeds; not
    #                          by the fallback (b)
    compared: int = 0  # how many trials the fallback compared on the confirmation seeds (0 when it did not decide)


def rank(record):
    """Sort key of trials on the search seeds: most rows held, then smallest band distance, then number."""
    return (-record['rows_held'], record['band_distance'], record['number'])


def confirmed_rank(record):
    """The same order on the confirmation seeds."""
    return (-record['confirmation']['rows_held'], record['confirmation']['band_distance'], record['number'])


def held_text(record):
    text = f'trial {record["number"]} ({record["rows_held"]} of {ALL_ROWS} rows on the search seeds'
    if record.get('confirmation'):
        text += f', {record["confirmation"]["rows_held"]} on the confirmation seeds'
    return text + ')'


def decide(recs, exhausted):
    """The freeze rule over trial records (`exhausted`: the budget is used) -> Decision.

    (a) A complete trial holding all 26 rows on seeds 0-4 is measured on seeds 5-9 (batch seeds 10-19); if it holds
    at least 24 there, it is frozen (of several, the most rows there, then the smaller band distance there).
    (b) If none is confirmed and the budget is used: the 5 complete trials with the most rows on seeds 0-4 (ties:
    the smaller band distance) are measured on seeds 5-9, and the one with the most rows there is frozen (same tie).
    """
    complete = sorted((r for r in recs if r['state'] == 'COMPLETE' and r.get('rows_held') is not None), key=rank)
    full = [r for r in complete if r['rows_held'] >= ALL_ROWS]
    confirmed = [r for r in full if r.get('confirmation') and r['confirmation']['rows_held'] >= CONFIRM_ROWS]
    if confirmed:
        best = min(confirmed, key=confirmed_rank)
        return Decision('freeze', f'{held_text(best)} holds all {ALL_ROWS} rows on the search seeds and at least '
                                  f'{CONFIRM_ROWS} on the confirmation seeds: it is frozen', frozen=best['number'],
                        confirmed=True)
    unmeasured = tuple(r['number'] for r in full if not r.get('confirmation'))
    if unmeasured:
        return Decision('confirm', f'{", ".join(map(held_text, full))} hold all {ALL_ROWS} rows on the search seeds: '
                                   'measure them on the confirmation seeds', confirm=unmeasured)
    failed = f' ({", ".join(map(held_text, full))} held fewer than {CONFIRM_ROWS} there)' if full else ''
    if not exhausted:
        return Decision('search', f'no candidate confirmed{failed} and the budget is not used: keep searching')
    if not complete:
        return Decision('none', 'the budget is used and no trial completed: there is nothing to freeze')
    top = complete[:FALLBACK_CANDIDATES]
    unmeasured = tuple(r['number'] for r in top if not r.get('confirmation'))
    if unmeasured:
        return Decision('confirm', f'the budget is used and no candidate confirmed{failed}: the best {len(top)} '
                                   f'({", ".join(map(held_text, top))}) are measured on the confirmation seeds',
                        confirm=unmeasured)
    best = min(top, key=confirmed_rank)
    return Decision('freeze', f'the budget is used and no candidate confirmed{failed}; of the {len(top)} best on the '
                              f'search seeds, {held_text(best)} holds the most rows on the confirmation seeds: it is '
                              'frozen', frozen=best['number'], compared=len(top))


def decision_from_export(export):
    """The freeze rule applied to a trials.json export (its parsed dict), without Optuna -> (Decision, records).

    The budget is the one the study recorded; what decide() says here is what it said when the record was written.
    """
    attrs, recs = export['attrs'], export['trials']
    budget = attrs.get('budget') or {}
    exhausted = budget_exhausted(sum(r['state'] == 'COMPLETE' for r in recs), attrs.get('search_seconds', 0.0),
                           budget.get('trials', BUDGET_TRIALS), budget.get('seconds', BUDGET_SECONDS))
    return decide(recs, exhausted), recs


# ---------------------------------------------------------------------------------------- the record, as files
