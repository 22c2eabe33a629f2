"""verl's functions (verl/trainer/ppo/core_algos.py, verl/utils/torch_functional.py, verl/workers/utils/losses.py)
against ours; its covariance losses and rollout correction are in verl_correction.py, which uses the helpers here
(core, actor_config, our_config, dual_clip_binds)."""
import math

import torch

from agentrl.ch10.framework_options import group_advantages
from agentrl.ch10.framework_plugins import SequenceRatioLoss
from agentrl.ch10.regularizers import adapt_kl_coef
from agentrl.core.aggregation import aggregate
from agentrl.core.kl import kl_estimate
from agentrl.core.logprobs import entropy_from_logits
from agentrl.substrate.grpo import ReferenceKL, RLConfig, policy_loss
from machinery.differential.cases import GROUP_SIZE
from machinery.differential.compare import Differs, Registry

FRAMEWORK = 'verl'
registry = Registry()
CLIP_LOW, CLIP_HIGH = 0.2, 0.28  # clip-higher, so that a swapped pair of bounds shows


def core():
    from verl.trainer.ppo import core_algos
    return core_algos


def actor_config(loss_agg_mode, actor=None, **policy_loss):
    # a configuration object only: verl's policy losses read their clip bounds, aggregation and (policy_loss: the
    # fields of PolicyLossConfig, e.g. kl_cov_ratio) their own settings from it; actor: further fields of the actor's
    # own config (use_kl_loss, kl_loss_coef, kl_loss_type for ppo_loss)
    from verl.workers.config import FSDPActorConfig, PolicyLossConfig
    return FSDPActorConfig(strategy='fsdp', rollout_n=GROUP_SIZE, ppo_mini_batch_size=GROUP_SIZE,
                           ppo_micro_batch_size_per_gpu=1, clip_ratio=CLIP_LOW, clip_ratio_low=CLIP_LOW,
                           clip_ratio_high=CLIP_HIGH, loss_agg_mode=loss_agg_mode,
                           policy_loss=PolicyLossConfig(**policy_loss), **(actor or {}))


def our_config(mode, case):
    horizon = case['mask'].shape[1] if mode == 'seq-mean-token-sum-norm' else None
    return RLConfig(clip_low=CLIP_LOW, clip_high=CLIP_HIGH, loss_agg=mode, loss_agg_horizon=horizon)


EMPTY_ROWS = ("for a row with no policy tokens verl divides the sequence mean by the rows that have some, ours by "
              "every row")

# ---- KL estimators: kl_penalty(logprob, ref_logprob, kind), straight-through '+' kinds included
K3_CLAMP = ("verl clamps k3's log-ratio to [-20, 20] and k3 itself to [-10, 10]; ours is unclamped, so the two part "
            "once ref_logp - logp leaves about [-11, 2.6]")
for their_kind, our_kind in (('k1', 'k1'), ('kl', 'k1'), ('k2', 'k2'), ('mse', 'k2'), ('k3', 'k3'),
                             ('low_var_kl', 'k3'), ('k1+', 'k1+'), ('k3+', 'k3+')):
    registry.add(
        FRAMEWORK, ('actor_rollout_ref.actor.kl_loss_type', 'algorithm.kl_penalty'),
        'verl.trainer.ppo.core_algos.kl_penalty', 'agentrl.core.kl.kl_estimate', f"kind='{their_kind}'",
        theirs=lambda c, k=their_kind: core().kl_penalty(c['logp'], c['ref_logp'], k),
        mine=lambda c, k=our_kind: kl_estimate(c['logp'], c['ref_logp'], k),
        wrt=('logp', 'ref_logp'),
        differs=(Differs(K3_CLAMP, cases=('far ratios',)),) if our_kind.startswith('k3') else ())

