"""TRL's functions (trl/trainer/grpo_trainer.py, rloo_trainer.py, utils.py) against ours.

GRPOTrainer._compute_loss and RLOOTrainer._compute_loss are methods of a trainer that owns a model. Each check builds
the trainer with object.__new__, sets only the attributes the loss reads, and replaces one method: the forward,
_get_per_token_logps_and_entropies, which hands back the case's log-probs (and the entropies of the case's logits,
through TRL's own entropy_from_logits). Everything after the forward is TRL's code. Ours is the minibatch body of
agentrl.substrate.grpo.rl_update: each plug-in's begin_minibatch, policy_loss, each plug-in's extend_loss.
The checks of the trainers' scoring (GRPOTrainer._generate_and_score_completions, RLOOTrainer's, and RLOO's loss)
are in trl_scoring.py, which uses the stand-ins here (OneProcess, forward, inputs_of, sampler_logp_of).
"""
import math
from collections import defaultdict
from types import SimpleNamespace

import torch

from agentrl.ch10.framework_plugins import (CappedWeightLoss, EntropyTarget, SamplerCorrection, SequenceRatioLoss,
                                            TopEntropyUpdate)
from agentrl.ch10.regularizers import EntropyBonus
from agentrl.core.entropy_control import adapt_entropy_coef, top_entropy_mask
from agentrl.core.logprobs import entropy_from_logits, masked_mean
from agentrl.substrate.grpo import ReferenceKL, RLConfig, policy_loss
from machinery.differential.cases import float32_quantile_moves
from machinery.differential.compare import Differs, Registry

FRAMEWORK = 'TRL'
registry = Registry()
CLIP_LOW, CLIP_HIGH = 0.2, 0.28  # clip-higher, so that a swapped pair of bounds shows
BETA = 0.04  # TRL's KL coefficient, > 0 so that its k3 term is in every loss below unless said otherwise
HORIZON = 640  # max_completion_length: Dr. GRPO's constant, longer than the longest case (512)
CISPO_CAP = 5.0  # epsilon_high for cispo, the value TRL's docstring recommends
ENTROPY_COEF = 0.01
# TRL's loss types and the aggregation of ours that each one is (one micro-batch, one process, no accumulation)
AGGREGATION = {'grpo': 'seq-mean-token-mean', 'bnpo': 'token-mean', 'dr_grpo': 'seq-mean-token-sum-norm',
               'dapo': 'token-mean', 'cispo': 'token-mean', 'luspo': 'seq-mean-token-sum'}
KL_OPTIONS = ('GRPOConfig.beta', 'GRPOTrainer KL estimator (fixed, no config option)')
CLIP_OPTIONS = ('GRPOConfig.epsilon', 'GRPOConfig.epsilon_high')
STAND_IN = ('a trainer made with object.__new__ holding only the loss settings, one process (an accelerator whose '
            'gather, reduce and pad return their input), gradient accumulation 1, model.training True; the forward '
            "returns the case's logp and TRL's entropy_from_logits of the case's logits")


# ---- their side: a GRPOTrainer with no model

class OneProcess:
    """The accelerator of a single process: every collective returns what it is given."""
    num_processes = 1
    sync_gradients = True  # each call ends an optimizer step: the adaptive entropy controller updates

    def gather(self, tensor):
        return tensor

    gather_for_metrics = gather

    def reduce(self, tensor, reduction='sum'):
        return tensor

    def pad_across_processes(self, tensor, dim=0, pad_index=0):
        return tensor


def _trl_entropy(logits):
    from trl.trainer.utils import entropy_from_logits as theirs
    return theirs(logits)


def forward(trainer, case):
    """The stand-in for the model's forward: the case's log-probs and, as TRL's forward does, entropies that carry a
    gradient only when an entropy bonus is on."""
    def forward(model, input_ids, attention_mask, logits_to_keep, compute_entropy=False, compute_aux_loss=False,
                **unused):
        entropies = None
        if compute_entropy:
            with torch.set_grad_enabled(trainer._entropy_bonus_enabled):
                entropies = _trl_entropy(case['logits'])
        return case['logp'], entropies, None
    return forward


