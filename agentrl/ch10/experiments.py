"""The chapter's TinyAgent training runs as specs: cached on disk, keyed by what produced them, run in parallel."""
import copy
import dataclasses
import hashlib
import json
import math
import time
from collections.abc import Mapping
from contextlib import closing
from functools import lru_cache
from typing import Annotated, Literal, Optional

import pydantic
import torch
from pydantic import AfterValidator, BeforeValidator, Field

from agentrl import executors, run_times
from agentrl.ch10.evaluation import diversity
from agentrl.ch10.framework_plugins import check_options, framework_plugins
from agentrl.ch10.regularizers import (COV_VARIANTS, CovariancePolicyLoss, centered_cross_product, chapter_plugins,
                                       entropy_bonus)
from agentrl.core.logprobs import masked_mean, selected_log_probs
from agentrl.core.off_policy import KL_WEIGHTINGS
from agentrl.cpu import fixed_threads
from agentrl.fingerprint import code_fingerprint, kernel_choice
from agentrl.paths import runs_dir
from agentrl.substrate.config import CHECKED, NonNegative, Positive, SubstrateConfig, active, all_errors_say, use
from agentrl.substrate.grpo import TRAIN_THREADS, Plugin, RLConfig, Seed, train_rl
from agentrl.substrate.gym import make_tasks
from agentrl.substrate.sft import make_rl_base
from agentrl.substrate.tokenizer import build_tokenizer
from agentrl.verified_cache import load_verified, save_verified

RUN_FORMAT = 4  # bump when the content of a saved run changes
POLICY_LOSS_OPTIONS = ('variant', 'fraction', 'bounds', 'kl_coef')  # CovariancePolicyLoss's settings


def _setting_pairs(what):
    """A before-validator: RunSpec.fields or .policy_loss (`what`) as sorted (name, value) pairs (_field_pairs)."""
    return BeforeValidator(lambda value: _field_pairs(value, what))


def _known_policy_loss_options(pairs):
    unknown = sorted(name for name, _ in pairs if name not in POLICY_LOSS_OPTIONS)
    if unknown:
        raise ValueError(f'unknown setting {", ".join(unknown)}; allowed: {", ".join(POLICY_LOSS_OPTIONS)}')
    if pairs and 'variant' not in dict(pairs):
        raise ValueError(f'needs a variant, one of {", ".join(COV_VARIANTS)}')
    return pairs


Probe = Annotated[str, Field(pattern=r'^(covariance|heldout:[1-9][0-9]*)$'),
                  all_errors_say("'heldout:N' (N >= 1) or 'covariance'")]


