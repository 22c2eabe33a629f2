"""Chapter 10's regularisers as plug-ins of the one GRPO engine (agentrl.substrate.grpo), and the chapter's API.

Each regulariser is a small class using the engine's hooks:
  KL in the loss, any estimator      ReferenceKL(estimator=kl_estimate)   extend_loss
  KL in the reward (section 10.4)    KLInReward                           shape_rewards
  entropy bonus                      EntropyBonus                         extend_loss
  adaptive KL coefficient            AdaptiveKL                           end_step (a controller)
  Clip-Cov / KL-Cov (Cui et al.)     CovariancePolicyLoss                 reshape_surrogate
`train_regularized` and `regularized_update` keep the chapter's signatures and only choose plug-ins.
"""
import copy
import math
import warnings

import torch

from agentrl.core.kl import kl_estimate
from agentrl.core.logprobs import check_same_shape, entropy_from_logits, masked_mean, selected_log_probs
from agentrl.substrate.grpo import Plugin, ReferenceKL, clipped_sides, rl_update, token_reduce, train_rl

COV_VARIANTS = ('clip_cov', 'kl_cov')


def entropy_bonus(logits, mask):
    """Entropy of the whole next-token distribution, averaged over the policy's positions, with its gradient.

    logits [B, T, V], mask [B, T] -> scalar tensor.
    """
    per_position = entropy_from_logits(logits)  # [B, T]
    return masked_mean(per_position, mask)


def sequence_kl(batch, ref_model, temperature=1.0):
    """Per-episode k1 to the reference summed over policy tokens, from the sampler's own log-probs -> [B]."""
    tokens = batch['ids']  # [B, T]
    with torch.no_grad():
        ref_logits = ref_model(tokens)[:, :-1] / temperature  # [B, T-1, V]
        ref_logp = selected_log_probs(ref_logits, tokens[:, 1:])  # [B, T-1]
    gap = (batch['sample_logp'] - ref_logp) * batch['action_mask']  # log pi_old - log pi_ref on policy tokens
    return gap.sum(-1)


def adapt_kl_coef(kl_coef, kl, kl_target):
    """One step of the proportional controller of Ziegler et al. (2019): move beta by at most 2% towards the target.

    error = clip(KL / target - 1, -0.2, 0.2); beta <- beta * (1 + error / 10).
    """
    error = min(max(kl / kl_target - 1, -0.2), 0.2)
    return kl_coef * (1 + error / 10)


class EntropyBonus(Plugin):
    """loss - coef * entropy_bonus: rewards keeping the next-token distribution spread out. The per-position
    entropies are reduced as cfg.loss_agg says (entropy_bonus's masked mean by default)."""
    acts_alone = True  # with no reward signal the bonus alone pushes towards the uniform policy

    def __init__(self, coef):
        self.coef, self.cfg = coef, None

    def prepare(self, ids, cfg, widths=None):
        self.cfg = cfg

    def extend_loss(self, loss, rows, logits, logp, mask, stats):
        bonus = token_reduce(entropy_from_logits(logits), mask, self.cfg)  # entropy_bonus unless cfg.loss_agg says
        stats['entropy'] = bonus.item()
        return loss - self.coef * bonus


class KLInReward(Plugin):
    """Section 10.4's placement: each episode's reward becomes r - coef * sequence_kl, before the advantages."""
    acts_alone = True  # shaped rewards differ within a group even when the task rewards do not
    replaces_reference_kl = True  # the KL lives in the reward, so the loss gets none

    def __init__(self, reference, coef):
        self.reference, self.coef = reference, coef

    def begin(self, model, cfg):
        if self.reference is None:
            self.reference = copy.deepcopy(model).eval()
        self.temperature = cfg.temperature

    def shape_rewards(self, batch, record):
        per_episode = sequence_kl(batch, self.reference, self.temperature)  # [B]
        batch['rewards'] = batch['rewards'] - self.coef * per_episode
        record['kl_seq'] = per_episode.mean().item()


class AdaptiveKL(Plugin):
    """After each step, steer a ReferenceKL's coefficient towards a target per-token KL (adapt_kl_coef)."""

    def __init__(self, kl_term, target):
        self.kl_term, self.target = kl_term, target

    def end_step(self, record):
        record['kl_coef'] = self.kl_term.coef  # the coefficient this step used
        self.kl_term.coef = adapt_kl_coef(self.kl_term.coef, record['kl_ref'], self.target)


def centered_cross_product(logp, advantages, mask):
    """Cui et al.'s per-token covariance term (logp - mean logp) * (A - mean A), means over policy tokens.

    logp, mask [B, T], advantages [B] -> [B, T], zero off the mask.
    """
    check_same_shape('logp', logp, 'mask', mask)
    token_adv = advantages[:, None].expand_as(logp)  # [B, T]: every token carries its episode's advantage
    product = (logp - masked_mean(logp, mask)) * (token_adv - masked_mean(token_adv, mask))
    return torch.where(mask > 0, product, torch.zeros_like(product))