def _grpo_trainer(loss_type='grpo', beta=BETA, level='token', epsilon_high=CLIP_HIGH, keep=1.0, entropy_coef=0.0,
                  adaptive=False, bias_correction=False, use_vllm=False, last_entropy=math.inf, target=0.2):
    from trl.trainer.grpo_trainer import GRPOTrainer
    trainer = object.__new__(GRPOTrainer)
    trainer.args = SimpleNamespace(
        use_bias_correction_kl=bias_correction, delta=None, steps_per_generation=1, entropy_target=target,
        entropy_coef_delta=0.005, entropy_coef_min=0.0, entropy_coef_max=1.0)
    trainer.__dict__.update(
        loss_type=loss_type, beta=beta, epsilon_low=CLIP_LOW, epsilon_high=epsilon_high,
        importance_sampling_level=level, top_entropy_quantile=keep, off_policy_mask_threshold=None,
        use_vllm=use_vllm, vllm_importance_sampling_correction=use_vllm, max_completion_length=HORIZON,
        current_gradient_accumulation_steps=1, aux_loss_enabled=False, entropy_coef=entropy_coef,
        use_adaptive_entropy=adaptive, _entropy_bonus_enabled=bool(entropy_coef) or adaptive,
        _last_world_entropy=last_entropy, _entropy_window_stats=None, model=SimpleNamespace(training=True),
        accelerator=OneProcess(), _metrics={'train': defaultdict(list), 'eval': defaultdict(list)})
    return trainer


def inputs_of(case, sampler_logp=None):
    rows, width = case['mask'].shape
    inputs = dict(prompt_ids=torch.zeros(rows, 2, dtype=torch.long), prompt_mask=torch.ones(rows, 2),
                  completion_ids=torch.zeros(rows, width, dtype=torch.long), completion_mask=case['mask'],
                  advantages=case['advantages'], old_per_token_logps=case['old_logp'],
                  ref_per_token_logps=case['ref_logp'], num_items_in_batch=case['mask'].sum())
    if sampler_logp is not None:  # the vLLM weight pi_old / pi_sampler, which TRL receives as data
        inputs['importance_sampling_ratio'] = torch.exp(case['old_logp'] - sampler_logp).detach()
    return inputs


def _their_loss(case, sampler_logp=None, **settings):
    trainer = _grpo_trainer(**settings)
    trainer._get_per_token_logps_and_entropies = forward(trainer, case)
    return trainer._compute_loss(None, inputs_of(case, sampler_logp))


# ---- our side: one minibatch of rl_update

def _config(mode):
    return RLConfig(clip_low=CLIP_LOW, clip_high=CLIP_HIGH, loss_agg=mode,
                    loss_agg_horizon=HORIZON if mode == 'seq-mean-token-sum-norm' else None)


def _reference_kl(case, cfg, weighting='none'):
    # prepare() would run a reference model; the case's ref_logp is what it would have stored
    term = ReferenceKL(None, BETA, 'k3', weighting=weighting)
    term.cfg, term.ref_logp = cfg, case['ref_logp']
    return term


def _our_loss(case, mode, plugins=(), beta=BETA, weighting='none', bonus_mode=None, sampler_logp=None):
    """rl_update's minibatch body on the case: begin_minibatch, policy_loss, extend_loss, in the engine's order."""
    cfg = _config(mode)
    plugins = list(plugins)
    for plugin in plugins:
        if isinstance(plugin, EntropyBonus):
            plugin.prepare(None, _config(bonus_mode or mode))
        if isinstance(plugin, SamplerCorrection):
            plugin.shape_rewards({'sample_logp': sampler_logp}, {})
    if beta:
        plugins.append(_reference_kl(case, cfg, weighting))
    rows = torch.arange(case['mask'].shape[0])
    logits, logp, old_logp, mask = case['logits'], case['logp'], case['old_logp'], case['mask']
    for plugin in plugins:
        plugin.begin_minibatch(rows, logits, logp, old_logp, mask)
    loss, stats = policy_loss(logp, old_logp, case['advantages'], mask, cfg, plugins)
    for plugin in plugins:
        loss = plugin.extend_loss(loss, rows, logits, logp, mask, stats)
    return loss


