"""TRL's trainers' scoring against ours: GRPOTrainer._generate_and_score_completions, where the group advantages and
the vLLM importance weight are made, run with generation, the forward, the reward function, decoding and logging
replaced (SCORING_STAND_IN); RLOOTrainer's, where beta times the summed k1 is taken off the rewards (RLOO_STAND_IN);
and RLOO's sequence-ratio loss. Everything arithmetic is TRL's.
"""
from collections import defaultdict
from types import SimpleNamespace

import torch

from agentrl.ch10.framework_options import group_advantages
from agentrl.core.off_policy import clipped_objective, sampler_weights, sequence_sum
from machinery.differential.cases import GROUP_SIZE
from machinery.differential.compare import Registry
from machinery.differential.ours import kl_shaped_rewards
from machinery.differential.trl import (CLIP_HIGH, CLIP_LOW, FRAMEWORK, STAND_IN, OneProcess, forward, inputs_of,
                                        sampler_logp_of)

registry = Registry()


# ---- GRPOTrainer._generate_and_score_completions: the group advantages and the vLLM importance weight, built inline
# there. The stand-in replaces what is not arithmetic: generation (the case's completions: one prompt of two tokens
# each, as many completion tokens as the row's mask holds, and the sampler's log-probs), the forward (pi_old), the
# reward function, decoding, logging and the accelerator; the mean, std, weight, clamp and mask are TRL's.
SCORING_STAND_IN = (
    'a GRPOTrainer made with object.__new__ holding configuration attributes only (scale_rewards, num_generations 4, '
    "one reward function of weight 1 returning the case's rewards, multi_objective_aggregation 'sum_then_normalize', "
    'beta 0, steps_per_generation = gradient_accumulation_steps = num_iterations = 1, no tools, environments or '
    "images), one process (gather is the identity), a decoder that returns '' and empty logs; _generate returns the "
    "case's completions (a two-token prompt, one token per policy position of each row) and, with use_vllm, the "
    "sampler's log-probs as one float64 tensor per completion (vLLM hands over floats, which TRL would hold in "
    "float32); the forward returns the case's old_logp as pi_old")


class _Decoder:
    pad_token_id, eos_token_id = 0, 1

    def batch_decode(self, ids, skip_special_tokens=True):
        return ['' for _ in ids]


class _ScoringProcess(OneProcess):
    process_index = 0
    is_main_process = True
    device = torch.device('cpu')


def _their_scoring(case, scale='group', mode=None, clip_max=3.0):
    """TRL's _generate_and_score_completions on the case -> its output dict (advantages, importance_sampling_ratio)."""
    import warnings
    from trl.trainer.grpo_trainer import GRPOTrainer
    rows = case['mask'].shape[0]
    lengths = case['mask'].sum(-1).long().tolist()
    sampler = sampler_logp_of(case)

    def generate(prompts):
        completions = [[5] * n for n in lengths]
        sampler_rows = None if mode is None else [sampler[i, :n].clone() for i, n in enumerate(lengths)]
        return [[2, 3]] * len(prompts), completions, None, [''] * len(prompts), sampler_rows, {}, None, []

    def forward(model, *unused, **unused_too):
        return case['old_logp'].detach().clone(), None, None

    def reward(prompts, completions, completion_ids, **unused):
        return case['rewards'].detach().tolist()

    trainer = object.__new__(GRPOTrainer)
    trainer.args = SimpleNamespace(per_device_train_batch_size=rows, per_device_eval_batch_size=rows,
                                   steps_per_generation=1, gradient_accumulation_steps=1,
                                   gradient_checkpointing_kwargs=None, report_to=[])
    trainer.__dict__.update(
        accelerator=_ScoringProcess(), model=SimpleNamespace(training=True, is_gradient_checkpointing=False),
        _generate=generate, _get_per_token_logps_and_entropies=forward, processing_class=_Decoder(),
        _tokenizer=_Decoder(), environment_factories=None, environments=None, tools=None, pad_to_multiple_of=None,
        mask_truncated_completions=False, num_iterations=1, beta=0.0, ref_model=None, use_vllm=mode is not None,
        vllm_importance_sampling_correction=mode is not None, vllm_importance_sampling_mode=mode,
        vllm_importance_sampling_clip_min=None, vllm_importance_sampling_clip_max=clip_max,
        reward_funcs=[reward], reward_processing_classes=[None], reward_func_names=['case_rewards'],
        reward_weights=torch.ones(1), num_generations=GROUP_SIZE, num_generations_eval=GROUP_SIZE,
        multi_objective_aggregation='sum_then_normalize', scale_rewards=scale, state=SimpleNamespace(global_step=0),
        log_multimodal=False, _pending_extra_logs={}, _pending_metrics={},
        _metrics={'train': defaultdict(list), 'eval': defaultdict(list)},
        _logs={'prompt': [], 'completion': [], 'advantages': [], 'rewards': defaultdict(list),
               'extra': defaultdict(list)})
    with warnings.catch_warnings():  # 1.10.0 copies each sampler row with torch.tensor(row), which warns
        warnings.simplefilter('ignore', UserWarning)
        return trainer._generate_and_score_completions([{'prompt': ''} for _ in range(rows)])