def treated_count(fraction, n_policy):
    """How many of a minibatch's n_policy tokens Clip-Cov or KL-Cov treats: floor(fraction * N), but at least one
    (as the authors' code and verl do), and none when there is no policy token at all."""
    return max(int(fraction * n_policy), 1) if n_policy > 0 else 0


def clip_cov_selection(cov, mask, fraction, bounds, generator, silenced=None):
    """Clip-Cov's tokens to detach, bool [B, T]: treated_count(fraction, N) of the N policy tokens, drawn uniformly
    with `generator` among those whose cov lies strictly inside (bounds[0], bounds[1]) and whose gradient the PPO clip
    has not already removed (`silenced`, bool [B, T]; None: no token is). Fewer if fewer are eligible."""
    low, high = bounds
    on_policy = (mask > 0).flatten()  # [B*T]
    values = cov.flatten()
    eligible = on_policy & (values > low) & (values < high)
    if silenced is not None:
        eligible &= ~silenced.flatten()
    candidates = eligible.nonzero().squeeze(-1)
    wanted = min(treated_count(fraction, int(on_policy.sum())), len(candidates))
    picked = candidates[torch.randperm(len(candidates), generator=generator)[:wanted]]
    chosen = torch.zeros_like(on_policy)
    chosen[picked] = True
    return chosen.view_as(mask)


def kl_cov_selection(cov, mask, fraction):
    """KL-Cov's penalised tokens, bool [B, T]: the treated_count(fraction, N) policy tokens of largest cov (N policy
    tokens). fraction is a fraction (2e-3 = 0.2%), not a percent."""
    on_policy = (mask > 0).flatten()  # [B*T]
    ranked = torch.where(on_policy, cov.flatten(), torch.full_like(cov.flatten(), -float('inf')))
    chosen = torch.zeros_like(on_policy)
    chosen[torch.topk(ranked, treated_count(fraction, int(on_policy.sum()))).indices] = True
    return chosen.view_as(mask)


