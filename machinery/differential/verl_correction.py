"""verl's covariance losses (Clip-Cov, KL-Cov) and its rollout correction (bypass mode's loss, the truncated
importance weights of verl/trainer/ppo/rollout_corr_helper.py) against ours; the checks of verl.py's other options
live there, with the helpers both use."""
import warnings

import torch

from agentrl.ch10.regularizers import CovariancePolicyLoss, centered_cross_product
from agentrl.core.off_policy import sampler_weights
from agentrl.substrate.grpo import clipped_sides, policy_loss
from machinery.differential.compare import Differs, Registry
from machinery.differential.verl import DUAL_CLIP, FRAMEWORK, actor_config, core, dual_clip_binds, our_config

registry = Registry()


# ---- Cui et al.'s covariance losses (loss_mode 'kl_cov', 'clip_cov'), through verl's registry of policy losses
def _our_cov_loss(case, **plugin_args):
    cfg = our_config('token-mean', case)
    plugin = CovariancePolicyLoss(**plugin_args)
    plugin.begin(None, cfg)  # begin keeps cfg only (the clip range, and the seed of Clip-Cov's draw); no model
    with warnings.catch_warnings():  # a minibatch where no token is treated warns; the value says so already
        warnings.simplefilter('ignore')
        return policy_loss(case['logp'], case['old_logp'], case['advantages'], case['mask'], cfg,
                           plugins=(plugin,))[0]


def _their_policy_loss(case, loss_mode, **policy_loss_settings):
    return core().get_policy_loss_fn(loss_mode)(
        case['old_logp'], case['logp'], case['advantages'][:, None].expand_as(case['logp']), case['mask'],
        'token-mean', actor_config('token-mean', loss_mode=loss_mode, **policy_loss_settings))[0]


# KL-Cov: the top max(1, int(N * kl_cov_ratio)) of the N policy tokens by covariance (torch.topk, deterministic) get
# ppo_kl_coef |log pi - log pi_old| added. Both count alike: verl max(1, int(len(cov) * kl_cov_ratio)), ours
# treated_count = max(int(fraction * N), 1), the same float product. The second setting is verl's defaults, where
# every case here has N < 5000 and so exactly one token is penalised.
for ratio, coef in ((0.1, 0.5), (0.0002, 0.1)):
    registry.add(
        FRAMEWORK, ('actor_rollout_ref.actor.policy_loss.loss_mode', 'actor_rollout_ref.actor.policy_loss.kl_cov_ratio',
                    'actor_rollout_ref.actor.policy_loss.ppo_kl_coef'),
        "verl.trainer.ppo.core_algos.get_policy_loss_fn('kl_cov')", 'agentrl.ch10.regularizers.CovariancePolicyLoss',
        f"kl_cov_ratio={ratio}, ppo_kl_coef={coef}, loss_agg_mode='token-mean'",
        theirs=lambda c, r=ratio, k=coef: _their_policy_loss(c, 'kl_cov', kl_cov_ratio=r, ppo_kl_coef=k),
        mine=lambda c, r=ratio, k=coef: _our_cov_loss(c, variant='kl_cov', fraction=r, kl_coef=k),
        wrt=('logp',),  # old_logp is data: the trainer never differentiates it
        stand_in='FSDPActorConfig with a PolicyLossConfig: the ratio and the coefficient, no model')

# Clip-Cov: verl draws the tokens to remove with torch.randperm on torch's global generator, ours with a generator
# of its own. clip_cov_ratio = 1 forces the draw: it asks for max(1, int(1.0 * N)) = N tokens, at least as many as
# there are candidates (policy tokens not clipped by PPO, with covariance strictly inside (lb, ub)), so verl keeps
# perm[:min(clip_num, candidates)] = every candidate, ours min(treated_count, candidates) = every candidate, and
# neither permutation decides anything. The bounds (0, 1) leave tokens out on both sides of them in these cases.
CLIP_COV = dict(clip_cov_ratio=1.0, clip_cov_lb=0.0, clip_cov_ub=1.0)
CLIP_COV_SETTING = "clip_cov_ratio=1.0 (every candidate removed), clip_cov_lb=0.0, clip_cov_ub=1.0, " \
                   "loss_agg_mode='token-mean', clip 0.2/0.28"
CLIP_COV_ZERO = ("verl multiplies the loss of the tokens it removes by 0, so their value leaves the loss (the "
                 "token-mean still counts them in its divisor); ours detaches them, so their value stays and only "
                 "their gradient goes: the values part wherever a token is removed, the gradients agree")


def _our_clip_cov(case):
    return _our_cov_loss(case, variant='clip_cov', fraction=CLIP_COV['clip_cov_ratio'],
                         bounds=(CLIP_COV['clip_cov_lb'], CLIP_COV['clip_cov_ub']))


def _gradient_only(loss):
    return loss - loss.detach()  # value 0, the loss's gradient: applied alike to both sides


CLIP_COV_OPTIONS = ('actor_rollout_ref.actor.policy_loss.loss_mode',
                    'actor_rollout_ref.actor.policy_loss.clip_cov_ratio',
                    'actor_rollout_ref.actor.policy_loss.clip_cov_lb')


def _clip_cov_removes_a_token(case):
    # some policy token is a candidate: not silenced by PPO's clip, its covariance strictly inside (lb, ub)
    cfg = our_config('token-mean', case)
    logp, mask = case['logp'].detach(), case['mask']
    cov = centered_cross_product(logp, case['advantages'], mask)
    silenced = torch.logical_or(*clipped_sides(torch.exp(logp - case['old_logp'].detach()), case['advantages'], cfg))
    return ((mask > 0) & ~silenced & (cov > CLIP_COV['clip_cov_lb']) & (cov < CLIP_COV['clip_cov_ub'])).any()


