"""OpenRLHF's functions (openrlhf/models/utils.py, openrlhf/models/loss.py, trainer/ppo_utils/kl_controller.py) against
ours.

openrlhf.models/__init__.py imports the actor, which needs flash_attn (CUDA only), and openrlhf.utils/__init__.py and
openrlhf.trainer.ppo_utils/__init__.py pull in pylatexenc, ray and the trainers. None of those __init__ files holds
arithmetic, so _load registers each of these packages as a bare module whose __path__ is the real folder and then
imports the real submodules (utils.py, loss.py, kl_controller.py) from it: only the packages' __init__ files are
skipped, never a line the checks execute.
"""
import importlib
import inspect
import os
import sys
import types

import torch

from agentrl.ch10.framework_plugins import SamplerCorrection, SequenceRatioLoss
from agentrl.ch10.regularizers import KLInReward, adapt_kl_coef, entropy_bonus
from agentrl.core.aggregation import aggregate
from agentrl.core.kl import kl_estimate, kl_penalty
from agentrl.core.logprobs import entropy_from_logits, masked_mean, selected_log_probs
from agentrl.substrate.grpo import RLConfig, ReferenceKL, policy_loss
from machinery.differential.compare import Differs, Registry
from machinery.differential.ours import kl_shaped_rewards

FRAMEWORK = 'OpenRLHF'
registry = Registry()
CLIP_LOW, CLIP_HIGH = 0.2, 0.28  # clip-higher, so that a swapped pair of bounds shows
BARE = ('openrlhf.models', 'openrlhf.utils', 'openrlhf.trainer', 'openrlhf.trainer.ppo_utils')
STAND_IN = ('bare package modules for ' + ', '.join(BARE) + ' (their __init__ files import flash_attn, ray and '
            'pylatexenc, and hold no arithmetic); the real submodules are imported from the real folders')


def _load(name):
    """openrlhf.<name> (e.g. 'models.utils'), imported under bare parent packages (see the module's docstring)."""
    import openrlhf
    root = os.path.dirname(openrlhf.__file__)
    for package in BARE:
        if package not in sys.modules:
            bare = types.ModuleType(package)
            bare.__path__ = [os.path.join(root, *package.split('.')[1:])]
            sys.modules[package] = bare
    return importlib.import_module(f'openrlhf.{name}')


def _utils():
    return _load('models.utils')


def _loss():
    return _load('models.loss')


# ---- where OpenRLHF's arithmetic itself differs from float64
# compute_approx_kl casts both log-probs to float32 (.float()) before the log-ratio: its checks are judged at
# float32's tolerance (compare.TOLERANCES), not declared as differences
EMPTY_ROWS = ("aggregate_loss(token_level_loss=False) averages the sequence means over the rows that have a policy "
              "token (seq_mask = token_counts > 0), ours over every row")
KL_CLAMP = ("compute_approx_kl clamps every estimate to [-10, 10] (zero gradient beyond); ours is unclamped, and "
            "'far ratios' puts log-ratios of -30 to 21 on row 0")
KL_CLAMP_LATEST = KL_CLAMP + ("; 0.11.2 also clamps k3's log-ratio at -10 before the exponential, which only keeps "
                              "the derivative finite under the final clamp")
PPO_CLAMP = ("PolicyLoss (ppo) clamps the log-ratio to [-20, 20] before exp; 'far ratios' has log-ratios of 21 on "
             "row 1 with A < 0, where ours keeps r A (and its gradient) and OpenRLHF has e^20 A with no gradient")


def _kl_differs(estimator, unbiased=False):
    entries = []
    if estimator.startswith('k3') and not unbiased:
        entries += [Differs(KL_CLAMP, cases=('far ratios',), sets=('reference',)),
                    Differs(KL_CLAMP_LATEST, cases=('far ratios',), sets=('latest',))]
    else:
        entries.append(Differs(KL_CLAMP, cases=('far ratios',)))
    return entries