# ---- loss aggregation: agg_loss(loss_mat, loss_mask, loss_agg_mode)
for mode in ('token-mean', 'seq-mean-token-mean', 'seq-mean-token-sum', 'seq-mean-token-sum-norm'):
    registry.add(
        FRAMEWORK, ('actor_rollout_ref.actor.loss_agg_mode', 'actor_rollout_ref.actor.loss_scale_factor'),
        'verl.trainer.ppo.core_algos.agg_loss', 'agentrl.core.aggregation.aggregate', f"loss_agg_mode='{mode}'",
        theirs=lambda c, m=mode: core().agg_loss(c['logp'] * c['ref_logp'], c['mask'], m),
        mine=lambda c, m=mode: aggregate(c['logp'] * c['ref_logp'], c['mask'], m,
                                         c['mask'].shape[1] if m.endswith('norm') else None),
        wrt=('logp', 'ref_logp'),
        differs=(Differs(EMPTY_ROWS, cases=('empty row',)),) if mode.startswith('seq-mean') else ())

# token-sum arrived after the reference release; ours has no such mode, so it is held against its definition in
# our terms: the seq-mean-token-sum of the batch times the number of rows
registry.add(
    FRAMEWORK, ('actor_rollout_ref.actor.loss_agg_mode',),
    'verl.trainer.ppo.core_algos.agg_loss', 'agentrl.core.aggregation.aggregate', "loss_agg_mode='token-sum'",
    theirs=lambda c: core().agg_loss(c['logp'] * c['ref_logp'], c['mask'], 'token-sum'),
    mine=lambda c: aggregate(c['logp'] * c['ref_logp'], c['mask'], 'seq-mean-token-sum') * c['mask'].shape[0],
    wrt=('logp', 'ref_logp'),
    differs=(Differs("the reference release has no 'token-sum' mode (ValueError)", sets=('reference',)),))

# ---- entropy
registry.add(
    FRAMEWORK, ('actor_rollout_ref.actor.calculate_entropy', 'actor_rollout_ref.actor.entropy_from_logits_with_chunking'),
    'verl.utils.torch_functional.entropy_from_logits', 'agentrl.core.logprobs.entropy_from_logits', '',
    theirs=lambda c: __import__('verl.utils.torch_functional', fromlist=['x']).entropy_from_logits(c['logits']),
    mine=lambda c: entropy_from_logits(c['logits']), wrt=('logits',))
for mode in ('token-mean', 'seq-mean-token-mean'):
    registry.add(
        FRAMEWORK, ('actor_rollout_ref.actor.entropy_coeff',),
        'verl.trainer.ppo.core_algos.compute_entropy_loss', 'agentrl.core.aggregation.aggregate',
        f"loss_agg_mode='{mode}'",
        theirs=lambda c, m=mode: core().compute_entropy_loss(c['logits'], c['mask'], m),
        mine=lambda c, m=mode: aggregate(entropy_from_logits(c['logits']), c['mask'], m),
        wrt=('logits',),
        differs=(Differs(EMPTY_ROWS, cases=('empty row',)),) if mode.startswith('seq-mean') else ())

# ---- the clipped policy loss (loss_mode 'vanilla'), through verl's registry of policy losses
DUAL_CLIP = ("verl's vanilla loss is dual-clip PPO: for A < 0 it caps -A r at -A clip_ratio_c (3), and it clamps the "
             "log-ratio to [-20, 20]; ours has neither, so they part where r > 3 with A < 0, and where A > 0 with a "
             "log-ratio below -20 (the clamp stops that token's gradient)")


def dual_clip_binds(case):
    # a policy token where verl's vanilla loss parts from ours: A < 0 with r > 3 (the dual clip's cap), or A > 0
    # with a log-ratio below -20 (verl's clamp, which stops that token's gradient; ours keeps -A r)
    log_ratio = (case['logp'] - case['old_logp']).detach()
    adv = case['advantages'][:, None]
    binds = ((adv < 0) & (log_ratio > math.log(3.0))) | ((adv > 0) & (log_ratio < -20))
    return (binds & (case['mask'] > 0)).any()


