"""ms-swift's functions (swift/rl_core/advantage.py, swift/rlhf_trainers/grpo_trainer.py) against ours.

ms-swift 4.6.0 needs trl < 1.0, so it runs in its own layer (frameworks/swift.txt): trl 0.29.1 and ms-swift's own
imports over the reference set. Its GRPO loss, _compute_loss_and_metrics, is called on a trainer made with
object.__new__: configuration attributes, an accelerator whose gather is the identity (one process), and the forward
replaced by one that returns the case's log-probs (and, when the trainer asks for them, the entropies of the case's
logits through the entropy_from_logits that grpo_trainer.py imports and its real forward calls: trl's, in this layer).
Everything else is ms-swift's code. _compute_advantages, which puts the KL in the reward, is called on a trainer made
the same way, with the case's log-probs as the encoded batches' no-grad log-probs.
"""
import collections
import importlib
import types

import torch

from agentrl.ch10.framework_options import group_advantages
from agentrl.ch10.framework_plugins import CappedWeightLoss, SamplerCorrection, SequenceRatioLoss, TopEntropyUpdate
from agentrl.core.logprobs import entropy_from_logits, masked_mean
from agentrl.substrate.grpo import RLConfig, ReferenceKL, compute_advantages, policy_loss
from machinery.differential.cases import GROUP_SIZE, float32_quantile_moves
from machinery.differential.compare import Differs, Registry
from machinery.differential.ours import kl_shaped_rewards

FRAMEWORK = 'ms-swift'
registry = Registry()
CLIP_LOW, CLIP_HIGH = 0.2, 0.28  # clip-higher, so that a swapped pair of bounds shows
SAMPLER_THRESHOLD = 2.0


# ---- the group advantage: compute_advantages(rewards_per_func, reward_weights, num_generations, ...), one reward
# function of weight 1
def _their_advantages(case, scale, estimator='grpo'):
    from swift.rl_core.advantage import compute_advantages as theirs
    rewards = case['rewards'][:, None]  # [B, 1]: one reward function
    return theirs(rewards, torch.ones(1, dtype=torch.float64), GROUP_SIZE, advantage_estimator=estimator,
                  scale_rewards=scale)[0]


EPSILON = ("ms-swift divides by std + 1e-4 (advantage.py), ours by std + 1e-6: every case's first group has rewards "
           "(0, 1, 1, 0.5), whose advantages then differ by about 2e-4 relative")
registry.add(
    FRAMEWORK, ('advantage_estimator', 'scale_rewards'),
    'swift.rl_core.advantage.compute_advantages', 'agentrl.substrate.grpo.compute_advantages',
    "advantage_estimator='grpo', scale_rewards='group'",
    theirs=lambda c: _their_advantages(c, 'group'),
    mine=lambda c: compute_advantages({'rewards': c['rewards']}, RLConfig(group_size=GROUP_SIZE, turn_cost=0.0)),
    value_only=True, cases=('ragged', 'single token', 'long'), differs=(Differs(EPSILON),))
# the same with our group_advantages at ms-swift's epsilon: what is left is the arithmetic
for scale in ('group', 'batch', 'none'):
    registry.add(
        FRAMEWORK, ('advantage_estimator', 'scale_rewards'),
        'swift.rl_core.advantage.compute_advantages', 'agentrl.ch10.framework_options.group_advantages',
        f"advantage_estimator='grpo', scale_rewards='{scale}' (ours: eps=1e-4)",
        theirs=lambda c, s=scale: _their_advantages(c, s),
        mine=lambda c, s=scale: group_advantages(c['rewards'], GROUP_SIZE, s, eps=1e-4),
        value_only=True, cases=('ragged', 'single token', 'long'))


# ---- the GRPO loss through a stand-in trainer
def _trainer_module():
    return importlib.import_module('swift.rlhf_trainers.grpo_trainer')