# A pydantic dataclass like RLConfig: types, ranges and the allowed words are in the annotations; what needs two
# fields at once (the settings build a valid RLConfig and a valid CovariancePolicyLoss) is checked after them.
@pydantic.dataclasses.dataclass(frozen=True, config=CHECKED)
class RunSpec:
    """One training run (train_rl with chapter_plugins' choice) followed by the held-out diversity evaluation."""
    name: str  # the setting's label, e.g. 'KL k3+ 0.3'
    fields: Annotated[tuple, _setting_pairs('fields')] = ()  # RLConfig fields other than seed, as (name, value)
    #   pairs or a dict (stored as sorted pairs)
    policy_loss: Annotated[tuple, _setting_pairs('policy_loss'), AfterValidator(_known_policy_loss_options)] = ()
    #   the covariance-aware policy loss (CovariancePolicyLoss's variant, fraction, bounds, kl_coef) as pairs or a
    #   dict, like fields; empty: PPO's clipped surrogate
    entropy_coef: NonNegative = 0.0  # the entropy bonus's coefficient (train_regularized's entropy_coef)
    kl_in_reward: bool = False  # the KL charged to the reward, not the loss (train_regularized's kl_in_reward)
    steps: Annotated[int, Field(ge=1)] = 40  # GRPO steps
    seed: Seed = 0  # RLConfig.seed: the training random streams
    init: Optional['RunSpec'] = None  # start from this run's final weights (None: the RL base)
    reference: Literal['start', 'rl_base'] = 'start'  # KL reference: 'start' (a frozen copy of the starting
    #   weights) or 'rl_base'
    kl_target: Optional[Positive] = None  # adaptive KL coefficient steered towards this per-token KL (None: fixed
    #   kl_coef)
    probes: tuple[Probe, ...] = ()  # measurements during training: 'heldout:N' (held-out eval every N steps),
    #   'covariance'
    kl_weighting: Literal[KL_WEIGHTINGS] = 'none'  # the KL term's weight pi / pi_old ('ratio', 'ratio-detached')
    #   for tokens drawn before the update moved pi; 'none': the chapter's estimator as it is
    options: Annotated[tuple, _setting_pairs('options')] = ()  # what the frameworks ship, as plug-ins
    #   (agentrl.ch10.framework_plugins.FRAMEWORK_OPTIONS) as pairs or a dict, like fields; empty: none

    def __post_init__(self):
        self.config()  # validates the settings now, not in a worker
        self.loss_options()
        check_options(dict(self.options))
        if self.policy_loss and 'surrogate' in dict(self.options):
            raise ValueError('policy_loss and the surrogate option both replace the policy loss: choose one')
        if self.kl_weighting != 'none' and (self.kl_in_reward or not self.config().kl_coef):
            raise ValueError(f'kl_weighting={self.kl_weighting!r} weights a KL in the loss: it needs kl_coef > 0 in '
                             'fields and no kl_in_reward')

    def config(self):
        """The run's RLConfig (the fields that are GRPO settings)."""
        known = {field.name for field in dataclasses.fields(RLConfig)} - {'seed'}
        unknown = sorted(name for name, _ in self.fields if name not in known)
        if unknown:
            hint = ' (the covariance-aware loss goes in policy_loss)' if any('cov' in n for n in unknown) else ''
            raise ValueError(f'RunSpec.fields: {", ".join(unknown)} is not an RLConfig setting{hint}; allowed: '
                             f'{", ".join(sorted(known))}')
        return RLConfig.for_substrate(active(), seed=self.seed, **dict(self.fields))

    def loss_options(self):
        """chapter_plugins' policy_loss option (a CovariancePolicyLoss built from it, so a bad value fails here),
        or None for PPO's clipped surrogate."""
        if not self.policy_loss:
            return None
        options = dict(self.policy_loss)
        CovariancePolicyLoss(**options)
        return options

    def describe(self):
        """A JSON-able description of everything that determines the run (not its label), the init run's included."""
        out = dataclasses.asdict(self)
        del out['name']
        out['init'] = None if self.init is None else self.init.describe()
        out['fields'] = [[name, value] for name, value in self.fields]
        out['policy_loss'] = [[name, value] for name, value in self.policy_loss]
        out['options'] = [[name, value] for name, value in self.options]
        return out


def _plain_value(value):
    """Whether value is a JSON-able plain value: a finite number, str, bool, None, or a tuple of such values."""
    if isinstance(value, tuple):
        return all(_plain_value(item) for item in value)
    if isinstance(value, float):
        return math.isfinite(value)
    return value is None or type(value) in (bool, int, str)


def _field_pairs(fields, what):
    """RunSpec.fields or .policy_loss (`what`) as a tuple of (name, value) pairs sorted by name; a clear error for
    anything else."""
    allowed = 'a dict or a tuple of (name, value) pairs'
    if isinstance(fields, Mapping):
        fields = tuple(fields.items())
    if not isinstance(fields, (tuple, list)):
        raise TypeError(f'RunSpec.{what} must be {allowed}, got {type(fields).__name__} {fields!r}')
    for pair in fields:
        if not (isinstance(pair, (tuple, list)) and len(pair) == 2 and isinstance(pair[0], str)):
            raise TypeError(f'RunSpec.{what} must be {allowed} with str names, got the item {pair!r}')
        if not _plain_value(pair[1]):
            raise TypeError(f'RunSpec.{what}: {pair[0]} = {pair[1]!r} is not a plain value; allowed: finite numbers, '
                            'str, bool, None and tuples of them')
    names = [name for name, _ in fields]
    if len(set(names)) != len(names):
        raise ValueError(f'RunSpec.{what} names a setting more than once: {names}')
    return tuple(sorted((name, value) for name, value in fields))