def _loss_check(options, setting, theirs, mine, ours='agentrl.substrate.grpo.policy_loss', wrt=('logp', 'ref_logp'),
                differs=()):
    registry.add(FRAMEWORK, options, 'trl.trainer.grpo_trainer.GRPOTrainer._compute_loss', ours, setting,
                 theirs=theirs, mine=mine, wrt=wrt, differs=differs, stand_in=STAND_IN)


# ---- entropy of the logits
registry.add(
    FRAMEWORK, ('GRPOConfig.entropy_coef',), 'trl.trainer.utils.entropy_from_logits',
    'agentrl.core.logprobs.entropy_from_logits', '',
    theirs=lambda c: _trl_entropy(c['logits']), mine=lambda c: entropy_from_logits(c['logits']), wrt=('logits',))

# ---- the PPO-clip loss types with TRL's k3 term: each one an aggregation of ours
for loss_type in ('grpo', 'bnpo', 'dr_grpo', 'dapo'):
    _loss_check(
        ('GRPOConfig.loss_type',) + KL_OPTIONS + CLIP_OPTIONS
        + (('GRPOConfig.max_completion_length',) if loss_type == 'dr_grpo' else ()),
        f"loss_type='{loss_type}', beta={BETA}, epsilon 0.2/0.28",
        theirs=lambda c, t=loss_type: _their_loss(c, loss_type=t),
        mine=lambda c, t=loss_type: _our_loss(c, AGGREGATION[t]),
        ours='agentrl.substrate.grpo.policy_loss + ReferenceKL')

_loss_check(
    ('GRPOConfig.loss_type',) + CLIP_OPTIONS, "loss_type='grpo', beta=0, epsilon 0.2/0.28",
    theirs=lambda c: _their_loss(c, beta=0.0), mine=lambda c: _our_loss(c, AGGREGATION['grpo'], beta=0.0))

# cispo: a constant weight min(r, epsilon_high) times A log pi, which is our capped weight with the range [0, cap]
_loss_check(
    ('GRPOConfig.loss_type', 'GRPOConfig.epsilon_high') + KL_OPTIONS,
    f"loss_type='cispo', epsilon_high={CISPO_CAP}, beta={BETA}",
    theirs=lambda c: _their_loss(c, loss_type='cispo', epsilon_high=CISPO_CAP),
    mine=lambda c: _our_loss(c, AGGREGATION['cispo'], plugins=(CappedWeightLoss((1.0, CISPO_CAP - 1)),)),
    ours='agentrl.ch10.framework_plugins.CappedWeightLoss + ReferenceKL')

# ---- GSPO: importance_sampling_level='sequence', one geometric-mean ratio per sequence
for loss_type in ('grpo', 'dapo', 'luspo'):
    _loss_check(
        ('GRPOConfig.importance_sampling_level', 'GRPOConfig.loss_type') + CLIP_OPTIONS + KL_OPTIONS,
        f"importance_sampling_level='sequence', loss_type='{loss_type}', beta={BETA}",
        theirs=lambda c, t=loss_type: _their_loss(c, loss_type=t, level='sequence'),
        mine=lambda c, t=loss_type: _our_loss(c, AGGREGATION[t], plugins=(SequenceRatioLoss((CLIP_LOW, CLIP_HIGH)),)),
        ours='agentrl.ch10.framework_plugins.SequenceRatioLoss + ReferenceKL')

# ---- use_bias_correction_kl: k3 times the policy ratio, the ratio differentiated
SEQUENCE_WEIGHT = ("under importance_sampling_level='sequence' TRL multiplies k3 by the sequence's geometric-mean "
                   "ratio exp(mean_t(logp - old_logp)), ours (ratio_weighted_kl) by each token's own ratio; the "
                   "two are one number only when a sequence has a single token")