class _Accelerator:
    """One process: gather_for_metrics is the identity."""
    num_processes = 1

    @staticmethod
    def gather_for_metrics(x):
        return x


def _their_entropies(logits):
    """The entropies as ms-swift's forward computes them: the entropy_from_logits its trainer module imported."""
    return _trainer_module().entropy_from_logits(logits)


def _their_loss_and_metrics(case, loss_type, level='token', clip=(CLIP_LOW, CLIP_HIGH), beta=0.0, sampler=None,
                            keep=1.0, log_entropy=False):
    module = _trainer_module()
    from swift.rl_core.data import GRPOBatch
    trainer = object.__new__(module.GRPOTrainer)
    rows, width = case['mask'].shape
    mask = case['mask'] > 0
    compute_entropy = log_entropy or keep < 1.0  # as GRPOTrainer's _prepare_algorithm_params sets it
    settings = dict(
        model=types.SimpleNamespace(training=True), compute_entropy=compute_entropy, overlong_filter=False,
        args=types.SimpleNamespace(log_entropy=log_entropy, top_entropy_quantile=keep, delta=None,
                                   gradient_accumulation_steps=1),
        top_entropy_quantile=keep,
        beta=beta, kl_in_reward=False, rollout_importance_sampling_mode=sampler,
        rollout_importance_sampling_threshold=SAMPLER_THRESHOLD, log_rollout_offpolicy_metrics=False,
        disable_rollout_importance_sampling=sampler is None, importance_sampling_level=level, _has_teacher=False,
        loss_type=loss_type, epsilon_low=clip[0], epsilon_high=clip[1], off_policy_sequence_mask_delta=None,
        max_completion_length=width, num_generations=GROUP_SIZE, accelerator=_Accelerator(), sdar_loss_coef=0.0,
        chord_sft_iterator=None, model_accepts_loss_kwargs=False, compute_loss_func=None,
        current_gradient_accumulation_steps=1)
    for name, value in settings.items():
        setattr(trainer, name, value)

    # the forward: the case's log-probs, and the entropies of the case's logits when asked for (temperature 1)
    def forward(model, inputs, batch, compute_entropy=False):
        return case['logp'], (_their_entropies(case['logits']) if compute_entropy else None)
    trainer._get_per_token_logps_and_entropies = forward
    batch = GRPOBatch(completion_mask=mask, truncated_mask=torch.zeros(rows, dtype=torch.bool),
                      seq_lengths=mask.sum(-1), old_per_token_logps=case['old_logp'].detach(),
                      ref_per_token_logps=case['ref_logp'].detach() if beta else None,
                      advantages=case['advantages'][:, None].expand(rows, width),
                      num_items_in_batch=mask.sum(),
                      rollout_per_token_logps=case['ref_logp'].detach() if sampler else None)
    return trainer._compute_loss_and_metrics(None, {}, batch)


def _their_loss(case, loss_type, *args, **settings):
    return _their_loss_and_metrics(case, loss_type, *args, **settings)[0]


def _our_loss(case, mode, plugins=(), clip=(CLIP_LOW, CLIP_HIGH), beta=0.0):
    horizon = case['mask'].shape[1] if mode == 'seq-mean-token-sum-norm' else None
    cfg = RLConfig(clip_low=clip[0], clip_high=clip[1], loss_agg=mode, loss_agg_horizon=horizon)
    loss = policy_loss(case['logp'], case['old_logp'].detach(), case['advantages'], case['mask'], cfg, plugins)[0]
    if beta:  # the KL term in the loss, reduced the way the policy term is
        term = ReferenceKL(reference=None, coef=beta, kind='k3')
        term.ref_logp, term.cfg = case['ref_logp'].detach(), cfg
        loss = term.extend_loss(loss, torch.arange(case['logp'].shape[0]), None, case['logp'], case['mask'], {})
    return loss