for mode in ('token-mean', 'seq-mean-token-mean'):
    registry.add(
        FRAMEWORK, ('actor_rollout_ref.actor.policy_loss.loss_mode', 'actor_rollout_ref.actor.clip_ratio',
                    'actor_rollout_ref.actor.clip_ratio_low', 'actor_rollout_ref.actor.clip_ratio_high'),
        "verl.trainer.ppo.core_algos.get_policy_loss_fn('vanilla')", 'agentrl.substrate.grpo.policy_loss',
        f"loss_agg_mode='{mode}', clip 0.2/0.28",
        theirs=lambda c, m=mode: core().get_policy_loss_fn('vanilla')(
            c['old_logp'], c['logp'], c['advantages'][:, None].expand_as(c['logp']), c['mask'], m,
            actor_config(m))[0],
        mine=lambda c, m=mode: policy_loss(c['logp'], c['old_logp'], c['advantages'], c['mask'],
                                           our_config(m, c))[0],
        wrt=('logp',),  # old_logp is data: the trainer never differentiates it
        stand_in='FSDPActorConfig: the clip bounds and the aggregation mode, no model',
        differs=((Differs(DUAL_CLIP, when=dual_clip_binds),)
                 + ((Differs(EMPTY_ROWS, cases=('empty row',)),) if mode.startswith('seq-mean') else ())))

# ---- the actor's whole loss with the KL term: verl/workers/utils/losses.py: ppo_loss (the engine's loss function in
# 0.8.0 and 0.9.1), which adds kl_loss_coef * agg_loss(kl_penalty(logp, ref_logp, kl_loss_type)) to the policy loss.
# It is handed what ray_trainer._update_actor and the FSDP engine hand it (see _engine_inputs); ours is policy_loss
# plus ReferenceKL's extend_loss, as the trainer's plug-in loop adds it.
KL_LOSS_COEF = 0.1
KL_LOSS_STAND_IN = ("FSDPActorConfig (clip bounds, aggregation, use_kl_loss, kl_loss_coef, kl_loss_type, no model); "
                    "the case laid out as the engine hands it over: the log-probs as a jagged model output over a "
                    "one-token prompt and the response, the batch fields as a TensorDict with the counts "
                    "forward_backward_batch and _update_actor assign (one rank, one micro-batch)")
K3_LOSS_CLAMP = ("verl's low_var_kl clamps the log-ratio to [-20, 20] and the estimate to [-10, 10]; ours (kl_penalty "
                 "'k3') does neither, so the loss parts where a policy token's k3 passes 10, and that token's "
                 "gradient stops in verl")


def _k3_clamp_binds(case):
    # a policy token whose k3 = e^d - d - 1, d = ref_logp - logp, is past verl's cap of 10 (|d| > 20 is past it too)
    d = (case['ref_logp'] - case['logp']).detach()
    return ((torch.exp(d) - d - 1 > 10) & (case['mask'] > 0)).any()