# advantages: TRL casts the reward functions' outputs to float32 (rewards_per_func), by design, so the check is judged
# at float32's scale; its epsilon is 1e-4 and ours takes one, so it is passed
for scale in ('group', 'batch', 'none'):
    registry.add(
        FRAMEWORK, ('GRPOConfig.scale_rewards',), 'trl.trainer.grpo_trainer.GRPOTrainer._generate_and_score_completions',
        'agentrl.ch10.framework_options.group_advantages', f"scale_rewards='{scale}' (ours: eps=1e-4, TRL's)",
        theirs=lambda c, s=scale: _their_scoring(c, s)['advantages'],
        mine=lambda c, s=scale: group_advantages(c['rewards'].detach(), GROUP_SIZE, s, eps=1e-4),
        wrt=(), value_only=True, precision='float32',
        stand_in=SCORING_STAND_IN + "; TRL holds the rewards in float32 (rewards_per_func)")


def _their_weight(case, mode, clip_max):
    """TRL's vLLM weight where the loss reads it: broadcast over the row (a sequence mode gives one per row, [B, 1]),
    on the policy tokens; at padding TRL leaves exp(0) = 1 or the row's weight, which _compute_loss masks away."""
    weight = _their_scoring(case, mode=mode, clip_max=clip_max)['importance_sampling_ratio']
    mask = case['mask']
    return torch.where(mask > 0, weight.expand_as(mask), torch.zeros_like(mask))


def _cap_as_clip_max(cap):
    """GRPOConfig's own resolution of the deprecated vllm_importance_sampling_cap (its __post_init__)."""
    import warnings
    from trl import GRPOConfig
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        config = GRPOConfig(output_dir='unused', report_to=[], use_cpu=True, vllm_importance_sampling_cap=cap)
    return config.vllm_importance_sampling_clip_max


SAMPLER_OPTIONS = ('GRPOConfig.vllm_importance_sampling_mode', 'GRPOConfig.vllm_importance_sampling_clip_max',
                   'GRPOConfig.vllm_importance_sampling_correction')
# TRL's four modes and ours have the same names and meanings; clip_min None (TRL's default) is ours, which has none
for mode in ('token_truncate', 'token_mask', 'sequence_truncate', 'sequence_mask'):
    for clip_max in (3.0, 1.2):
        registry.add(
            FRAMEWORK, SAMPLER_OPTIONS, 'trl.trainer.grpo_trainer.GRPOTrainer._generate_and_score_completions',
            'agentrl.core.off_policy.sampler_weights',
            f"use_vllm=True, vllm_importance_sampling_mode='{mode}', clip_max={clip_max}, clip_min=None "
            "(compared on policy tokens)",
            theirs=lambda c, m=mode, x=clip_max: _their_weight(c, m, x),
            mine=lambda c, m=mode, x=clip_max: sampler_weights(
                c['old_logp'].detach(), sampler_logp_of(c), c['mask'], m, x),
            wrt=(), value_only=True, stand_in=SCORING_STAND_IN + "; the sampler's log-probs are the case's ref_logp")