STAND_IN = ("GRPOTrainer via object.__new__: configuration attributes, an accelerator whose gather is the identity, "
            "the forward returning the case's log-probs")
ENTROPY_STAND_IN = (STAND_IN + " and, as the real forward does when compute_entropy is on, the entropies of the case's "
                    "logits through the entropy_from_logits grpo_trainer.py imports (trl.trainer.utils's in this "
                    "layer), at temperature 1")
AGGREGATION = {'grpo': 'seq-mean-token-mean', 'bnpo': 'token-mean', 'dapo': 'token-mean',
               'dr_grpo': 'seq-mean-token-sum-norm'}
for loss_type, mode in AGGREGATION.items():
    options = ('loss_type', 'epsilon', 'epsilon_high') + (('max_completion_length',) if loss_type == 'dr_grpo' else ())
    registry.add(
        FRAMEWORK, options,
        'swift.rlhf_trainers.grpo_trainer.GRPOTrainer._compute_loss_and_metrics', 'agentrl.substrate.grpo.policy_loss',
        f"loss_type='{loss_type}', importance_sampling_level='token', epsilon 0.2 / epsilon_high 0.28"
        + (', max_completion_length = T' if loss_type == 'dr_grpo' else '')
        + (', num_items_in_batch = the policy tokens, one process' if loss_type == 'dapo' else ''),
        theirs=lambda c, t=loss_type: _their_loss(c, t),
        mine=lambda c, m=mode: _our_loss(c, m),
        stand_in=STAND_IN)

# GSPO and GSPO-token: one ratio per sequence (the mean log-ratio, unclamped); under loss_type 'grpo' each sequence's
# token mean, averaged over every row. GSPO-token's value is GSPO's, and so is its gradient: each token gets sg(s) times
# its own log-prob's gradient, over the length, where GSPO gives each s / L.
for level in ('sequence', 'sequence_token'):
    registry.add(
        FRAMEWORK, ('importance_sampling_level', 'loss_type', 'epsilon', 'epsilon_high'),
        'swift.rlhf_trainers.grpo_trainer.GRPOTrainer._compute_loss_and_metrics',
        'agentrl.ch10.framework_plugins.SequenceRatioLoss',
        f"loss_type='grpo', importance_sampling_level='{level}', epsilon 0.2 / epsilon_high 0.28",
        theirs=lambda c, v=level: _their_loss(c, 'grpo', v),
        mine=lambda c: _our_loss(c, 'seq-mean-token-mean', (SequenceRatioLoss((CLIP_LOW, CLIP_HIGH)),)),
        stand_in=STAND_IN)

# CISPO: ms-swift caps the ratio at epsilon_high itself (not 1 + epsilon_high) and has no lower cap; ours clips to
# [1 - low, 1 + high], so low = 1 (a floor of 0, which a ratio never reaches) and high = epsilon_high - 1
CISPO_CAP = 5.0
registry.add(
    FRAMEWORK, ('loss_type', 'epsilon_high'),
    'swift.rlhf_trainers.grpo_trainer.GRPOTrainer._compute_loss_and_metrics',
    'agentrl.ch10.framework_plugins.CappedWeightLoss', f"loss_type='cispo', epsilon_high={CISPO_CAP}",
    theirs=lambda c: _their_loss(c, 'cispo', clip=(CLIP_LOW, CISPO_CAP)),
    mine=lambda c: _our_loss(c, 'token-mean', (CappedWeightLoss((1.0, CISPO_CAP - 1)),)),
    stand_in=STAND_IN)

# the KL to the reference in the loss: k3 added to each token's loss before the aggregation
BETA = 0.04
KL_CLAMP = ("ms-swift clamps k3's log-ratio to [-20, 20] and k3 to [-10, 10] (zero gradient beyond); 'far ratios' puts "
            "ref_logp - logp from -30 to 21 on row 0, where ours is unclamped")
