"""What the RL frameworks ship beyond the chapter, as plug-ins of the one GRPO engine (agentrl.substrate.grpo).

The math lives in agentrl.core (off_policy, aggregation, entropy_control); each class here only decides where in
the engine's step it acts:
  GSPO's sequence ratio                 SequenceRatioLoss      reshape_surrogate
  CISPO's capped, constant weight       CappedWeightLoss       reshape_surrogate
  update only high-entropy tokens       TopEntropyUpdate       begin_minibatch, reshape_surrogate
  entropy coefficient with a target     EntropyTarget          extend_loss, end_step (a controller)
  a sampler that is not the trainer     SamplerCorrection      shape_rewards, begin_minibatch, reshape_surrogate
Two options are engine settings rather than plug-ins, because every term reads them: RLConfig.loss_agg (with
loss_agg_horizon) and RLConfig.sample_temperature; and one is an option of the KL term itself
(ReferenceKL's weighting, chapter_plugins' kl_weighting).
"""
import math

import torch

from agentrl.ch10.regularizers import EntropyBonus
from agentrl.core.entropy_control import adapt_entropy_coef, top_entropy_mask
from agentrl.core.logprobs import entropy_from_logits, masked_mean
from agentrl.core.off_policy import (SAMPLER_MODES, cispo_surrogate, gspo_surrogate, sampler_weights,
                                     sequence_log_ratio)
from agentrl.substrate.grpo import Plugin

SURROGATES = ('gspo', 'cispo')
# The settings framework_plugins reads, each with what it means; RunSpec.options names only these.
FRAMEWORK_OPTIONS = {
    'surrogate': "'gspo' (one ratio per sequence) or 'cispo' (a capped constant weight on log pi)",
    'surrogate_clip': "the surrogate's own clip as a pair (low, high): GSPO's sequence clip, CISPO's weight cap",
    'top_entropy': 'the share of each minibatch\'s policy tokens, highest entropy first, that keep their gradient',
    'entropy_target': 'the entropy the bonus coefficient is steered towards',
    'entropy_step': "the controller's step per training step",
    'entropy_max': 'the largest coefficient the controller may reach',
    'sampler_correction': f"one of {', '.join(SAMPLER_MODES)}, or 'measure' (log the gap, correct nothing)",
    'sampler_threshold': 'the cap (truncate) or cut-off (mask) of the sampler weights',
}


def _number(value, name, low, high, low_open=True):
    """value if it is a finite number in (low, high] (or [low, high]), else a ValueError naming `name`."""
    inside = value > low if low_open else value >= low
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or not inside or value > high:
        bracket = '(' if low_open else '['
        raise ValueError(f'{name} must be a finite number in {bracket}{low}, {high}], got {value!r}')
    return value


def _clip_pair(value, name):
    """A (low, high) pair of finite numbers in (0, 1] and (0, inf), else a ValueError naming `name`."""
    if not (isinstance(value, tuple) and len(value) == 2):
        raise ValueError(f'{name} must be a pair (low, high), got {value!r}')
    return _number(value[0], f'{name}[0]', 0, 1), _number(value[1], f'{name}[1]', 0, math.inf)


class SequenceRatioLoss(Plugin):
    """GSPO: the clipped objective of each sequence's length-normalised ratio, given to every token of the sequence.

    Aggregated by 'seq-mean-token-mean' (RLConfig.loss_agg) it is GSPO's per-sequence mean; the clip (low, high)
    is on the sequence ratio, whose spread is far smaller than a token's (the paper: 3e-4, 4e-4)."""

    def __init__(self, clip):
        self.low, self.high = clip

    def reshape_surrogate(self, surrogate, logp, old_logp, advantages, mask, stats):
        per_sequence = gspo_surrogate(logp, old_logp, advantages, mask, self.low, self.high)  # [b]
        with torch.no_grad():  # the sequences whose whole gradient the clip removes
            ratio = torch.exp(sequence_log_ratio(logp, old_logp, mask))  # [b]
            silenced = ((ratio > 1 + self.high) & (advantages > 0)) | ((ratio < 1 - self.low) & (advantages < 0))
            stats['seq_clip_frac'] = silenced.float().mean().item()
        return per_sequence[:, None].expand_as(logp)  # [b, T]


class CappedWeightLoss(Plugin):
    """CISPO: every token keeps a gradient, weighted by its ratio clipped to [1 - low, 1 + high] and held constant."""

    def __init__(self, clip):
        self.low, self.high = clip

    def reshape_surrogate(self, surrogate, logp, old_logp, advantages, mask, stats):
        with torch.no_grad():
            ratio = torch.exp(logp - old_logp)
            stats['capped_frac'] = masked_mean(((ratio > 1 + self.high) | (ratio < 1 - self.low)).float(), mask).item()
        return cispo_surrogate(logp, old_logp, advantages, self.low, self.high)


class TopEntropyUpdate(Plugin):
    """The policy gradient of only the `keep` share of a minibatch's policy tokens whose entropy is highest, the
    entropy taken from the minibatch's own forward pass; the other tokens' surrogate is zeroed (the loss still
    divides by all policy tokens, as TRL's top_entropy_quantile does)."""

    def __init__(self, keep):
        self.keep, self.kept = keep, None

    def begin_minibatch(self, rows, logits, logp, old_logp, mask):
        with torch.no_grad():
            self.kept = top_entropy_mask(entropy_from_logits(logits), mask, self.keep)  # [b, T]

    def reshape_surrogate(self, surrogate, logp, old_logp, advantages, mask, stats):
        stats['top_entropy_frac'] = masked_mean(self.kept.float(), mask).item()
        return torch.where(self.kept, surrogate, torch.zeros_like(surrogate))