def _engine_inputs(case):
    """The case as verl's actor receives it: the model output and the TensorDict batch ppo_loss reads.

    Row i is a one-token prompt and a response of the row's policy tokens (mask is a prefix), padded on the right to
    the case's width. The model output holds one log-probability per position of the unpadded sequences, each
    predicting the next token: the response's log-probs at the prompt's position and after, then a last position
    predicting nothing, which no_padding_2_padding drops (a 0 stands there). The counts are what the engine assigns:
    batch_num_tokens = the mini-batch's policy tokens (forward_backward_batch), dp_size = 1, global_batch_size = the
    mini-batch's rows, ppo_mini_batch_size * rollout.n (ray_trainer._update_actor), rows without policy tokens too."""
    from tensordict import TensorDict
    from verl.utils import tensordict_utils
    mask = case['mask']
    rows, width = mask.shape
    lengths = [int(n) for n in mask.sum(-1)]
    pieces, offsets = [], [0]
    for i, length in enumerate(lengths):
        pieces += [case['logp'][i, :length], torch.zeros(1, dtype=case['logp'].dtype)]
        offsets.append(offsets[-1] + length + 1)
    log_probs = torch.nested.nested_tensor_from_jagged(torch.cat(pieces), offsets=torch.tensor(offsets))
    batch = TensorDict(dict(
        prompts=torch.zeros(rows, 1, dtype=torch.long), responses=torch.zeros(rows, width, dtype=torch.long),
        attention_mask=torch.cat([torch.ones(rows, 1), mask], 1).long(), response_mask=mask.long(),
        old_log_probs=case['old_logp'].detach(), ref_log_prob=case['ref_logp'].detach(),
        advantages=case['advantages'][:, None].expand(rows, width).detach()), batch_size=[rows])
    tensordict_utils.assign_non_tensor(batch, dp_size=1, batch_num_tokens=int(mask.sum()), global_batch_size=rows)
    return {'log_probs': log_probs}, batch


def _their_ppo_loss(case, mode, kind):
    from verl.workers.utils.losses import ppo_loss
    config = actor_config(mode, actor=dict(use_kl_loss=True, kl_loss_coef=KL_LOSS_COEF, kl_loss_type=kind))
    return ppo_loss(config, *_engine_inputs(case))[0]


def _our_ppo_loss(case, mode, kind):
    cfg = our_config(mode, case)
    loss = policy_loss(case['logp'], case['old_logp'], case['advantages'], case['mask'], cfg)[0]
    term = ReferenceKL(reference=None, coef=KL_LOSS_COEF, kind=kind)
    term.ref_logp, term.cfg = case['ref_logp'], cfg  # the reference's log-probs, as prepare() would set them
    return term.extend_loss(loss, torch.arange(case['logp'].shape[0]), None, case['logp'], case['mask'], {})


# No empty-row divisor here: ppo_loss passes the engine's global_batch_size to agg_loss (both terms), and that counts
# every row of the mini-batch, so verl's seq-mean divides by all rows, as ours does.
for mode, their_kind, our_kind in (('token-mean', 'low_var_kl', 'k3'), ('seq-mean-token-mean', 'low_var_kl', 'k3'),
                                   ('token-mean', 'k1', 'k1'), ('token-mean', 'k2', 'k2')):
    registry.add(
        FRAMEWORK, ('actor_rollout_ref.actor.use_kl_loss', 'actor_rollout_ref.actor.kl_loss_coef',
                    'actor_rollout_ref.actor.kl_loss_type'),
        'verl.workers.utils.losses.ppo_loss', 'agentrl.substrate.grpo.ReferenceKL',
        f"use_kl_loss=True, kl_loss_coef={KL_LOSS_COEF}, kl_loss_type='{their_kind}', loss_agg_mode='{mode}', "
        "clip 0.2/0.28",
        theirs=lambda c, m=mode, k=their_kind: _their_ppo_loss(c, m, k),
        mine=lambda c, m=mode, k=our_kind: _our_ppo_loss(c, m, k),
        wrt=('logp',),  # old_logp and ref_logp are data: the trainer differentiates neither
        stand_in=KL_LOSS_STAND_IN,
        differs=((Differs(DUAL_CLIP, when=dual_clip_binds),)
                 + ((Differs(K3_LOSS_CLAMP, when=_k3_clamp_binds),) if our_kind == 'k3' else ())))

# ---- GSPO: one ratio per sequence
GSPO_AGG = ("verl 0.9 aggregates GSPO's token losses by loss_agg_mode; under token-mean a long sequence weighs more "
            "than a short one, where GSPO (and ours) average over sequences")