for loss_type in ('grpo', 'bnpo'):
    registry.add(
        FRAMEWORK, ('beta', 'loss_type'),
        'swift.rlhf_trainers.grpo_trainer.GRPOTrainer._compute_loss_and_metrics', 'agentrl.substrate.grpo.ReferenceKL',
        f"loss_type='{loss_type}', beta={BETA} (k3 per token, aggregated with the policy term)",
        theirs=lambda c, t=loss_type: _their_loss(c, t, beta=BETA),
        mine=lambda c, t=loss_type: _our_loss(c, AGGREGATION[t], beta=BETA),
        stand_in=STAND_IN, differs=(Differs(KL_CLAMP, cases=('far ratios',)),))

# the sampler correction: the rollout engine's log-probs (ref_logp plays them, as data) weigh each token's loss by
# pi_old / pi_sampler, truncated or masked at the threshold, per token or per sequence


SAFETY_BOUND = ("_apply_rollout_importance_sampling clamps log pi_old - log pi_sampler to [-20, 20] before exp; 'far "
                "ratios' has -21 on row 1 where the token's own ratio is e^21 with A < 0, so e^-20 against our e^-21 "
                "weighs a loss of size e^21")
SEQUENCE_RATIO = ("ms-swift's sequence ratio is the geometric mean of the token ratios (exp of the mean log-ratio, "
                  "_compute_sequence_level_ratios), ours their product: the same only on one-token rows")
SEQUENCE_MASK = (SEQUENCE_RATIO + "; and a kept sequence's tokens keep their own token ratio, where ours gives each "
                 "the sequence's")


def _our_corrected(case, mode):
    correction = SamplerCorrection(mode, SAMPLER_THRESHOLD)
    correction.shape_rewards({'sample_logp': case['ref_logp'].detach()}, {})
    correction.begin_minibatch(torch.arange(case['logp'].shape[0]), None, case['logp'], case['old_logp'], case['mask'])
    return _our_loss(case, 'seq-mean-token-mean', (correction,))


for sampler_mode in ('token_truncate', 'token_mask', 'sequence_truncate', 'sequence_mask'):
    registry.add(
        FRAMEWORK, ('rollout_importance_sampling_mode', 'rollout_importance_sampling_threshold'),
        'swift.rlhf_trainers.grpo_trainer.GRPOTrainer._compute_loss_and_metrics',
        'agentrl.ch10.framework_plugins.SamplerCorrection',
        f"loss_type='grpo', rollout_importance_sampling_mode='{sampler_mode}', threshold {SAMPLER_THRESHOLD}",
        theirs=lambda c, m=sampler_mode: _their_loss(c, 'grpo', sampler=m),
        mine=lambda c, m=sampler_mode: _our_corrected(c, m),
        stand_in=STAND_IN,
        differs=(Differs(SAFETY_BOUND, cases=('far ratios',)),)
        + ((Differs(SEQUENCE_RATIO if sampler_mode == 'sequence_truncate' else SEQUENCE_MASK,
                    cases=('ragged', 'empty row', 'long', 'far ratios')),) if sampler_mode.startswith('sequence')
           else ()))

# ---- top_entropy_quantile: the policy term of only the highest-entropy tokens. ms-swift fills the padding's entropies
# with NaN, takes torch.nanquantile of them cast to float32, keeps the tokens whose (float64) entropy is at least that
# threshold, and multiplies the policy term by the mask; the KL term is added after, unmasked.
KEEP = 0.2
FLOAT32_QUANTILE = ("ms-swift takes the quantile (nanquantile) of the policy tokens' entropies cast to float32 and "
                    "compares the float64 entropies with it; where the float32 threshold falls on the other side of a "
                    "token's entropy than the float64 one (at a whole order statistic it can round above that very "
                    "entropy), ms-swift keeps other tokens than ours")