CAP = 2.0
registry.add(
    FRAMEWORK, ('GRPOConfig.vllm_importance_sampling_cap',) + SAMPLER_OPTIONS,
    'trl.trainer.grpo_config.GRPOConfig.__post_init__ + GRPOTrainer._generate_and_score_completions',
    'agentrl.core.off_policy.sampler_weights',
    f"vllm_importance_sampling_cap={CAP} (deprecated), vllm_importance_sampling_mode='token_truncate' "
    "(compared on policy tokens)",
    theirs=lambda c: _their_weight(c, 'token_truncate', _cap_as_clip_max(CAP)),
    mine=lambda c: sampler_weights(c['old_logp'].detach(), sampler_logp_of(c), c['mask'], 'token_truncate', CAP),
    wrt=(), value_only=True,
    stand_in=SCORING_STAND_IN + "; the sampler's log-probs are the case's ref_logp; clip_max is read from a "
    'GRPOConfig built with the cap')


# ---- RLOO: PPO's clip on the whole sequence's ratio, the product of its token ratios
def _their_rloo(case):
    from trl.trainer.rloo_trainer import RLOOTrainer
    trainer = object.__new__(RLOOTrainer)
    trainer.__dict__.update(
        epsilon_low=CLIP_LOW, epsilon_high=CLIP_HIGH, aux_loss_enabled=False, _entropy_bonus_enabled=False,
        model=SimpleNamespace(training=True), accelerator=OneProcess(),
        _metrics={'train': defaultdict(list), 'eval': defaultdict(list)})
    trainer._get_per_token_logps_and_entropies = forward(trainer, case)
    inputs = inputs_of(case)
    inputs['old_logps'] = sequence_sum(case['old_logp'], case['mask']).detach()  # TRL stores the summed log-probs
    return trainer._compute_loss(None, inputs)


def _our_rloo(case):
    ratio = torch.exp(sequence_sum(case['logp'] - case['old_logp'], case['mask']))  # [B]
    return -clipped_objective(ratio, case['advantages'], CLIP_LOW, CLIP_HIGH).mean()


registry.add(
    FRAMEWORK, ('RLOOConfig.epsilon', 'RLOOConfig.epsilon_high'), 'trl.trainer.rloo_trainer.RLOOTrainer._compute_loss',
    'agentrl.core.off_policy.clipped_objective of exp(sequence_sum(logp - old_logp))', 'epsilon 0.2/0.28',
    theirs=_their_rloo, mine=_our_rloo, stand_in=STAND_IN.replace('loss settings', 'clip bounds')
    + "; old_logps, the sequence's summed log-prob, is the case's old_logp summed over policy tokens")

# ---- RLOOConfig.beta: RLOOTrainer._generate_and_score_completions takes beta times the summed k1 off each reward,
# then subtracts the leave-one-out mean. With normalize_advantages=True it standardises the result over the batch;
# the leave-one-out advantage is K/(K-1) times the group-centred one, a factor the standardisation cancels except
# beside its epsilon, which the group-centred values then meet as 1e-4 (K-1)/K. Ours is therefore KLInReward, then
# group_advantages centring within each group ('none'), then group_advantages standardising the whole batch as one
# group at that epsilon. (Without normalize_advantages no function of ours has the K/(K-1).)
# The KL makes TRL's rewards float64 here; only the Bessel factor of its nanstd, an integer count divided by
# count - 1, comes out in float32, a fixed relative 3e-8 on the std, well inside float64's tolerance.
RLOO_BETA = 0.05
RLOO_STAND_IN = SCORING_STAND_IN.replace('a GRPOTrainer', 'an RLOOTrainer').replace(
    "scale_rewards, num_generations 4, ", f'beta {RLOO_BETA}, normalize_advantages True, num_generations 4, ').replace(
    "multi_objective_aggregation 'sum_then_normalize', beta 0, steps_per_generation = gradient_accumulation_steps = "
    "num_iterations = 1, ", '').replace(
    " and, with use_vllm, the sampler's log-probs as one float64 tensor per completion (vLLM hands over floats, "
    "which TRL would hold in float32)", '').replace(
    "the forward returns the case's old_logp as pi_old",
    "the forward returns the case's old_logp for the policy and its ref_logp for the reference; accelerate's "
    "gather, which the module calls on the rewards and the KL, is the identity on one process") + (
    "; ours: a reference model returning logits whose log-softmax is the case's ref_logp")