GSPO_CLAMP = "verl clamps the sequence log-ratio at 10 before the exponential; ours does not"
for mode in ('seq-mean-token-mean', 'token-mean'):
    registry.add(
        FRAMEWORK, ('actor_rollout_ref.actor.policy_loss.loss_mode',),
        "verl.trainer.ppo.core_algos.get_policy_loss_fn('gspo')", 'agentrl.ch10.framework_plugins.SequenceRatioLoss',
        f"loss_agg_mode='{mode}', clip 0.2/0.28",
        theirs=lambda c, m=mode: core().get_policy_loss_fn('gspo')(
            c['old_logp'], c['logp'], c['advantages'][:, None].expand_as(c['logp']), c['mask'], m,
            actor_config(m))[0],
        mine=lambda c: policy_loss(c['logp'], c['old_logp'], c['advantages'], c['mask'],
                                   our_config('seq-mean-token-mean', c),
                                   plugins=(SequenceRatioLoss((CLIP_LOW, CLIP_HIGH)),))[0],
        wrt=('logp',),  # old_logp is data: the trainer never differentiates it
        stand_in='FSDPActorConfig: the clip bounds and the aggregation mode, no model',
        differs=((Differs(EMPTY_ROWS, cases=('empty row',)), Differs(GSPO_CLAMP, cases=('far ratios',)))
                 + ((Differs(GSPO_AGG, cases=('ragged', 'empty row', 'long', 'far ratios'), sets=('latest',)),)
                    if mode == 'token-mean' else ())))

# ---- the adaptive in-reward KL controller: one update from several measured KLs
KLS = (0.0, 0.05, 0.1, 0.15, 0.5, 2.0)


def _their_controller(case):
    betas = []
    for kl in KLS:
        controller = core().AdaptiveKLController(init_kl_coef=0.2, target_kl=0.1, horizon=10000)
        controller.update(current_kl=kl, n_steps=1000)  # n_steps / horizon = 1/10, our controller's fixed step
        betas.append(controller.value)
    return torch.tensor(betas, dtype=torch.float64)


registry.add(
    FRAMEWORK, ('algorithm.kl_ctrl.type', 'algorithm.kl_ctrl.target_kl', 'algorithm.kl_ctrl.horizon'),
    'verl.trainer.ppo.core_algos.AdaptiveKLController.update', 'agentrl.ch10.regularizers.adapt_kl_coef',
    'init 0.2, target 0.1, n_steps / horizon = 0.1',
    theirs=_their_controller,
    mine=lambda c: torch.tensor([adapt_kl_coef(0.2, kl, 0.1) for kl in KLS], dtype=torch.float64),
    value_only=True, cases=('ragged',))

# ---- GRPO's outcome advantage, with and without the division by the group's std
for by_std in (True, False):
    registry.add(
        FRAMEWORK, ('algorithm.adv_estimator', 'algorithm.norm_adv_by_std_in_grpo'),
        'verl.trainer.ppo.core_algos.compute_grpo_outcome_advantage',
        'agentrl.ch10.framework_options.group_advantages', f'norm_adv_by_std_in_grpo={by_std}',
        theirs=lambda c, s=by_std: _their_advantages(c, s),
        mine=lambda c, s=by_std: group_advantages(c['rewards'], GROUP_SIZE, 'group' if s else 'none'),
        value_only=True, cases=('ragged', 'single token', 'long'))


def _their_advantages(case, by_std):
    import numpy as np
    rows, width = case['mask'].shape
    scores = torch.zeros(rows, width, dtype=torch.float64)
    last = (case['mask'].sum(-1).long() - 1).clamp(min=0)
    scores[torch.arange(rows), last] = case['rewards']  # the outcome reward on each row's last token
    index = np.array([i // GROUP_SIZE for i in range(rows)])
    advantages, _ = core().compute_grpo_outcome_advantage(scores, case['mask'], index, epsilon=1e-6,
                                                           norm_adv_by_std_in_grpo=by_std)
    return advantages[:, 0]