def _our_top_entropy(case, mode, keep, beta=0.0):
    update = TopEntropyUpdate(keep)
    update.begin_minibatch(torch.arange(case['logp'].shape[0]), case['logits'], case['logp'], case['old_logp'],
                           case['mask'])
    return _our_loss(case, mode, (update,), beta=beta)


for loss_type, keep, beta in (('grpo', KEEP, 0.0), ('bnpo', 0.5, BETA)):
    registry.add(
        FRAMEWORK, ('top_entropy_quantile', 'loss_type', 'epsilon', 'epsilon_high') + (('beta',) if beta else ()),
        'swift.rlhf_trainers.grpo_trainer.GRPOTrainer._compute_loss_and_metrics',
        'agentrl.ch10.framework_plugins.TopEntropyUpdate' + (' + ReferenceKL' if beta else ''),
        f"top_entropy_quantile={keep}, loss_type='{loss_type}', epsilon 0.2 / epsilon_high 0.28"
        + (f', beta={beta}' if beta else ''),
        theirs=lambda c, t=loss_type, k=keep, b=beta: _their_loss(c, t, keep=k, beta=b),
        mine=lambda c, t=loss_type, k=keep, b=beta: _our_top_entropy(c, AGGREGATION[t], k, b),
        stand_in=ENTROPY_STAND_IN,
        differs=((Differs(KL_CLAMP, cases=('far ratios',)),) if beta else ())
        + (Differs(FLOAT32_QUANTILE, when=float32_quantile_moves(keep)),))

# ---- log_entropy: the logged entropies, read back from the metrics _compute_loss_and_metrics returns. Each
# completion's mean token entropy (nanmean over its tokens, the padding being NaN), and entropy/mean, their mean.
EMPTY_COMPLETION = ("a completion with no policy token has only NaN entropies, so ms-swift logs NaN for it (nanmean of "
                    "nothing); our masked_mean gives 0")
PER_COMPLETION = ("ms-swift's entropy/mean is the mean over completions of each one's mean token entropy (every "
                  "completion weighs the same); ours is the token mean over all policy tokens (every token weighs the "
                  "same): they part where the non-empty completions differ in length")


def _has_empty_row(case):
    return bool((case['mask'].sum(-1) == 0).any())


def _lengths_differ(case):
    lengths = case['mask'].sum(-1)
    return bool(lengths[lengths > 0].unique().numel() > 1)


def _their_entropy_log(case, key):
    metrics = _their_loss_and_metrics(case, 'grpo', log_entropy=True)[1]['entropy']
    return torch.tensor(metrics[key], dtype=torch.float64)


def _our_row_entropies(case):
    entropies = entropy_from_logits(case['logits'])
    return torch.stack([masked_mean(entropies[i], case['mask'][i]) for i in range(entropies.shape[0])])


registry.add(
    FRAMEWORK, ('log_entropy',), 'swift.rlhf_trainers.grpo_trainer.GRPOTrainer._compute_loss_and_metrics',
    'agentrl.core.logprobs.entropy_from_logits', "log_entropy=True: the per-completion means (metrics['entropy_logs'])",
    theirs=lambda c: _their_entropy_log(c, 'entropy_logs'), mine=_our_row_entropies,
    value_only=True, stand_in=ENTROPY_STAND_IN + "; ours: masked_mean of each row's entropies",
    differs=(Differs(EMPTY_COMPLETION, when=_has_empty_row),))
registry.add(
    FRAMEWORK, ('log_entropy',), 'swift.rlhf_trainers.grpo_trainer.GRPOTrainer._compute_loss_and_metrics',
    'agentrl.core.logprobs.entropy_from_logits', "log_entropy=True: entropy/mean (metrics['entropy_mean'])",
    theirs=lambda c: _their_entropy_log(c, 'entropy_mean'),
    mine=lambda c: masked_mean(entropy_from_logits(c['logits']), c['mask']),
    value_only=True, stand_in=ENTROPY_STAND_IN + '; ours: the token mean our engine logs (masked_mean)',
    differs=(Differs(PER_COMPLETION, when=_lengths_differ),))