# The loss itself, where a token is removed. Not on 'far ratios': ratios up to e^30 dwarf the removed tokens'
# values, which then fall inside the tolerance on some seeds. The gradient-only check below runs on every case.
registry.add(
    FRAMEWORK, CLIP_COV_OPTIONS,
    "verl.trainer.ppo.core_algos.get_policy_loss_fn('clip_cov')", 'agentrl.ch10.regularizers.CovariancePolicyLoss',
    CLIP_COV_SETTING,
    theirs=lambda c: _their_policy_loss(c, 'clip_cov', **CLIP_COV), mine=_our_clip_cov,
    wrt=('logp',),  # old_logp is data: the trainer never differentiates it
    stand_in='FSDPActorConfig with a PolicyLossConfig: the clip bounds, the ratio and the covariance bounds, no model',
    cases=('ragged', 'empty row', 'single token', 'long'),
    differs=(Differs(CLIP_COV_ZERO, when=_clip_cov_removes_a_token),))
registry.add(
    FRAMEWORK, CLIP_COV_OPTIONS,
    "verl.trainer.ppo.core_algos.get_policy_loss_fn('clip_cov')", 'agentrl.ch10.regularizers.CovariancePolicyLoss',
    CLIP_COV_SETTING + ', gradient only (both sides return loss - sg(loss))',
    theirs=lambda c: _gradient_only(_their_policy_loss(c, 'clip_cov', **CLIP_COV)),
    mine=lambda c: _gradient_only(_our_clip_cov(c)),
    wrt=('logp',),
    stand_in='FSDPActorConfig with a PolicyLossConfig: the clip bounds, the ratio and the covariance bounds, no model')


# ---- rollout correction, bypass mode: old_log_prob is the sampler's log-probs; loss_type 'ppo_clip' hands them to
# the vanilla loss and computes the IS weights for its metrics only, never applying them
for rollout_is in (None, 'token'):
    registry.add(
        FRAMEWORK, ('algorithm.rollout_correction.loss_type',),
        "verl.trainer.ppo.core_algos.get_policy_loss_fn('bypass_mode')", 'agentrl.substrate.grpo.policy_loss',
        f"loss_type='ppo_clip', rollout_is={rollout_is!r}, loss_agg_mode='token-mean', clip 0.2/0.28",
        theirs=lambda c, w=rollout_is: _their_bypass(c, w),
        # the case's old_logp stands for the sampler's log-probs on both sides
        mine=lambda c: policy_loss(c['logp'], c['old_logp'], c['advantages'], c['mask'],
                                   our_config('token-mean', c))[0],
        wrt=('logp',),
        stand_in='FSDPActorConfig with a PolicyLossConfig holding a RolloutCorrectionConfig, no model',
        differs=(Differs(DUAL_CLIP, when=dual_clip_binds),))


def _their_bypass(case, rollout_is):
    from verl.trainer.config import RolloutCorrectionConfig
    correction = RolloutCorrectionConfig(rollout_is=rollout_is, rollout_is_threshold=2.0, bypass_mode=True,
                                         loss_type='ppo_clip')
    return _their_policy_loss(case, 'bypass_mode', rollout_correction=correction)


# ---- rollout correction, decoupled mode: truncated importance weights pi_old / pi_sampler, constants of the loss.
# compute_rollout_correction_and_rejection_mask forms the log-ratio and calls compute_rollout_correction_weights.
# The case's ref_logp stands for the sampler's log-probs.
IS_CLAMP = ("verl clamps the log-ratio (token level) or the row's summed log-ratio (sequence level) to [-20, 20] "
            "before the exponential; ours does not. Above, the truncation at 2 hides it; below, where "
            "log pi_old - log pi_sampler < -20, verl's weight is e^-20 (about 2.1e-9) and ours the smaller e^d")


def _is_clamp_binds(level):
    # a policy token (token level) or a row (sequence level) whose log pi_old - log pi_sampler is below -20
    def binds(case):
        log_ratio = torch.where(case['mask'] > 0, case['old_logp'] - case['ref_logp'], 0.0).detach()
        return (log_ratio < -20).any() if level == 'token' else (log_ratio.sum(-1) < -20).any()
    return binds


for level in ('token', 'sequence'):
    registry.add(
        FRAMEWORK, ('algorithm.rollout_correction.rollout_is', 'algorithm.rollout_correction.rollout_is_threshold'),
        'verl.trainer.ppo.rollout_corr_helper.compute_rollout_correction_and_rejection_mask',
        'agentrl.core.off_policy.sampler_weights', f"rollout_is='{level}', rollout_is_threshold=2.0",
        theirs=lambda c, lv=level: _their_is_weights(c, lv),
        mine=lambda c, lv=level: sampler_weights(c['old_logp'], c['ref_logp'].detach(), c['mask'],
                                                 f'{lv}_truncate', 2.0),
        value_only=True,  # both are constants: the weights multiply the loss detached
        differs=(Differs(IS_CLAMP, when=_is_clamp_binds(level)),))


def _their_is_weights(case, level):
    from verl.trainer.ppo.rollout_corr_helper import compute_rollout_correction_and_rejection_mask
    weights, _, _ = compute_rollout_correction_and_rejection_mask(
        old_log_prob=case['old_logp'], rollout_log_prob=case['ref_logp'].detach(), response_mask=case['mask'],
        rollout_is=level, rollout_is_threshold=2.0)
    return weights.batch['rollout_is_weights']