# ---- KL estimators: compute_approx_kl(log_probs, log_probs_base, kl_estimator)
# d = logp - ref_logp; their k1 = d, k2 = d^2/2, k3 = e^-d - 1 + d: ours with l = ref_logp - logp, the same formulas
for estimator in ('k1', 'k2', 'k3'):
    registry.add(
        FRAMEWORK, ('--algo.kl.estimator',),
        'openrlhf.models.utils.compute_approx_kl', 'agentrl.core.kl.kl_penalty', f"kl_estimator='{estimator}'",
        theirs=lambda c, k=estimator: _utils().compute_approx_kl(c['logp'], c['ref_logp'], kl_estimator=k),
        mine=lambda c, k=estimator: kl_penalty(c['logp'], c['ref_logp'], k),
        wrt=('logp', 'ref_logp'), stand_in=STAND_IN,
        differs=tuple(_kl_differs(estimator)), precision='float32')

# 0.11.2's unbiased_gradient without old log-probs (w = 1): the estimator's value, the gradient of d^2/2 (k2's):
# ours is kl_estimate's straight-through '+' kinds
NO_UNBIASED = "0.11.0's compute_approx_kl has no unbiased_gradient argument (TypeError)"
for estimator, ours in (('k1', 'k1+'), ('k3', 'k3+'), ('k2', 'k2')):
    registry.add(
        FRAMEWORK, ('--algo.kl.estimator',),
        'openrlhf.models.utils.compute_approx_kl', 'agentrl.core.kl.kl_estimate',
        f"kl_estimator='{estimator}', unbiased_gradient=True, log_probs_old=None",
        theirs=lambda c, k=estimator: _utils().compute_approx_kl(c['logp'], c['ref_logp'], kl_estimator=k,
                                                                 unbiased_gradient=True),
        mine=lambda c, k=ours: kl_estimate(c['logp'], c['ref_logp'], k),
        wrt=('logp', 'ref_logp'), stand_in=STAND_IN,
        differs=(Differs(NO_UNBIASED, sets=('reference',)),
                 Differs(KL_CLAMP + ' (the value only: the straight-through gradient is unclamped)',
                         cases=('far ratios',), sets=('latest',))), precision='float32')

# ---- the KL as a loss (--algo.kl.use_loss): the estimator with gradient through logp, aggregated as a token mean
# (aggregate_loss's default, token_level_loss=True) whatever the policy term's aggregation; ours is ReferenceKL's term


def _our_kl_loss(case, kind):
    term = ReferenceKL(reference=None, coef=1.0, kind=kind)
    term.ref_logp, term.cfg = case['ref_logp'], RLConfig()  # the reference's log-probs, as prepare() would set them
    rows = torch.arange(case['logp'].shape[0])
    return term.extend_loss(torch.zeros((), dtype=torch.float64), rows, None, case['logp'], case['mask'], {})


for estimator in ('k1', 'k2', 'k3'):
    registry.add(
        FRAMEWORK, ('--algo.kl.use_loss', '--algo.kl.estimator', 'PolicyLoss.token_level_loss (internal; no CLI flag)'),
        'openrlhf.models.loss.aggregate_loss(compute_approx_kl(...))', 'agentrl.substrate.grpo.ReferenceKL',
        f"kl_estimator='{estimator}', token_level_loss=True",
        theirs=lambda c, k=estimator: _loss().aggregate_loss(
            _utils().compute_approx_kl(c['logp'], c['ref_logp'], kl_estimator=k), c['mask']),
        mine=lambda c, k=estimator: _our_kl_loss(c, k),
        wrt=('logp', 'ref_logp'), stand_in=STAND_IN,
        differs=tuple(_kl_differs(estimator)), precision='float32')

# ---- the KL in the reward (the default placement): compute_reward puts r on each row's last policy token and
# -coef * kl on every token, kl = k1 of old_logp against ref_logp; the returns at gamma = 1 are its masked sum
# (get_cumulative_returns, a method of RemoteExperienceMaker whose module cannot load here: see the end). Ours:
# KLInReward subtracts coef * the sequence's summed k1 from the episode's reward.
KL_COEF = 0.05
EMPTY_REWARD = ("compute_reward places r at index T-1 on a row with no policy token (argmax of an all-zero flipped "
                "mask is 0) and the masked returns drop it: the row's return is 0, ours r")