def _their_rloo_advantages(case):
    from trl.trainer.rloo_trainer import RLOOTrainer
    rows = case['mask'].shape[0]
    lengths = case['mask'].sum(-1).long().tolist()
    trainer = object.__new__(RLOOTrainer)

    def generate(prompts):
        return [[2, 3]] * len(prompts), [[5] * n for n in lengths], [''] * len(prompts)

    def forward(model, *unused, **unused_too):
        return (case['ref_logp'] if model is trainer.ref_model else case['old_logp']).detach().clone(), None, None

    def reward(prompts, completions, completion_ids, **unused):
        return case['rewards'].detach().tolist()

    trainer.args = SimpleNamespace(per_device_train_batch_size=rows, per_device_eval_batch_size=rows,
                                   gradient_checkpointing_kwargs=None, report_to=[])
    trainer.__dict__.update(
        accelerator=_ScoringProcess(), model=SimpleNamespace(training=True, is_gradient_checkpointing=False),
        ref_model=SimpleNamespace(training=False, is_gradient_checkpointing=False), _generate=generate,
        _get_per_token_logps_and_entropies=forward, processing_class=_Decoder(), _tokenizer=_Decoder(),
        environment_factories=None, environments=None, tools=None, pad_to_multiple_of=None,
        mask_truncated_completions=False, beta=RLOO_BETA, reward_clip_range=None, normalize_advantages=True,
        reward_funcs=[reward], reward_processing_classes=[None], reward_func_names=['case_rewards'],
        reward_weights=torch.ones(1), num_generations=GROUP_SIZE, num_generations_eval=GROUP_SIZE,
        state=SimpleNamespace(global_step=0), log_multimodal=False, _pending_extra_logs={}, _pending_metrics={},
        _metrics={'train': defaultdict(list), 'eval': defaultdict(list)},
        _logs={'prompt': [], 'completion': [], 'advantages': [], 'rewards': defaultdict(list),
               'extra': defaultdict(list)})
    return trainer._generate_and_score_completions([{'prompt': ''} for _ in range(rows)])['advantages']


def _our_rloo_advantages(case):
    centred = group_advantages(kl_shaped_rewards(case, RLOO_BETA), GROUP_SIZE, 'none')
    return group_advantages(centred, case['mask'].shape[0], 'group', eps=1e-4 * (GROUP_SIZE - 1) / GROUP_SIZE)


registry.add(
    FRAMEWORK, ('RLOOConfig.beta',), 'trl.trainer.rloo_trainer.RLOOTrainer._generate_and_score_completions',
    'agentrl.ch10.regularizers.KLInReward + agentrl.ch10.framework_options.group_advantages',
    f"beta={RLOO_BETA}, normalize_advantages=True (ours: centred in each group of {GROUP_SIZE}, then standardised "
    f"over the batch at eps=1e-4 * {GROUP_SIZE - 1}/{GROUP_SIZE})",
    theirs=_their_rloo_advantages, mine=_our_rloo_advantages, wrt=(), value_only=True, stand_in=RLOO_STAND_IN)

# ---- options of data/frameworks/trl.toml with an `ours` that no check above executes, and why
# PPOConfig.kl_coef (KLInReward), PPOConfig.kl_estimator (kl_penalty), PPOConfig.cliprange (policy_loss): computed
#   inline in the rollout and update loops of the experimental PPOTrainer.train, which needs a policy, a reference,
#   a value model and generation.
# GRPOConfig.temperature (run_episodes): ours is the sampler that draws tokens at that temperature; TRL divides the
#   logits inside the forward, _get_per_token_logps_and_entropies, the one method these checks replace.