def arm(name, fields=None, entropy_coef=0.0, kl_in_reward=False, steps=40, seed=0, kl_target=None, probes=(),
        policy_loss=None, kl_weighting='none', options=None):
    """A RunSpec from the chapter's ARMS notation: RLConfig fields as a dict, chapter_plugins' options as keywords
    (policy_loss as a dict, e.g. dict(variant='kl_cov', fraction=0.05); options: framework options as a dict)."""
    return RunSpec(name, fields=fields or {}, policy_loss=policy_loss or {}, entropy_coef=entropy_coef,
                   kl_in_reward=kl_in_reward, steps=steps, seed=seed, kl_target=kl_target, probes=tuple(probes),
                   kl_weighting=kl_weighting, options=options or {})


def chapter_arms(steps=40, seed=0):
    """The nine settings of section 10.7, in the chapter's order."""
    return [arm('none', steps=steps, seed=seed),
            arm('KL k3+ 0.05', dict(kl_coef=0.05, kl_kind='k3+'), steps=steps, seed=seed),
            arm('KL k3+ 0.3', dict(kl_coef=0.3, kl_kind='k3+'), steps=steps, seed=seed),
            arm('KL k3+ 1.0', dict(kl_coef=1.0, kl_kind='k3+'), steps=steps, seed=seed),
            arm('KL k3 0.3', dict(kl_coef=0.3, kl_kind='k3'), steps=steps, seed=seed),
            arm('KL reward 0.3', dict(kl_coef=0.3, kl_kind='k1'), kl_in_reward=True, steps=steps, seed=seed),
            arm('entropy 0.03', entropy_coef=0.03, steps=steps, seed=seed),
            arm('entropy 0.1', entropy_coef=0.1, steps=steps, seed=seed),
            arm('temperature 1.3', dict(temperature=1.3), steps=steps, seed=seed)]


def scale_arms(seed=0):
    """The chapter's failing mechanisms re-checked at twice the coefficient (KL 2.0, bonus 0.2) or the steps (bonus 0.1)."""
    return [arm('KL k3+ 2.0', dict(kl_coef=2.0, kl_kind='k3+'), seed=seed),
            arm('entropy 0.2', entropy_coef=0.2, seed=seed),
            arm('entropy 0.1, 80 steps', entropy_coef=0.1, steps=80, seed=seed)]


def substrate():
    """(tokenizer, train tasks, held-out tasks, RL base) of the active substrate, as the chapter sets them up; built
    once per process and configuration."""
    return _substrate(active())


@lru_cache(maxsize=2)
def _substrate(config):  # keyed by the configuration: a worker may serve jobs of several substrates in turn
    with use(config):
        tok = build_tokenizer(make_tasks('all'))
        return tok, make_tasks('train'), make_tasks('heldout'), make_rl_base(tok)