def _their_returns(case):
    kl = _utils().compute_approx_kl(case['old_logp'], case['ref_logp'], kl_estimator='k1')
    reward = _utils().compute_reward(case['rewards'], KL_COEF, kl, action_mask=case['mask'])
    return (reward * case['mask']).sum(-1)  # get_cumulative_returns at gamma = 1, its value at the first token


def _our_returns(case):
    return kl_shaped_rewards(case, KL_COEF)


registry.add(
    FRAMEWORK, ('--algo.kl.init_coef', '--algo.kl.use_loss'),
    'openrlhf.models.utils.compute_reward', 'agentrl.ch10.regularizers.KLInReward',
    f"kl_coef={KL_COEF}, kl_estimator='k1', reward_clip_range=None, summed over policy tokens",
    theirs=_their_returns, mine=_our_returns, value_only=True,
    stand_in=STAND_IN + '; ours: a reference model returning logits whose log-softmax is the case\'s ref_logp',
    differs=(Differs(EMPTY_REWARD, cases=('empty row',)), Differs(KL_CLAMP, cases=('far ratios',))),
    precision='float32')

# ---- masked_mean and aggregate_loss
registry.add(
    FRAMEWORK, ('PolicyLoss.token_level_loss (internal; no CLI flag)',),
    'openrlhf.models.utils.masked_mean', 'agentrl.core.logprobs.masked_mean', 'dim=None',
    theirs=lambda c: _utils().masked_mean(c['logp'] * c['ref_logp'], c['mask']),
    mine=lambda c: masked_mean(c['logp'] * c['ref_logp'], c['mask']),
    wrt=('logp', 'ref_logp'), stand_in=STAND_IN)
for token_level, mode in ((True, 'token-mean'), (False, 'seq-mean-token-mean')):
    registry.add(
        FRAMEWORK, ('PolicyLoss.token_level_loss (internal; no CLI flag)',),
        'openrlhf.models.loss.aggregate_loss', 'agentrl.core.aggregation.aggregate', f'token_level_loss={token_level}',
        theirs=lambda c, t=token_level: _loss().aggregate_loss(c['logp'] * c['ref_logp'], c['mask'],
                                                               token_level_loss=t),
        mine=lambda c, m=mode: aggregate(c['logp'] * c['ref_logp'], c['mask'], m),
        wrt=('logp', 'ref_logp'), stand_in=STAND_IN,
        differs=() if token_level else (Differs(EMPTY_ROWS, cases=('empty row',)),))

# ---- entropy: compute_entropy is wrapped in torch.compile; the original function it wraps is called
ENTROPY_STAND_IN = STAND_IN + "; compute_entropy is torch.compile's wrapper: its original (__wrapped__) is called"


def _compute_entropy(logits):
    compiled = _utils().compute_entropy
    original = getattr(compiled, '_torchdynamo_orig_callable', None) or getattr(compiled, '__wrapped__', compiled)
    return original(logits)


registry.add(
    FRAMEWORK, ('--actor.entropy_coef',),
    'openrlhf.models.utils.compute_entropy', 'agentrl.core.logprobs.entropy_from_logits', '',
    theirs=lambda c: _compute_entropy(c['logits']), mine=lambda c: entropy_from_logits(c['logits']),
    wrt=('logits',), stand_in=ENTROPY_STAND_IN)
registry.add(
    FRAMEWORK, ('--actor.entropy_coef', 'PolicyLoss.token_level_loss (internal; no CLI flag)'),
    'openrlhf.models.loss.aggregate_loss(compute_entropy(...))', 'agentrl.ch10.regularizers.entropy_bonus',
    'token_level_loss=True (always, for the entropy term)',
    theirs=lambda c: _loss().aggregate_loss(_compute_entropy(c['logits']), c['mask']),
    mine=lambda c: entropy_bonus(c['logits'], c['mask']),
    wrt=('logits',), stand_in=ENTROPY_STAND_IN)