def is_finite_number(value):
    """True for an int or float (not a bool) that is neither NaN nor infinite."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


class CovariancePolicyLoss(Plugin):
    """Cui et al. (2025): act on the few tokens whose centred cross-product of log-prob and advantage is largest.

    variant 'clip_cov': the PPO surrogate, with the gradient of treated_count(fraction, N) tokens stopped; they are
    drawn among the tokens whose cov lies strictly inside `bounds` and which the PPO clip has not silenced already.
    variant 'kl_cov': the unclipped surrogate ratio * A (the paper's eq. 14 has no clip), minus
    kl_coef * |logp - old_logp| on the treated_count(fraction, N) tokens of largest cov.
    fraction is a FRACTION of a minibatch's N policy tokens (the paper: 2e-4 for Clip-Cov, 2e-3 or 2e-4 for KL-Cov);
    at least one token is treated, as in the authors' code. A minibatch where no token can be treated warns, once
    per run.
    """

    def __init__(self, variant, fraction=2e-4, bounds=(1.0, 5.0), kl_coef=1.0):
        if variant not in COV_VARIANTS:
            raise ValueError(f'policy-loss variant must be one of {", ".join(map(repr, COV_VARIANTS))}, got {variant!r}')
        if not (is_finite_number(fraction) and 0 < fraction <= 1):
            raise ValueError(f'cov_fraction must be a number in (0, 1] (2e-4 means 0.02%), got {fraction!r}')
        if not (isinstance(bounds, tuple) and len(bounds) == 2 and all(is_finite_number(b) for b in bounds)
                and bounds[0] < bounds[1]):
            raise ValueError(f'cov_bounds must be a pair (low, high) of finite numbers with low < high, got {bounds!r}')
        if not (is_finite_number(kl_coef) and kl_coef >= 0):
            raise ValueError(f'kl_cov_coef must be a finite number >= 0, got {kl_coef!r}')
        self.variant, self.fraction, self.bounds, self.kl_coef = variant, fraction, bounds, kl_coef
        self.cfg, self.warned = None, False

    def begin(self, model, cfg):
        self.cfg, self.warned = cfg, False  # cfg: the run's seed (Clip-Cov's draws) and PPO clip range

    def reshape_surrogate(self, surrogate, logp, old_logp, advantages, mask, stats):
        if self.cfg is None:
            raise RuntimeError('CovariancePolicyLoss needs begin(model, cfg) before its first minibatch: it reads '
                               'the seed and the clip range of cfg')
        cov = centered_cross_product(logp.detach(), advantages, mask)  # [b, T]
        n_policy = int((mask > 0).sum())
        if self.variant == 'clip_cov':
            silenced = torch.logical_or(*clipped_sides(torch.exp(logp.detach() - old_logp), advantages, self.cfg))
            # its own generator, seeded by the run and the minibatch: the training streams are not touched
            draw = torch.Generator().manual_seed(self.cfg.seed * 1_000_003 + n_policy)
            chosen = clip_cov_selection(cov, mask, self.fraction, self.bounds, draw, silenced)
            surrogate = torch.where(chosen, surrogate.detach(), surrogate)
        else:
            chosen = kl_cov_selection(cov, mask, self.fraction)
            drift = torch.where(chosen, (logp - old_logp).abs(), torch.zeros_like(logp))
            surrogate = torch.exp(logp - old_logp) * advantages[:, None] - self.kl_coef * drift  # [b, T]
        if not chosen.any() and not self.warned:
            self.warned = True
            where = (f'none of them is outside the PPO clip with a score strictly inside {self.bounds}'
                     if self.variant == 'clip_cov' else 'there is none')
            warnings.warn(f'{self.variant} treated no token in a minibatch: cov_fraction {self.fraction:g} of '
                          f'{n_policy} policy tokens asks for {treated_count(self.fraction, n_policy)}, but {where} '
                          '(said once per run)', stacklevel=2)
        with torch.no_grad():
            stats['cov_selected_frac'] = masked_mean(chosen.float(), mask).item()
        return surrogate


def chapter_plugins(cfg, entropy_coef=0.0, kl_in_reward=False, ref_model=None, kl_target=None, policy_loss=None,
                    kl_weighting='none'):
    """The plug-ins for one of the chapter's settings, in the order their loss terms are added."""
    if not is_finite_number(entropy_coef) or entropy_coef < 0:
        raise ValueError(f'entropy_coef must be a finite number >= 0, got {entropy_coef!r}')
    if kl_target is not None and (not is_finite_number(kl_target) or kl_target <= 0 or not cfg.kl_coef or kl_in_reward):
        raise ValueError(f'kl_target={kl_target} needs kl_target > 0, a KL in the loss and a starting kl_coef > 0 '
                         f'(got kl_coef={cfg.kl_coef}, kl_in_reward={kl_in_reward})')
    if kl_weighting != 'none' and (not cfg.kl_coef or kl_in_reward):
        raise ValueError(f'kl_weighting={kl_weighting!r} weights a KL in the loss: it needs kl_coef > 0 and no '
                         f'kl_in_reward (got kl_coef={cfg.kl_coef}, kl_in_reward={kl_in_reward})')
    plugins = []
    if policy_loss:
        plugins.append(CovariancePolicyLoss(**policy_loss))
    if entropy_coef:
        plugins.append(EntropyBonus(entropy_coef))
    if cfg.kl_coef and kl_in_reward:
        plugins.append(KLInReward(ref_model, cfg.kl_coef))
    elif cfg.kl_coef:
        kl_term = ReferenceKL(ref_model, cfg.kl_coef, cfg.kl_kind, estimator=kl_estimate, weighting=kl_weighting)
        plugins.append(kl_term)
        if kl_target is not None:
            plugins.append(AdaptiveKL(kl_term, kl_target))
    return plugins


def regularized_update(model, optimizer, batch, advantages, cfg, ref_model=None, generator=None, entropy_coef=0.0):
    """The engine's update with an entropy bonus and a KL to ref_model estimated by kl_estimate(cfg.kl_kind)."""
    terms = [EntropyBonus(entropy_coef)] if entropy_coef else []
    if ref_model is not None and cfg.kl_coef:
        terms.append(ReferenceKL(ref_model, cfg.kl_coef, cfg.kl_kind, estimator=kl_estimate))
    return rl_update(model, optimizer, batch, advantages, cfg, generator=generator, plugins=terms)


def train_regularized(model, tasks, tok, cfg, steps, entropy_coef=0.0, kl_in_reward=False, ref_model=None):
    """Chapter 9's GRPO loop with chapter 10's two regularisers -> history (one dict per step).

    entropy_coef: the entropy bonus's coefficient. cfg.kl_coef > 0 adds a KL to ref_model (default: a frozen copy
    of the starting policy), estimated by cfg.kl_kind in the loss, or charged to each episode's reward when
    kl_in_reward. With both at zero this is exactly train_rl. The package's other options (an adaptive
    coefficient, Cui et al.'s covariance losses, what the frameworks ship) are chosen by chapter_plugins and
    run through train_rl by agentrl.ch10.experiments.
    """
    return train_rl(model, tasks, tok, cfg, steps, plugins=chapter_plugins(cfg, entropy_coef, kl_in_reward, ref_model))
