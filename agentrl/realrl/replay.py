"""A sweep run's first steps trained again, to hold them against the record (notebook 15's live run).

The run is the sweep's own spec (agentrl.realrl.runs.setting_spec, with the sweep's length, so a reset lands where
it landed), trained through the same call the sweep makes; it is stopped once the steps asked for are done, before
the evaluation. On a machine whose arithmetic matches the one that made the record, the steps are the record's, bit
for bit.
"""
import json

from agentrl.realrl import runs


class _Enough(Exception):
    """Raised from the step callback once the steps asked for are done."""


def first_steps(name, seed, steps, pretrained=None, watch=None):
    """The first `steps` step records of the sweep's run of setting `name` on `seed`, trained here -> [dict].
    watch(step, record, policy, optimizer), when given, sees each step as it ends (a progress line)."""
    if not isinstance(steps, int) or isinstance(steps, bool) or not 1 <= steps <= runs.SWEEP_STEPS:
        raise ValueError(f'steps must be a whole number from 1 to {runs.SWEEP_STEPS}, got {steps!r}')
    spec = runs.setting_spec(name, seed)
    done = []

    def keep(step, record, policy, optimizer):
        done.append(record)
        if watch is not None:
            watch(step, record, policy, optimizer)
        if len(done) == steps:
            raise _Enough

    try:
        runs.train_and_evaluate(spec, pretrained, keep)
    except _Enough:
        pass
    return json.loads(json.dumps(done))  # as the record stores them (JSON keeps a float's every bit)


def first_difference(live, recorded):
    """Where two lists of step records first differ -> None if the live steps are the recorded ones, else
    (step index, key, live value, recorded value); key None when a step has other keys."""
    if len(recorded) < len(live):
        return (len(recorded), None, 'a step', 'no step')
    for index, (mine, theirs) in enumerate(zip(live, recorded)):
        if mine.keys() != theirs.keys():
            return (index, None, sorted(mine), sorted(theirs))
        for key in mine:
            if mine[key] != theirs[key]:
                return (index, key, mine[key], theirs[key])
    return None


def comparison_sentence(name, seed, live, recorded):
    """Whether the live steps are the record's, in words."""
    where = first_difference(live, recorded)
    if where is None:
        return (f'The {len(live)} steps trained here ({name}, seed {seed}) are the record\'s first {len(live)}, bit for '
                f'bit: every logged number and every logged reply is equal.')
    index, key, mine, theirs = where
    what = 'its logged keys' if key is None else f'`{key}`'
    return (f'The steps trained here ({name}, seed {seed}) depart from the record at step {index}, in {what}: '
            f'{mine!r} here against {theirs!r} recorded. This machine computes other bits than the one that made '
            f'the record (the arithmetic probe says which operations differ); the verdicts above are read from the '
            f'record all the same.')