# ---- PolicyLoss: ppo (per-token ratio) and gspo (one ratio per sequence), dual_clip off


def _policy_loss(clip, loss_type='ppo', token_level=True, correction=None):
    """OpenRLHF's PolicyLoss with these settings; correction = (0.11.0 type, 0.11.2 mode) or None."""
    kwargs = dict(clip_eps_low=clip[0], clip_eps_high=clip[1], dual_clip=None, token_level_loss=token_level,
                  policy_loss_type=loss_type)
    parameters = inspect.signature(_loss().PolicyLoss).parameters
    if correction is not None:
        if 'enable_vllm_is_correction' in parameters:  # 0.11.0
            kwargs.update(enable_vllm_is_correction=True, vllm_is_truncated_threshold=[0.0, SAMPLER_HIGH],
                          vllm_is_correction_type=correction[0])
        else:  # 0.11.2: a token-level gate on the ratio, clipped ('tis') or masked ('icepop')
            kwargs.update(is_correction_level='token', is_correction_mode=correction[1],
                          is_correction_gating='ratio', is_correction_threshold=(0.0, SAMPLER_HIGH))
    return _loss().PolicyLoss(**kwargs)


def _their_policy(case, clip, loss_type='ppo', token_level=True, correction=None):
    loss_fn = _policy_loss(clip, loss_type, token_level, correction)
    advantages = case['advantages'][:, None].expand_as(case['logp'])
    rollout = case['ref_logp'].detach() if correction is not None else None  # the sampler's log-probs: data
    return loss_fn(case['logp'], case['old_logp'].detach(), advantages, case['mask'], rollout_log_probs=rollout)[0]


def _our_policy(case, clip, mode, plugins=()):
    cfg = RLConfig(clip_low=clip[0], clip_high=clip[1], loss_agg=mode)
    return policy_loss(case['logp'], case['old_logp'].detach(), case['advantages'], case['mask'], cfg, plugins)[0]


TOKEN_LEVEL = 'PolicyLoss.token_level_loss (internal; no CLI flag)'
PPO_STAND_IN = STAND_IN + '; PolicyLoss is an nn.Module with no parameters: only its clip and aggregation settings'
for clip, options, label in (((CLIP_LOW, CLIP_HIGH), ('--actor.eps_clip_low_high',), 'eps_clip_low_high=(0.2, 0.28)'),
                             ((0.2, 0.2), ('--actor.eps_clip',), 'eps_clip=0.2')):
    for token_level, mode in ((True, 'token-mean'), (False, 'seq-mean-token-mean')):
        registry.add(
            FRAMEWORK, ('--actor.policy_loss_type',) + options + (TOKEN_LEVEL,),
            'openrlhf.models.loss.PolicyLoss.forward', 'agentrl.substrate.grpo.policy_loss',
            f"policy_loss_type='ppo', {label}, token_level_loss={token_level}",
            theirs=lambda c, k=clip, t=token_level: _their_policy(c, k, 'ppo', t),
            mine=lambda c, k=clip, m=mode: _our_policy(c, k, m),
            wrt=('logp',), stand_in=PPO_STAND_IN,
            differs=(Differs(PPO_CLAMP, cases=('far ratios',)),)
            + (() if token_level else (Differs(EMPTY_ROWS, cases=('empty row',)),)))

