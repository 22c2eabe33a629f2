"""The search space of the calibration studies, the named studies, and a search session's settings (Search)."""
import dataclasses
import importlib
from pathlib import Path

from optuna.distributions import CategoricalDistribution, FloatDistribution

from agentrl.calibration.freeze import BUDGET_SECONDS, BUDGET_TRIALS
from agentrl.paths import REPO
from agentrl.substrate.config import GRAMMARS, HELDOUT_RULES, SLIP_KINDS, FAMILY_SETS, SubstrateConfig


STUDY_NAME = 'tinyagent-calibration'


# The search's rules, fixed before it started (not to be tuned on what the search finds); the freeze rule and the
# budget are in agentrl/calibration/freeze.py:
PRUNE_BELOW = 14  # a trial whose first seed alone holds fewer than 14 of the 26 rows is pruned (its other seeds are
#                   not measured): it misses by far, and more seeds move a mean, not 13 rows


# Each parameter: its name in the study, where it sits in SubstrateConfig.describe(), its distribution. Fields of a
# SubstrateConfig not named here keep their defaults (SFT batch size, phase-1 learning rate, weight decay, SFT seed).
SPACE = [
    ('families', 'families', CategoricalDistribution(FAMILY_SETS)),
    ('heldout', 'heldout', CategoricalDistribution(HELDOUT_RULES)),
    ('grammar', 'grammar', CategoricalDistribution(GRAMMARS)),
    ('max_offset', 'max_offset', CategoricalDistribution((1, 2, 3, 12))),
    ('slips', 'sft.habits.slips', CategoricalDistribution(SLIP_KINDS)),
    ('n_head', 'n_head', CategoricalDistribution((2, 4, 8))),
    ('careful_steps', 'sft.careful_steps', CategoricalDistribution((300, 600, 1200))),
    ('habit_steps', 'sft.habit_steps', CategoricalDistribution((75, 150, 300))),
    ('read', 'sft.habits.read', FloatDistribution(0.15, 0.6)),
    ('full_read', 'sft.habits.full_read', FloatDistribution(0.3, 0.9)),
    ('slip', 'sft.habits.slip', FloatDistribution(0.0, 0.12)),
    ('mislabel', 'sft.habits.mislabel', FloatDistribution(0.0, 0.3)),
    ('habit_lr', 'sft.habit_lr', FloatDistribution(3e-4, 3e-3, log=True)),
    ('init_std', 'init_std', FloatDistribution(0.01, 0.08, log=True)),
    ('logit_scale', 'logit_scale', FloatDistribution(0.25, 1.0)),
    ('rl_lr', 'rl_lr', FloatDistribution(1.5e-4, 6e-4, log=True)),
    ('turn_cost', 'turn_cost', FloatDistribution(0.0, 0.5)),
]


FIRST_TRIALS = ('main', 'c18')  # config.CANDIDATES measured first, in this order, when the study is empty


# The studies of the calibration, each with its own record folder. The first searched the whole space; the second
# holds the long call grammar (the one parameter that puts the RL base's policy tokens per episode inside the book's
# band) and starts from the first study's twelve best trials. Both share the protocol, objective, pruning rule,
# budget and freeze rule above; the second's rule for becoming the default was fixed before it started.
LONG_GRAMMAR_DEFAULT_RULE = (
    'the trial this study freezes becomes `config.DEFAULT` only if it holds all 26 rows on the search seeds (0-4) and '
    'at least 24 on the confirmation seeds (5-9), that is, only if the freeze rule confirms it rather than falling '
    'back; otherwise trial 45 of the first study stays the default and this one is a named candidate.')


STUDIES = {
    'first': dict(study=STUDY_NAME, folder='calibration'),
    'long-grammar': dict(study='tinyagent-calibration-long-grammar', folder='calibration/long-grammar',
                         fixed=(('grammar', 'long'),), seeded_from='calibration', seeded_count=12,
                         title='The calibration search on the long call grammar',
                         default_rule=LONG_GRAMMAR_DEFAULT_RULE),
}


def study_search(name, **fields):
    """The Search of a named study (STUDIES), its record folder under the repository; `fields` override."""
    if name not in STUDIES:
        raise ValueError(f'unknown study {name!r}; the studies are {sorted(STUDIES)}')
    plan = dict(STUDIES[name])
    plan['folder'] = str(REPO / plan['folder'])
    if plan.get('seeded_from'):
        plan['seeded_from'] = str(REPO / plan['seeded_from'])
    return Search(**dict(plan, **fields))


def _suggest(trial, name, distribution):
    if isinstance(distribution, CategoricalDistribution):
        return trial.suggest_categorical(name, distribution.choices)
    return trial.suggest_float(name, distribution.low, distribution.high, log=distribution.log)


def config_from_params(params):
    """The SubstrateConfig of a trial's parameters (every SPACE name), the other fields at their defaults."""
    description = SubstrateConfig().describe()
    for name, path, _ in SPACE:
        *parents, leaf = path.split('.')
        node = description
        for part in parents:
            node = node[part]
        node[leaf] = params[name]
    return SubstrateConfig.from_description(description)


def space(trial):
    """The search space: an Optuna trial (or FixedTrial) -> the SubstrateConfig it samples."""
    return config_from_params({name: _suggest(trial, name, distribution) for name, _, distribution in SPACE})