for level in ('token', 'sequence'):
    _loss_check(
        ('GRPOConfig.use_bias_correction_kl',) + KL_OPTIONS + CLIP_OPTIONS
        + (('GRPOConfig.importance_sampling_level',) if level == 'sequence' else ()),
        f"use_bias_correction_kl=True, importance_sampling_level='{level}', loss_type='grpo', beta={BETA}",
        theirs=lambda c, lv=level: _their_loss(c, level=lv, bias_correction=True),
        mine=lambda c, lv=level: _our_loss(
            c, AGGREGATION['grpo'], weighting='ratio',
            plugins=(SequenceRatioLoss((CLIP_LOW, CLIP_HIGH)),) if lv == 'sequence' else ()),
        ours='agentrl.substrate.grpo.ReferenceKL(weighting=\'ratio\') (agentrl.core.off_policy.ratio_weighted_kl)',
        differs=(Differs(SEQUENCE_WEIGHT, cases=('ragged', 'empty row', 'long', 'far ratios')),)
        if level == 'sequence' else ())

# ---- top_entropy_quantile: the policy term of only the highest-entropy tokens
KEEP = 0.2
FLOAT32_QUANTILE = ("TRL takes the quantile of the policy tokens' entropies cast to float32 and compares the float64 "
                    "entropies with it; where the quantile lands on a token's entropy (a whole order statistic) its "
                    "float32 value can round above that entropy: TRL drops the token, ours keeps it (a tie)")


for keep in (KEEP, 0.5):
    registry.add(
        FRAMEWORK, ('GRPOConfig.top_entropy_quantile',), 'trl.trainer.grpo_trainer.GRPOTrainer.get_high_entropy_mask',
        'agentrl.core.entropy_control.top_entropy_mask', f'top_entropy_quantile={keep}',
        theirs=lambda c, k=keep: _grpo_trainer().get_high_entropy_mask(
            entropy_from_logits(c['logits']).detach(), c['mask'], 1 - k).to(torch.float64),
        mine=lambda c, k=keep: top_entropy_mask(entropy_from_logits(c['logits']).detach(), c['mask'], k).to(
            torch.float64),
        wrt=(), value_only=True, stand_in='a trainer made with object.__new__ whose accelerator is one process',
        differs=(Differs(FLOAT32_QUANTILE, when=float32_quantile_moves(keep)),))
_loss_check(
    ('GRPOConfig.top_entropy_quantile', 'GRPOConfig.loss_type') + KL_OPTIONS + CLIP_OPTIONS,
    f"top_entropy_quantile={KEEP}, loss_type='grpo', beta={BETA}",
    theirs=lambda c: _their_loss(c, keep=KEEP),
    mine=lambda c: _our_loss(c, AGGREGATION['grpo'], plugins=(TopEntropyUpdate(KEEP),)),
    ours='agentrl.ch10.framework_plugins.TopEntropyUpdate + ReferenceKL',
    differs=(Differs(FLOAT32_QUANTILE, when=float32_quantile_moves(KEEP)),))

# ---- the entropy bonus: loss - coef * the token mean of the entropy over the micro-batch, whatever the loss type
BONUS_AGGREGATION = ("TRL's entropy bonus is the token mean of the entropy under every loss type; our engine reduces "
                     "EntropyBonus as cfg.loss_agg says, here 'seq-mean-token-mean' like the policy term, so the two "
                     "part unless every sequence has the same number of policy tokens")
BONUS_MASK = ("with top_entropy_quantile < 1 TRL averages the bonus over the kept high-entropy tokens only; "
              "EntropyBonus averages over every policy token")
for loss_type, keep in (('bnpo', 1.0), ('grpo', 1.0), ('bnpo', KEEP)):
    _loss_check(
        ('GRPOConfig.entropy_coef', 'GRPOConfig.loss_type') + KL_OPTIONS + CLIP_OPTIONS
        + (('GRPOConfig.top_entropy_quantile',) if keep < 1 else ()),
        f"entropy_coef={ENTROPY_COEF}, loss_type='{loss_type}', beta={BETA}"
        + (f', top_entropy_quantile={keep}' if keep < 1 else ''),
        theirs=lambda c, t=loss_type, k=keep: _their_loss(c, loss_type=t, entropy_coef=ENTROPY_COEF, keep=k),
        mine=lambda c, t=loss_type, k=keep: _our_loss(
            c, AGGREGATION[t], plugins=((TopEntropyUpdate(k),) if k < 1 else ()) + (EntropyBonus(ENTROPY_COEF),)),
        ours='agentrl.substrate.grpo.policy_loss + agentrl.ch10.regularizers.EntropyBonus + ReferenceKL',
        wrt=('logp', 'ref_logp', 'logits'),
        differs=((Differs(BONUS_AGGREGATION, cases=('ragged', 'empty row', 'long', 'far ratios')),)
                 if loss_type == 'grpo' else ())
        + ((Differs(BONUS_MASK),) if keep < 1 else ()))