# gspo: the sequence's mean log-ratio, unclamped, clipped once per sequence, token_level_loss forced to False
for clip, label in (((CLIP_LOW, CLIP_HIGH), 'eps_clip_low_high=(0.2, 0.28)'), ((0.2, 0.2), 'eps_clip=0.2')):
    registry.add(
        FRAMEWORK, ('--actor.policy_loss_type', '--actor.eps_clip_low_high' if clip[0] != clip[1] else
                    '--actor.eps_clip'),
        'openrlhf.models.loss.PolicyLoss.forward', 'agentrl.ch10.framework_plugins.SequenceRatioLoss',
        f"policy_loss_type='gspo', {label}",
        theirs=lambda c, k=clip: _their_policy(c, k, 'gspo'),
        mine=lambda c, k=clip: _our_policy(c, k, 'seq-mean-token-mean', (SequenceRatioLoss(k),)),
        wrt=('logp',), stand_in=PPO_STAND_IN,
        differs=(Differs(EMPTY_ROWS, cases=('empty row',)),))

# ---- sampler correction, with the sampler's log-probs played by ref_logp (data). The lower threshold is 0, where
# neither 'tis' nor 'icepop' can bind (a ratio is > 0): ours has no lower bound.
SAMPLER_HIGH = 5.0
for their_type, latest_mode, our_mode in (('tis', 'clip', 'token_truncate'), ('icepop', 'mask', 'token_mask')):
    def _ours(case, mode=our_mode):
        correction = SamplerCorrection(mode, SAMPLER_HIGH)
        correction.shape_rewards({'sample_logp': case['ref_logp'].detach()}, {})
        correction.begin_minibatch(torch.arange(case['logp'].shape[0]), None, case['logp'], case['old_logp'],
                                   case['mask'])
        return _our_policy(case, (CLIP_LOW, CLIP_HIGH), 'token-mean', (correction,))

    registry.add(
        FRAMEWORK, ('--algo.advantage.is_correction_enable', '--algo.advantage.is_correction_type',
                    '--algo.advantage.is_correction_threshold', '--actor.policy_loss_type'),
        'openrlhf.models.loss.PolicyLoss.forward', 'agentrl.ch10.framework_plugins.SamplerCorrection',
        f"policy_loss_type='ppo', is correction '{their_type}' (0.11.2: level='token', gating='ratio', "
        f"mode='{latest_mode}'), threshold (0, {SAMPLER_HIGH})",
        theirs=lambda c, t=their_type, m=latest_mode: _their_policy(c, (CLIP_LOW, CLIP_HIGH), 'ppo', True, (t, m)),
        mine=_ours, wrt=('logp',), stand_in=PPO_STAND_IN,
        differs=(Differs(PPO_CLAMP, cases=('far ratios',)),))

# gspo with the correction on: the sequence ratio is taken against the sampler's log-probs instead of old_logp
registry.add(
    FRAMEWORK, ('--algo.advantage.is_correction_enable', '--actor.policy_loss_type'),
    'openrlhf.models.loss.PolicyLoss.forward', 'agentrl.ch10.framework_plugins.SequenceRatioLoss',
    "policy_loss_type='gspo', is correction on: the sequence ratio against the sampler (ref_logp plays it)",
    theirs=lambda c: _their_policy(c, (CLIP_LOW, CLIP_HIGH), 'gspo', True, ('tis', 'clip')),
    mine=lambda c: policy_loss(c['logp'], c['ref_logp'].detach(), c['advantages'], c['mask'],
                               RLConfig(clip_low=CLIP_LOW, clip_high=CLIP_HIGH, loss_agg='seq-mean-token-mean'),
                               (SequenceRatioLoss((CLIP_LOW, CLIP_HIGH)),))[0],
    wrt=('logp',), stand_in=PPO_STAND_IN,
    differs=(Differs(EMPTY_ROWS, cases=('empty row',)),))

# ---- the adaptive KL controller: one update from several measured KLs


KLS = (0.0, 0.05, 0.1, 0.15, 0.5, 2.0)


def _their_controller(case):
    controllers = _load('trainer.ppo_utils.kl_controller')
    betas = []
    for kl in KLS:
        controller = controllers.AdaptiveKLController(init_kl_coef=0.2, target=0.1, horizon=10000)
        controller.update(current=kl, n_steps=1000)  # n_steps / horizon = 1/10, our controller's fixed step
        betas.append(controller.value)
    return torch.tensor(betas, dtype=torch.float64)