class EntropyTarget(EntropyBonus):
    """An entropy bonus whose coefficient chases a target entropy (Skywork-OR1's controller, adapt_entropy_coef).

    The coefficient starts at 0. After each step the controller reads the entropy the step logged: at or below the
    target, the coefficient grows by `step` and the bonus is on for the next step; above it, the coefficient
    shrinks by `step` (not below 0, not above `highest`) and the bonus is off. The step's record gets the
    coefficient it used ('entropy_coef')."""

    def __init__(self, target, step, highest):
        super().__init__(0.0)
        self.target, self.step, self.highest = target, step, highest
        self.on = False

    def extend_loss(self, loss, rows, logits, logp, mask, stats):
        extended = super().extend_loss(loss, rows, logits, logp, mask, stats)
        return extended if self.on else loss

    def end_step(self, record):
        record['entropy_coef'] = self.coef if self.on else 0.0
        self.on = record['entropy'] <= self.target
        self.coef = adapt_entropy_coef(self.coef, record['entropy'], self.target, self.step, 0.0, self.highest)


class SamplerCorrection(Plugin):
    """Weights the surrogate by sampler_weights(pi_old / pi_sampler, mode, threshold) when the rollouts come from a
    sampler other than the trainer (RLConfig.sample_temperature); mode 'measure' changes nothing.

    Either way each minibatch logs the gap: 'sampler_kl', the mean over policy tokens of log pi_sampler - log
    pi_old (k1 of KL(sampler || trainer) on the sampler's tokens), and 'sampler_weight', the weights' mean."""

    def __init__(self, mode, threshold):
        self.mode, self.threshold = mode, threshold
        self.sample_logp = self.rows = None

    def shape_rewards(self, batch, record):
        self.sample_logp = batch['sample_logp']  # [B, T-1]: the sampler's log-probs, in the update's row order

    def begin_minibatch(self, rows, logits, logp, old_logp, mask):
        self.rows = rows

    def reshape_surrogate(self, surrogate, logp, old_logp, advantages, mask, stats):
        sampled = self.sample_logp[self.rows]  # [b, T-1]
        stats['sampler_kl'] = masked_mean(sampled - old_logp, mask).item()
        if self.mode == 'measure':
            return surrogate
        weights = sampler_weights(old_logp, sampled, mask, self.mode, self.threshold)  # [b, T-1], constant
        stats['sampler_weight'] = masked_mean(weights, mask).item()
        return surrogate * weights


def check_options(options):
    """options (a dict of FRAMEWORK_OPTIONS) checked for unknown names, bad values and missing partners -> the dict."""
    unknown = sorted(set(options) - set(FRAMEWORK_OPTIONS))
    if unknown:
        raise ValueError(f'unknown framework option {", ".join(unknown)}; allowed: {", ".join(FRAMEWORK_OPTIONS)}')
    surrogate = options.get('surrogate')
    if surrogate is not None and surrogate not in SURROGATES:
        raise ValueError(f"surrogate must be one of {', '.join(map(repr, SURROGATES))}, got {surrogate!r}")
    if ('surrogate' in options) != ('surrogate_clip' in options):
        raise ValueError('surrogate and surrogate_clip go together: a surrogate needs its own clip (low, high)')
    if 'surrogate_clip' in options:
        _clip_pair(options['surrogate_clip'], 'surrogate_clip')
    if 'top_entropy' in options:
        _number(options['top_entropy'], 'top_entropy', 0, 1)
    steering = {'entropy_target', 'entropy_step', 'entropy_max'} & set(options)
    if steering and len(steering) < 3:
        raise ValueError('entropy_target, entropy_step and entropy_max go together; got only '
                         f'{", ".join(sorted(steering))}')
    for name in steering:
        _number(options[name], name, 0, math.inf)
    correction = options.get('sampler_correction')
    if correction is not None and correction not in (*SAMPLER_MODES, 'measure'):
        raise ValueError(f"sampler_correction must be one of {', '.join(SAMPLER_MODES)} or 'measure', "
                         f'got {correction!r}')
    if correction not in (None, 'measure') and 'sampler_threshold' not in options:
        raise ValueError(f'sampler_correction {correction!r} needs a sampler_threshold')
    if 'sampler_threshold' in options:
        if correction in (None, 'measure'):
            raise ValueError("sampler_threshold means nothing without a sampler_correction mode other than 'measure'")
        _number(options['sampler_threshold'], 'sampler_threshold', 0, math.inf)
    return options


def framework_plugins(options):
    """The plug-ins for a dict of FRAMEWORK_OPTIONS, surrogate first (it replaces PPO's surrogate, the others
    reshape what it returns)."""
    options = check_options(dict(options))
    plugins = []
    if options.get('surrogate') == 'gspo':
        plugins.append(SequenceRatioLoss(_clip_pair(options['surrogate_clip'], 'surrogate_clip')))
    elif options.get('surrogate') == 'cispo':
        plugins.append(CappedWeightLoss(_clip_pair(options['surrogate_clip'], 'surrogate_clip')))
    if 'sampler_correction' in options:
        plugins.append(SamplerCorrection(options['sampler_correction'], options.get('sampler_threshold')))
    if 'top_entropy' in options:
        plugins.append(TopEntropyUpdate(options['top_entropy']))
    if 'entropy_target' in options:
        plugins.append(EntropyTarget(options['entropy_target'], options['entropy_step'], options['entropy_max']))
    return plugins