# ---- the adaptive entropy coefficient (Skywork-OR1): one controller step at the end of an optimizer step
CONTROLLER = [(start, target) for start in (0.0, 0.5, 0.998, 1.0) for target in (0.2, 1.5, 2.0, 2.5, 10.0)]


def _their_controller(case):
    coefs = []
    for start, target in CONTROLLER:
        trainer = _grpo_trainer(loss_type='bnpo', entropy_coef=start, adaptive=True, target=target)
        trainer._get_per_token_logps_and_entropies = forward(trainer, case)
        trainer._compute_loss(None, inputs_of(case))
        coefs.append(trainer.entropy_coef)
    return torch.tensor(coefs, dtype=torch.float64)


def _our_controller(case):
    measured = masked_mean(entropy_from_logits(case['logits']), case['mask']).item()
    return torch.tensor([adapt_entropy_coef(start, measured, target, 0.005, 0.0, 1.0)
                         for start, target in CONTROLLER], dtype=torch.float64)


registry.add(
    FRAMEWORK, ('GRPOConfig.use_adaptive_entropy', 'GRPOConfig.entropy_target', 'GRPOConfig.entropy_coef_delta',
                'GRPOConfig.entropy_coef_min', 'GRPOConfig.entropy_coef_max'),
    'trl.trainer.grpo_trainer.GRPOTrainer._compute_loss', 'agentrl.core.entropy_control.adapt_entropy_coef',
    'use_adaptive_entropy=True: the coefficient after one step, delta 0.005 in [0, 1], 20 (start, target) pairs',
    theirs=_their_controller, mine=_our_controller, wrt=(), value_only=True,
    stand_in=STAND_IN + '; the accelerator ends an optimizer step on every call')

# the bonus applied on a step: the coefficient when the previous step's entropy was at or below the target, else 0
for last in (0.1, 5.0):
    def _our_gated(case, last=last):
        term = EntropyTarget(0.2, 0.005, 1.0)
        term.coef, term.on = 0.3, last <= 0.2  # the controller's state after a step that measured `last`
        return _our_loss(case, AGGREGATION['bnpo'], plugins=(term,))

    _loss_check(
        ('GRPOConfig.use_adaptive_entropy', 'GRPOConfig.entropy_target', 'GRPOConfig.loss_type') + KL_OPTIONS,
        f"use_adaptive_entropy=True, entropy_coef=0.3, entropy_target=0.2, previous entropy {last}, "
        f"loss_type='bnpo', beta={BETA}",
        theirs=lambda c, last=last: _their_loss(c, loss_type='bnpo', entropy_coef=0.3, adaptive=True,
                                                last_entropy=last, target=0.2),
        mine=_our_gated, ours='agentrl.ch10.framework_plugins.EntropyTarget + ReferenceKL',
        wrt=('logp', 'ref_logp', 'logits'))

# ---- the vLLM importance weight: multiplies the policy term, not the KL term
_loss_check(
    ('GRPOConfig.vllm_importance_sampling_correction', 'GRPOConfig.loss_type') + KL_OPTIONS + CLIP_OPTIONS,
    "use_vllm=True, vllm_importance_sampling_correction=True, weight pi_old / pi_sampler untruncated, "
    f"loss_type='bnpo', beta={BETA}",
    theirs=lambda c: _their_loss(c, loss_type='bnpo', use_vllm=True, sampler_logp=sampler_logp_of(c)),
    mine=lambda c: _our_loss(c, AGGREGATION['bnpo'], plugins=(SamplerCorrection('token_truncate', math.inf),),
                             sampler_logp=sampler_logp_of(c)),
    ours='agentrl.ch10.framework_plugins.SamplerCorrection (agentrl.core.off_policy.sampler_weights) + ReferenceKL')


def sampler_logp_of(case):
    # the sampler's log-probs: the reference's, detached, stand in (any log-probs other than pi_old's would do)
    return case['ref_logp'].detach()