# ---- kl_in_reward: GRPOTrainer._compute_advantages sums log pi_old - log pi_ref over each completion of the encoded
# micro-batches, gathers the sums, and has compute_advantages subtract beta times them from the rewards before the
# group normalisation
KL_IN_REWARD_BETA = 0.05
ADVANTAGE_STAND_IN = ("GRPOTrainer via object.__new__: configuration attributes (kl_in_reward, beta, one reward "
                      "function of weight 1, num_generations, advantage_estimator, scale_rewards, dynamic_num_samples "
                      "off) and empty metric logs; inputs: the rewards as rewards_per_func and the case split in two "
                      "encoded micro-batches whose GRPOBatch holds old_logp, ref_logp and the mask; one process "
                      "(accelerate's gather is then the identity); ours: a reference model returning logits whose "
                      "log-softmax is the case's ref_logp")


def _their_kl_advantages(case, scale):
    module = _trainer_module()
    from swift.rl_core.data import GRPOBatch
    trainer = object.__new__(module.GRPOTrainer)
    settings = dict(
        kl_in_reward=True, beta=KL_IN_REWARD_BETA, reward_weights=torch.ones(1, dtype=torch.float64),
        reward_func_names=['reward'], model=types.SimpleNamespace(training=True), num_generations=GROUP_SIZE,
        dynamic_num_samples=False, advantage_estimator='grpo', scale_rewards=scale,
        _metrics={'train': collections.defaultdict(list), 'eval': collections.defaultdict(list)},
        _logs={'rewards': collections.defaultdict(list)})
    for name, value in settings.items():
        setattr(trainer, name, value)
    rows, width = case['mask'].shape
    encoded = []
    for part in torch.arange(rows).split(max(rows // 2, 1)):
        mask = case['mask'][part] > 0
        encoded.append({'grpo_batch': GRPOBatch(
            completion_mask=mask, truncated_mask=torch.zeros(len(part), dtype=torch.bool), seq_lengths=mask.sum(-1),
            old_per_token_logps=case['old_logp'][part].detach(), ref_per_token_logps=case['ref_logp'][part].detach())})
    return trainer._compute_advantages([], case['rewards'].detach()[:, None], encoded)


def _our_kl_advantages(case, scale):
    return group_advantages(kl_shaped_rewards(case, KL_IN_REWARD_BETA), GROUP_SIZE, scale, eps=1e-4)


for scale in ('group', 'none'):
    registry.add(
        FRAMEWORK, ('kl_in_reward', 'beta', 'scale_rewards'),
        'swift.rlhf_trainers.grpo_trainer.GRPOTrainer._compute_advantages',
        'agentrl.ch10.regularizers.KLInReward + agentrl.ch10.framework_options.group_advantages',
        f"kl_in_reward=True, beta={KL_IN_REWARD_BETA}, advantage_estimator='grpo', scale_rewards='{scale}' "
        "(ours: eps=1e-4)",
        theirs=lambda c, s=scale: _their_kl_advantages(c, s), mine=lambda c, s=scale: _our_kl_advantages(c, s),
        value_only=True, stand_in=ADVANTAGE_STAND_IN)

# ---- not covered here, though the map names a function of ours:
# kl_coef (ours: KLInReward): ms-swift's PPOTrainer subclasses trl's PPOTrainer, whose train loop puts the KL in the
#   reward inline; ms-swift has no arithmetic of its own for it.
# advantage_estimator 'rloo' and 'reinforce_plus_plus': no function of ours computes them (group_advantages centres on
#   the group mean, including the sample itself).
# scale_rewards 'gdpo': per-function normalisation then a batch standardisation; nothing of ours composes to it.
# loss_type 'sapo', 'real', 'fipo': no function of ours computes them (their `ours` in the map is the aggregation).
