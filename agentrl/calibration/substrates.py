"""The substrates the chapter's claims are judged on: where each one's configuration is recorded, and what the
calibration record says of it.

Six substrates: the frozen default (trial 45 of the first calibration study), the four other short-grammar trials its
fallback measured on the confirmation seeds (74, 70, 26, 66), and the long-grammar study's frozen trial (trial 8).
Their configurations are read from the studies' committed records (trials.json) with the freeze rule, never copied
here. The sweep that runs the claims on them is machinery/substrate_sweep.py; its record is results/substrate_sweep.json.
"""
import dataclasses
import json
from pathlib import Path

from agentrl.calibration.freeze import decision_from_export
from agentrl.paths import REPO, SUBSTRATE_SWEEP
from agentrl.substrate.config import SubstrateConfig

FIRST_STUDY, LONG_STUDY = 'calibration', 'calibration/long-grammar'  # the studies' record folders


@dataclasses.dataclass(frozen=True)
class Source:
    """Where a substrate's configuration comes from: a study's record folder and its frozen trial or a trial number."""
    name: str  # how the sweep, the record and the notebook call it
    study: str  # the study's record folder, relative to the repository
    trial: object  # a trial number, or 'frozen' (the trial the study's freeze rule froze)
    label: str  # the substrate in prose


SOURCES = (
    Source('t45', FIRST_STUDY, 'frozen', 'trial 45 (short calls; the default)'),
    Source('long', LONG_STUDY, 'frozen', "the long-grammar study's frozen trial"),
    Source('t74', FIRST_STUDY, 74, 'trial 74 (short calls)'),
    Source('t70', FIRST_STUDY, 70, 'trial 70 (short calls)'),
    Source('t26', FIRST_STUDY, 26, 'trial 26 (short calls)'),
    Source('t66', FIRST_STUDY, 66, 'trial 66 (short calls)'),
)
BY_NAME = {source.name: source for source in SOURCES}


def in_order(names):
    """The substrates among `names` in the sweep's order (the two frozen ones first): a record stored with sorted
    keys lists them alphabetically, which would put trial 45 between the others."""
    return [s.name for s in SOURCES if s.name in names]


def source(name):
    if name not in BY_NAME:
        raise ValueError(f'unknown substrate {name!r}; the sweep knows {", ".join(BY_NAME)}')
    return BY_NAME[name]


def trial_record(name, repo=REPO):
    """The trial record of a named substrate in its study's committed trials.json; LookupError if that study has not
    frozen a trial yet (for 'frozen') or has no such complete trial."""
    where = source(name)
    decision, recs = decision_from_export(json.loads((Path(repo) / where.study / 'trials.json').read_text()))
    number = where.trial
    if number == 'frozen':
        if decision.action != 'freeze':
            raise LookupError(f'the study in {where.study}/ has frozen no trial yet ({decision.reason})')
        number = decision.frozen
    record = next((r for r in recs if r['number'] == number and r['state'] == 'COMPLETE'), None)
    if record is None:
        raise LookupError(f'the study in {where.study}/ has no complete trial {number}')
    return record


def substrate_config(name, repo=REPO):
    """(SubstrateConfig, trial number) of a named substrate (see trial_record)."""
    record = trial_record(name, repo)
    return SubstrateConfig.from_description(record['config']), record['number']


FACT_ROWS = {'tokens': 'policy tokens per episode (RL base)', 'entropy': 'RL base: policy-token entropy'}


def substrate_facts(name, repo=REPO):
    """What the calibration record says of a substrate: its trial, call grammar, rows held on the search and the
    confirmation seeds (None if never confirmed), and the RL base's policy tokens per episode and policy-token
    entropy (means over the search seeds)."""
    record, where = trial_record(name, repo), source(name)
    means = {row['quantity']: row['mean'] for row in record['rows']}
    confirmation = record.get('confirmation')
    return dict(name=name, label=where.label, study=where.study, trial=record['number'],
                grammar=SubstrateConfig.from_description(record['config']).grammar,
                rows_held=record['rows_held'], confirmation_rows_held=confirmation['rows_held'] if confirmation else None,
                **{key: means[quantity] for key, quantity in FACT_ROWS.items()})


def heading(facts):
    """A substrate's short name in a table heading, from its substrate_facts: 'trial 74', 'trial 12 (long calls)'."""
    return f'trial {facts["trial"]}' + (' (long calls)' if facts['grammar'] == 'long' else '')


def available(repo=REPO):
    """{name: (config, trial) or the reason it is not available} for every known substrate, in SOURCES order."""
    out = {}
    for where in SOURCES:
        try:
            out[where.name] = substrate_config(where.name, repo)
        except LookupError as why:
            out[where.name] = str(why)
    return out


def record_path():
    return SUBSTRATE_SWEEP


def load_record(path=None):
    """The committed sweep record, or an empty one (no substrate swept yet)."""
    path = Path(path or record_path())
    return json.loads(path.read_text()) if path.is_file() else dict(substrates={}, sessions=[])