def _their_fixed(case):
    controller = _load('trainer.ppo_utils.kl_controller').FixedKLController(kl_coef=0.2)
    values = []
    for kl in KLS:
        controller.update(current=kl, n_steps=1000)
        values.append(controller.value)
    return torch.tensor(values, dtype=torch.float64)


registry.add(
    FRAMEWORK, ('--algo.kl.target', '--algo.kl.horizon'),
    'openrlhf.trainer.ppo_utils.kl_controller.AdaptiveKLController.update', 'agentrl.ch10.regularizers.adapt_kl_coef',
    'init 0.2, target 0.1, n_steps / horizon = 0.1',
    theirs=_their_controller,
    mine=lambda c: torch.tensor([adapt_kl_coef(0.2, kl, 0.1) for kl in KLS], dtype=torch.float64),
    value_only=True, cases=('ragged',), stand_in=STAND_IN)
registry.add(
    FRAMEWORK, ('--algo.kl.init_coef',),
    'openrlhf.trainer.ppo_utils.kl_controller.FixedKLController.update', 'agentrl.ch10.regularizers.KLInReward',
    'kl_coef 0.2, no target: the coefficient never moves',
    theirs=_their_fixed,
    mine=lambda c: torch.tensor([KLInReward(reference=None, coef=0.2).coef for _ in KLS], dtype=torch.float64),
    value_only=True, cases=('ragged',), stand_in=STAND_IN)

# ---- the rollout temperature: the trainer's log-probs are those of logits / T (log_probs_from_logits divides the
# logits in place, so it is handed a copy, as the actor hands it its fresh forward output). Without flash_attn it
# takes its own logsumexp path, the one a CPU run executes.
TEMPERATURE = 1.3


def _token_ids(case):
    rows, width, vocabulary = case['logits'].shape
    return (torch.arange(rows)[:, None] * 7 + torch.arange(width)[None, :] * 3) % vocabulary  # fixed chosen tokens


registry.add(
    FRAMEWORK, ('--rollout.temperature',),
    'openrlhf.models.utils.log_probs_from_logits', 'agentrl.core.logprobs.selected_log_probs',
    f'temperature={TEMPERATURE}',
    theirs=lambda c: _utils().log_probs_from_logits(c['logits'].clone(), _token_ids(c), temperature=TEMPERATURE),
    mine=lambda c: selected_log_probs(c['logits'] / TEMPERATURE, _token_ids(c)),
    wrt=('logits',), stand_in=STAND_IN + '; flash_attn absent, so the function takes its torch logsumexp path')

# ---- not covered here, though the map names a function of ours:
# --algo.advantage.estimator (ours: compute_advantages / group_advantages). group_norm's (R - mean) / (std + 1e-9)
#   is written inline in RemoteExperienceMaker.compute_advantages_and_returns, a method that also needs Experience
#   objects, the strategy's nested args and the length penalties; its module, experience_maker.py, imports ray and
#   openrlhf.trainer.ray.launcher, which imports openrlhf.models.Actor (flash_attn, CUDA only) and
#   openrlhf.utils.deepspeed. Reaching the six lines of arithmetic would take stubbing a module that is not an
#   __init__, so it is left out rather than imitated.
# --algo.advantage.is_correction_type 'seq-mask-tis': masks on the sequence's geometric-mean ratio inside [low, high]
#   and keeps each token's raw weight; our sequence modes use the product of the token weights and give it to every
#   token, so no composition of ours computes it ('tis' and 'icepop' are checked above, with low = 0).
# --algo.advantage.is_correction_threshold's low value: ours has no lower bound on the sampler weight, so the checks
#   above set it to 0, where it cannot bind; a low of 0.5 (the default) is not ours.
# --algo.kl.use_loss under gspo: the policy term is a sequence mean while the KL stays a token mean; each term is
#   checked above on its own (aggregate_loss with token_level_loss True and False), their sum is the trainer's.