def _inside(distribution, value):
    """Whether a value is one the distribution can give."""
    if isinstance(distribution, CategoricalDistribution):
        return value in distribution.choices
    return distribution.low <= value <= distribution.high


def space_with(fixed):
    """SPACE with each (name, value) of `fixed` narrowed to that one value (a study that does not search it)."""
    fixed = dict(fixed)
    unknown = set(fixed) - {name for name, _, _ in SPACE}
    if unknown:
        raise ValueError(f'fixed parameters {sorted(unknown)} are not in the search space; it has '
                         f'{[name for name, _, _ in SPACE]}')
    narrowed = []
    for name, path, distribution in SPACE:
        if name in fixed:
            if not _inside(distribution, fixed[name]):
                raise ValueError(f'{name}={fixed[name]!r} is outside the search space ({distribution})')
            distribution = CategoricalDistribution((fixed[name],))
        narrowed.append((name, path, distribution))
    return narrowed


@dataclasses.dataclass(frozen=True)
class NarrowedSpace:
    """The search space with some parameters held at one value: a picklable trial -> SubstrateConfig.

    A held parameter is still suggested (with its one choice), so every trial has all of SPACE's parameters and an
    interrupted trial can be queued again whole."""
    fixed: tuple = ()  # (parameter name, value) pairs

    def __call__(self, trial):
        return config_from_params({name: _suggest(trial, name, distribution)
                                   for name, _, distribution in space_with(self.fixed)})


def params_of(config):
    """A SubstrateConfig as the study's parameters; ValueError if the space cannot express it exactly."""
    params = {}
    for name, path, distribution in SPACE:
        value = config.describe()
        for part in path.split('.'):
            value = value[part]
        if not _inside(distribution, value):
            raise ValueError(f'{name}={value!r} is outside the search space ({distribution})')
        params[name] = value
    if config_from_params(params) != config:
        raise ValueError('the configuration sets a field the search space does not cover')
    return params


def expression(value):
    """A configuration as the Python expression that builds it (fields at their defaults left out)."""
    if not dataclasses.is_dataclass(value):
        return repr(value)
    default = type(value)()
    parts = [f'{field.name}={expression(getattr(value, field.name))}' for field in dataclasses.fields(value)
             if getattr(value, field.name) != getattr(default, field.name)]
    return f'{type(value).__name__}({", ".join(parts)})'


@dataclasses.dataclass(frozen=True)
class Search:
    """One search session: where the study lives, how it runs, when it stops."""
    folder: str = str(REPO / 'calibration')  # the committed record (study.db, trials.csv/json, README.md, search.log)
    live: str = ''  # the SQLite database the workers write ('' : <folder>/../.cache/calibration/live.db, git-ignored)
    storage: str = ''  # a shared database server's URL (e.g. postgresql://user@host/db) instead of the live SQLite
    study: str = STUDY_NAME  # the study's name
    seed: int = 17  # TPE seed (worker w of session s samples with seed + 1000 s + w; see worker_sampler)
    processes: int = 2  # worker processes, each running one trial at a time
    minutes: float = 0.0  # session limit: at this many minutes running trials are stopped and queued again (0: none)
    trials: int = 0  # stop after this many finished trials in this session (0: no limit)
    budget_trials: int = BUDGET_TRIALS  # the study's budget: complete trials ...
    budget_seconds: float = BUDGET_SECONDS  # ... or seconds of search time
    protocol: object = None  # a calibrate.Protocol: the seeds of a trial (None: the measurement's SEARCH)
    confirmation: object = None  # the seeds of a confirmation (None: the measurement's CONFIRMATION)
    measure: object = 'agentrl.calibration.measure'  # the measurement: a module name, or a picklable object with the
    #                                              same functions (prepare, measure_seed, measure_batch, judge, ...)
    space: object = None  # trial -> SubstrateConfig, a picklable function (None: SPACE narrowed by `fixed`)
    fixed: tuple = ()  # (parameter, value) pairs this study holds at one value instead of searching them
    seeded_from: str = ''  # another study's record folder: its best trials (with `fixed` applied) are queued first
    seeded_count: int = 0  # ... this many of them, in the freeze rule's order (instead of the named candidates)
    title: str = 'The calibration search'  # the record README's title
    default_rule: str = ''  # when this study's frozen trial replaces config.DEFAULT, fixed before the search
    scheduler: str = ''  # a Dask scheduler's address: a trial's seeds are measured on its cluster ('': in the worker)
    commit: bool = False  # commit the record files with git as the study grows ...
    commit_minutes: float = 10.0  # ... at most once per this many minutes during a search, and when it ends

    def live_path(self):
        if self.live:
            return Path(self.live)
        if self.study == STUDY_NAME:
            return Path(self.folder).parent / '.cache' / 'calibration' / 'live.db'
        return REPO / '.cache' / 'calibration' / f'{self.study}.db'  # one live copy per study

    def trial_space(self):
        return self.space or NarrowedSpace(tuple(self.fixed))

    def measurement(self):
        return importlib.import_module(self.measure) if isinstance(self.measure, str) else self.measure

    def protocols(self):
        measurement = self.measurement()
        return self.protocol or measurement.SEARCH, self.confirmation or measurement.CONFIRMATION
