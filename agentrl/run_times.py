"""How long each training run took, written where $AGENTRL_RUN_TIMES points (one JSON line per run), else nowhere.

A run's numbers never depend on it; machinery/forecast.py reads the lines of a fresh `make` to work out how long
`make` would take with more worker processes.
"""
import json
import os

VARIABLE = 'AGENTRL_RUN_TIMES'


def record(batch, name, seconds, workers):
    """Append one run's wall-clock seconds, with the batch of runs it was trained in and how many workers that had."""
    path = os.environ.get(VARIABLE)
    if not path:
        return
    line = json.dumps(dict(batch=batch, name=name, seconds=round(seconds, 3), workers=workers))
    with open(path, 'a', encoding='utf-8') as log:
        log.write(line + '\n')