def model_fingerprint(model):
    """Hash of a model's parameters and buffers, bit for bit."""
    digest = hashlib.sha256()
    for key, tensor in model.state_dict().items():
        digest.update(key.encode() + tensor.detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()


def rl_base_fingerprint():
    """model_fingerprint of this process's RL base of the active substrate (hashed once per configuration)."""
    return _rl_base_fingerprint(active())


@lru_cache(maxsize=2)
def _rl_base_fingerprint(config):
    return model_fingerprint(substrate()[3])


def provenance(spec):
    """Everything that determines a run's result (the spec, the code, the RL base weights, torch's version and the
    CPU kernels it computes with), as JSON."""
    return json.loads(json.dumps(dict(format=RUN_FORMAT, spec=spec.describe(), code=code_fingerprint(),
                                      substrate=active().key(), rl_base=rl_base_fingerprint(),
                                      torch=str(torch.__version__),
                                      kernels=kernel_choice())))


def run_path(spec):
    """The file a run is saved in, named by a hash of its provenance (runs that differ only in label share it)."""
    key = hashlib.sha256(json.dumps(provenance(spec), sort_keys=True).encode()).hexdigest()[:20]
    return runs_dir() / f'run-{key}.pt'


def load_run(spec):
    """The saved run of spec, or None if it is missing, corrupt or was produced by something else (with a warning).

    The file stores the run's checksum and its full provenance (agentrl.verified_cache), both checked here. A
    directory at the run's path raises IsADirectoryError, so ensure_run fails before training, not after.
    """
    described = provenance(spec)
    run = load_verified(run_path(spec), described, 'saved run')
    return None if run is None else dict(provenance=described, **run)


def train_and_evaluate(spec, watch=(), init_state=None):
    """Train spec from its starting weights, evaluate on the held-out tasks -> dict(history, metrics, vocab_size, state_dict).

    watch: extra plug-ins that only read the step records (a live curve in a notebook); the run is the same with or
    without them. init_state: the final weights of spec.init when the caller has them (a worker on another machine
    has no run cache to load them from); None: ensure_run(spec.init)'s.
    """
    tok, train_tasks, heldout_tasks, rl_base = substrate()
    with fixed_threads(TRAIN_THREADS):  # training and the final evaluation alike
        return _train_and_evaluate(spec, tok, train_tasks, heldout_tasks, rl_base, watch, init_state)


def _train_and_evaluate(spec, tok, train_tasks, heldout_tasks, rl_base, watch=(), init_state=None):
    model = copy.deepcopy(rl_base)
    if spec.init is not None:
        model.load_state_dict(ensure_run(spec.init)['state_dict'] if init_state is None else init_state)
    reference = copy.deepcopy(rl_base).eval() if spec.reference == 'rl_base' else None
    cfg = spec.config()
    probes = [Probe(spec.probes, rl_base, heldout_tasks, tok, cfg.temperature)] if spec.probes else []
    shipped = framework_plugins(dict(spec.options))
    chosen = chapter_plugins(cfg, spec.entropy_coef, spec.kl_in_reward, reference, spec.kl_target,
                             spec.loss_options(), spec.kl_weighting)
    history = train_rl(model, train_tasks, tok, cfg, spec.steps, plugins=chosen + shipped + probes + list(watch),
                       label=f'run {spec.name!r}')
    metrics = diversity(model, rl_base, heldout_tasks, tok)
    return dict(history=history, metrics=metrics, vocab_size=len(tok), settings=dataclasses.asdict(cfg),
                state_dict=model.state_dict())


class Probe(Plugin):
    """Measurements during training, none of which draws from the training random streams.

    'heldout:N': held-out pass@1 and pass@8 of the policy as it is at the start of every N-th step
    ('probe_pass1', 'probe_pass8'); 'covariance': the batch's mean centred cross-product of log-prob and
    advantage before the update, and the change of the policy-token entropy the update causes.
    """

    def __init__(self, names, rl_base, heldout_tasks, tok, temperature):
        every = [int(n.split(':')[1]) for n in names if n.startswith('heldout:')]
        self.every = every[0] if every else None
        self.covariance = 'covariance' in names
        self.rl_base, self.heldout_tasks, self.tok, self.temperature = rl_base, heldout_tasks, tok, temperature

    def before_update(self, model, batch, advantages, record):
        self.seen = {}
        if self.every and record['step'] % self.every == 0:
            metrics = diversity(model, self.rl_base, self.heldout_tasks, self.tok)
            self.seen.update(probe_pass1=metrics['pass1'], probe_pass8=metrics['pass8'])
        if self.covariance:
            self.ids, self.mask = batch['ids'], batch['action_mask']
            with torch.no_grad():
                logits = model(self.ids)[:, :-1] / self.temperature  # [B, T-1, V]
                logp = selected_log_probs(logits, self.ids[:, 1:])
                self.entropy_before = entropy_bonus(logits, self.mask).item()
                self.seen['covariance'] = masked_mean(centered_cross_product(logp, advantages, self.mask),
                                                      self.mask).item()

    def after_update(self, model, record):
        if self.covariance:
            with torch.no_grad():
                after = entropy_bonus(model(self.ids)[:, :-1] / self.temperature, self.mask).item()
            self.seen.update(entropy_change=after - self.entropy_before, entropy_before=self.entropy_before)
        record.update(self.seen)


def ensure_run(spec):
    """The run of spec: loaded if saved with the same provenance, else trained, evaluated and saved atomically."""
    run = load_run(spec)
    if run is None:
        described = provenance(spec)
        result = train_and_evaluate(spec)
        save_verified(run_path(spec), result, described)
        run = dict(provenance=described, **result)
    return run


def run_job(spec, substrate, init_state=None):
    """A worker's side of a sweep: spec trained and evaluated under the substrate described (SubstrateConfig.describe())
    -> dict(provenance, run, seconds). Nothing is saved here: the caller checks the provenance and saves the run in its
    own run cache (ensure_runs), so a worker on another machine needs no shared disk. init_state: spec.init's final
    weights (None if it has no init)."""
    start = time.perf_counter()
    with use(SubstrateConfig.from_description(substrate)):
        described = provenance(spec)
        run = train_and_evaluate(spec, init_state=init_state)
    return dict(provenance=described, run=run, seconds=time.perf_counter() - start)


def ensure_runs(specs, executor, done=lambda name, seconds: None):
    """Make sure every spec's run is saved, trained through `executor` (None: here, one after the other), calling
    done(name, seconds) as each is saved.

    Through an executor each run is trained by run_job under this process's active substrate and comes back here,
    where it is saved in the run cache only if the worker computed it from the same provenance (code, substrate, RL
    base weights, torch, CPU kernels) as this process would.
    """
    if executor is None:
        for spec in specs:
            start = time.perf_counter()
            ensure_run(spec)
            done(spec.name, time.perf_counter() - start)
        return
    substrate = active().describe()
    jobs = [(spec, substrate, None if spec.init is None else ensure_run(spec.init)['state_dict']) for spec in specs]
    with closing(executors.finished(executor, run_job, jobs)) as each:
        for index, result in each:
            spec, described = specs[index], provenance(specs[index])
            if result['provenance'] != described:
                differ = sorted(key for key in described if result['provenance'].get(key) != described[key])
                raise RuntimeError(f'run {spec.name!r} came back computed with another {", ".join(differ)} than '
                                   'this process would use: not saved')
            save_verified(run_path(spec), result['run'], described)
            done(spec.name, result['seconds'])


def run_all(specs, processes=2, executor=None):
    """{name: run} for every spec; missing runs are trained through `executor` (any concurrent.futures.Executor) or,
    when it is None, on the Dask cluster at $AGENTRL_DASK_SCHEDULER if set, else in `processes` spawned worker
    processes (1: in this one; None: one per core). Runs that others start from (spec.init) are trained first."""
    names = [spec.name for spec in specs]
    if len(set(names)) != len(names):
        raise ValueError(f'run names must be unique, got {names}')
    todo = [spec for spec in specs if load_run(spec) is None]
    inits = sorted({spec.init for spec in todo if spec.init is not None and load_run(spec.init) is None},
                   key=lambda s: s.name)
    train_runs(inits, processes, executor)  # runs that others start from: trained first
    train_runs([spec for spec in todo if load_run(spec) is None], processes, executor)  # one may be an init
    return {spec.name: ensure_run(spec) for spec in specs}


def train_runs(specs, processes=2, executor=None, done=lambda name, seconds: None):
    """ensure_runs(specs, ...) through `executor`, else the Dask cluster at $AGENTRL_DASK_SCHEDULER if set, else
    `processes` local worker processes (agentrl.executors.sweep_executor; one run, or processes 1: in this one; None:
    one per core). Each run's seconds go to agentrl.run_times."""
    if specs:
        workers = min(executors.worker_count(processes), len(specs))
        batch = f'{time.time():.6f}'  # the runs trained together, for a forecast of other worker counts

        def done_and_timed(name, seconds):
            done(name, seconds)
            run_times.record(batch, name, seconds, workers)
        with executors.sweep_executor(workers, executor, executors.scheduler_address()) as pool:
            ensure_runs(specs, pool, done_and_timed)
