"""GRPO for TinyAgent: settings, group-normalised advantages, the clipped surrogate, the update and the loop."""
import copy
import dataclasses

import torch

import agentrl as arl
from agentrl.gym import make_env, make_tasks
from agentrl.progress import progress
from agentrl.rollout import behavior_stats, collate, sample_groups, sample_step


@dataclasses.dataclass(frozen=True)
class RLConfig:
    """GRPO settings (the book's defaults); bad values raise ValueError naming the field and its allowed range."""
    seed: int = 0  # seeds torch's global RNG and the training generator (task draws, sampling, minibatches)
    lr: float = 5e-4  # Adam learning rate, > 0
    epochs: int = 1  # passes over each step's batch, >= 1
    minibatches: int = 2  # minibatches per pass (one optimizer step each), >= 1
    temperature: float = 1.0  # sampling temperature; training log-probs use logits / temperature too; > 0
    kl_coef: float = 0.0  # weight of the KL-to-reference term in the loss, >= 0 (0 = off)
    kl_kind: str = 'k3'  # KL estimator: 'k1', 'k2', 'k3' (rl_update) or chapter 10's 'k1+', 'k3+'
    clip_low: float = 0.2  # PPO clip below: ratio >= 1 - clip_low counts; in (0, 1)
    clip_high: float = 0.2  # PPO clip above: ratio <= 1 + clip_high counts; > 0
    max_grad_norm: float = 1.0  # gradient clipping by global norm, > 0
    group_size: int = 8  # episodes per task (one GRPO group), >= 2
    tasks_per_step: int = 8  # tasks drawn per step (8 x 8 = 64 episodes), >= 1
    max_redraws: int = 3  # extra task draws when no group of a step has a reward spread, >= 0
    max_turns: int = 6  # tool calls per episode before the episode is cut, >= 1
    max_call_words: int = 6  # words per tool call including ';', >= 2
    eval_every: int = 20  # held-out evaluation after every this many steps, >= 0 (0 = never)
    eval_group_size: int = 16  # attempts per held-out task in that evaluation, >= 1
    eval_seed: int = 0  # seed of the evaluation's own generator (the training streams are not touched)
    loss_variant: str = 'clip'  # policy loss: 'clip' (PPO), or Cui et al.'s covariance-aware 'clip_cov' / 'kl_cov'
    cov_fraction: float = 2e-4  # clip_cov/kl_cov: FRACTION (not percent) of a minibatch's policy tokens selected,
    #   in [0, 1]; the paper uses 2e-4 for Clip-Cov (r) and 2e-3 (7B) or 2e-4 (32B) for KL-Cov (k)
    cov_bounds: tuple = (1.0, 5.0)  # clip_cov: band [low, high] of the centred cross-product tokens are drawn from
    kl_cov_coef: float = 1.0  # kl_cov: weight of |logp - old_logp| on the selected tokens, >= 0 (paper: 1)

    def __post_init__(self):
        def check(name, ok, allowed):
            if not ok:
                raise ValueError(f'RLConfig.{name} must be {allowed}, got {getattr(self, name)!r}')

        for name in ('seed', 'epochs', 'minibatches', 'group_size', 'tasks_per_step', 'max_redraws', 'max_turns',
                     'max_call_words', 'eval_every', 'eval_group_size', 'eval_seed'):
            check(name, isinstance(getattr(self, name), int) and not isinstance(getattr(self, name), bool), 'an int')
        for name in ('lr', 'temperature', 'kl_coef', 'clip_low', 'clip_high', 'max_grad_norm'):
            value = getattr(self, name)
            check(name, isinstance(value, (int, float)) and not isinstance(value, bool) and value == value
                  and abs(value) != float('inf'), 'a finite number')
        check('lr', self.lr > 0, '> 0')
        check('epochs', self.epochs >= 1, '>= 1')
        check('minibatches', self.minibatches >= 1, '>= 1')
        check('temperature', self.temperature > 0, '> 0')
        check('kl_coef', self.kl_coef >= 0, '>= 0')
        try:
            arl.check_kl_kind(self.kl_kind)
        except ValueError as error:
            raise ValueError(f'RLConfig.kl_kind: {error}') from None
        check('clip_low', 0 < self.clip_low < 1, 'in (0, 1)')
        check('clip_high', self.clip_high > 0, '> 0')
        check('max_grad_norm', self.max_grad_norm > 0, '> 0')
        check('group_size', self.group_size >= 2, '>= 2')
        check('tasks_per_step', self.tasks_per_step >= 1, '>= 1')
        check('max_redraws', self.max_redraws >= 0, '>= 0')
        check('max_turns', self.max_turns >= 1, '>= 1')
        check('max_call_words', self.max_call_words >= 2, '>= 2')
        check('eval_every', self.eval_every >= 0, '>= 0')
        check('eval_group_size', self.eval_group_size >= 1, '>= 1')
        check('loss_variant', self.loss_variant in ('clip', 'clip_cov', 'kl_cov'), "one of 'clip', 'clip_cov', 'kl_cov'")
        check('cov_fraction', isinstance(self.cov_fraction, (int, float)) and 0 <= self.cov_fraction <= 1,
              'a fraction in [0, 1] (2e-4 means 0.02%)')
        check('cov_bounds', isinstance(self.cov_bounds, tuple) and len(self.cov_bounds) == 2
              and all(isinstance(v, (int, float)) for v in self.cov_bounds) and self.cov_bounds[0] <= self.cov_bounds[1],
              'a pair (low, high) with low <= high')
        check('kl_cov_coef', isinstance(self.kl_cov_coef, (int, float)) and self.kl_cov_coef >= 0, '>= 0')


class NonFiniteLossError(FloatingPointError):
    """The loss became NaN or infinite; the model was not updated with it."""


def compute_advantages(batch, cfg):
    """GRPO advantages [B]: each reward minus its group's mean, over the group's std; 0 for groups of equal rewards.

    Groups are cfg.group_size contiguous rows of batch['rewards'] [B].
    """
    rewards = batch['rewards']
    if len(rewards) % cfg.group_size:
        raise ValueError(f'{len(rewards)} rewards do not split into groups of group_size={cfg.group_size}')
    if len(rewards) == 0:
        return rewards.clone()
    grouped = rewards.view(-1, cfg.group_size)  # [G, group_size]
    centered = grouped - grouped.mean(dim=1, keepdim=True)
    return (centered / (grouped.std(dim=1, keepdim=True) + 1e-6)).view(-1)  # [B]


def policy_loss(logp, old_logp, advantages, mask, cfg):
    """PPO clipped surrogate: logp, old_logp, mask [B, T], advantages [B] -> (scalar loss, dict of float stats).

    ratio = exp(logp - old_logp) counts inside [1 - cfg.clip_low, 1 + cfg.clip_high]; the loss is the
    masked mean over policy tokens of -min(ratio * A, clip(ratio) * A). clip_frac is the share of
    policy tokens whose gradient the clip removes (A > 0 above the range, A < 0 below it).
    """
    arl.check_same_shape('logp', logp, 'old_logp', old_logp)
    arl.check_same_shape('logp', logp, 'mask', mask)
    adv = advantages[:, None]  # [B, 1]
    ratio = torch.exp(logp - old_logp)  # [B, T]
    clipped_ratio = ratio.clamp(1 - cfg.clip_low, 1 + cfg.clip_high)
    surrogate = torch.minimum(ratio * adv, clipped_ratio * adv)  # [B, T]
    selected = None
    if cfg.loss_variant != 'clip':  # Cui et al.: act on the tokens of largest centred cross-product
        cov = arl.centered_cross_product(logp.detach(), advantages, mask)  # [B, T]
        if cfg.loss_variant == 'clip_cov':  # detach a random share of the tokens inside the band
            draw = torch.Generator().manual_seed(cfg.seed * 1_000_003 + int((mask > 0).sum()))  # not a training stream
            selected = arl.clip_cov_selection(cov, mask, cfg.cov_fraction, cfg.cov_bounds, draw)
            surrogate = torch.where(selected, surrogate.detach(), surrogate)
        else:  # kl_cov: penalise |log pi - log pi_old| on the top share
            selected = arl.kl_cov_selection(cov, mask, cfg.cov_fraction)
            penalty = torch.where(selected, (logp - old_logp).abs(), torch.zeros_like(logp))
            surrogate = surrogate - cfg.kl_cov_coef * penalty
    loss = -arl.masked_mean(surrogate, mask)
    with torch.no_grad():
        above = (ratio > 1 + cfg.clip_high) & (adv > 0)
        below = (ratio < 1 - cfg.clip_low) & (adv < 0)
        stats = dict(pg_loss=loss.item(),
                     clip_frac=arl.masked_mean((above | below).float(), mask).item(),
                     clip_high_frac=arl.masked_mean(above.float(), mask).item(),
                     clip_low_frac=arl.masked_mean(below.float(), mask).item(),
                     ratio=arl.masked_mean(ratio, mask).item(),
                     approx_kl_old=arl.masked_mean(torch.expm1(old_logp - logp) - (old_logp - logp), mask).item())
        if selected is not None:
            stats['cov_selected_frac'] = arl.masked_mean(selected.float(), mask).item()
    return loss, stats


def rl_update(model, optimizer, batch, advantages, cfg, ref_model=None, generator=None):
    """Chapter 9's GRPO update on one batch: cfg.epochs x cfg.minibatches clipped-surrogate steps -> averaged stats.

    old_logp is recomputed with the model; log-probs use logits / cfg.temperature; the KL to ref_model
    (kl_penalty(cfg.kl_kind), masked mean) joins the loss when ref_model is given and cfg.kl_coef > 0.
    'entropy' is the full-vocabulary entropy over policy tokens of each minibatch before its step.
    """
    ids, mask = batch['ids'], batch['action_mask']  # [B, T], [B, T-1]
    use_kl = ref_model is not None and cfg.kl_coef
    if use_kl and cfg.kl_kind not in arl.KL_KINDS:
        raise ValueError(f"rl_update's KL term uses kl_penalty, which takes {', '.join(arl.KL_KINDS)}; got kl_kind="
                         f"{cfg.kl_kind!r} (the '+' kinds are chapter 10's kl_estimate)")
    with torch.no_grad():
        old_logp = arl.selected_log_probs(model(ids)[:, :-1] / cfg.temperature, ids[:, 1:])  # [B, T-1]
        ref_logp = None if ref_model is None else \
            arl.selected_log_probs(ref_model(ids)[:, :-1] / cfg.temperature, ids[:, 1:])
    logs = []
    for _ in range(cfg.epochs):
        for rows in torch.randperm(len(ids), generator=generator).chunk(cfg.minibatches):
            logits = model(ids[rows])[:, :-1] / cfg.temperature  # [b, T-1, V]
            logp = arl.selected_log_probs(logits, ids[rows, 1:])  # [b, T-1]
            loss, stats = policy_loss(logp, old_logp[rows], advantages[rows], mask[rows], cfg)
            with torch.no_grad():
                entropy = arl.masked_mean(arl.entropy_from_logits(logits), mask[rows])
            if use_kl:
                kl = arl.masked_mean(arl.kl_penalty(logp, ref_logp[rows], cfg.kl_kind), mask[rows])
                loss, stats['kl_ref'] = loss + cfg.kl_coef * kl, kl.item()
            if not torch.isfinite(loss):
                raise NonFiniteLossError(f'the loss is {loss.item()}; the model was not updated')
            optimizer.zero_grad()
            loss.backward()
            stats['grad_norm'] = float(torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.max_grad_norm))
            optimizer.step()
            stats['entropy'] = entropy.item()
            logs.append(stats)
    return {k: sum(s[k] for s in logs) / len(logs) for k in logs[0]}


def skipped_update(model, batch, cfg):
    """The stats of a step that makes no update: the batch's policy-token entropy (as rl_update logs it), grad_norm 0."""
    with torch.no_grad():
        logits = model(batch['ids'])[:, :-1] / cfg.temperature  # [B, T-1, V]
        return dict(entropy=arl.masked_mean(arl.entropy_from_logits(logits), batch['action_mask']).item(), grad_norm=0.0)


def heldout_pass_at_1(model, tok, cfg, tasks=None, attempts=None, seed=None):
    """Mean over held-out tasks of the share of `attempts` episodes (default cfg.eval_group_size) that pass.

    Samples at cfg.temperature with its own generator seeded `seed` (default cfg.eval_seed); it does not
    touch the model, torch's global RNG or any training generator.
    """
    tasks = make_tasks('heldout') if tasks is None else tasks
    eval_cfg = dataclasses.replace(cfg, group_size=attempts or cfg.eval_group_size)
    generator = torch.Generator().manual_seed(cfg.eval_seed if seed is None else seed)
    trajs = sample_groups(model, lambda: make_env(eval_cfg), tasks, tok, eval_cfg, generator)
    return sum(t.reward for t in trajs) / len(trajs)


def train_rl(model, tasks, tok, cfg, steps, eval_tasks=None):
    """Chapter 9's GRPO loop for `steps` steps -> history (one dict of stats per step).

    Every cfg.eval_every steps it records held-out pass@1 ('heldout_pass1', on eval_tasks, default
    make_tasks('heldout')) with its own generator, leaving the training random streams untouched.
    A NaN or infinite loss stops training with NonFiniteLossError naming the step. A step where no group has
    a reward spread (even after sample_step's redraws) updates on the whole draw, whose advantages are all 0, if
    the KL term is on (the KL acts alone), and makes no update otherwise ('signal' 0 in its record).
    """
    torch.manual_seed(cfg.seed)
    gen = torch.Generator().manual_seed(cfg.seed)
    env_factory = lambda: make_env(cfg)  # noqa: E731
    ref_model = copy.deepcopy(model).eval() if cfg.kl_coef else None  # frozen pi_ref = the starting policy
    optimizer = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    history = []
    for step in progress(range(steps), desc='GRPO'):
        kept, sampled = sample_step(model, env_factory, tasks, tok, cfg, gen)
        record = dict(step=step, **behavior_stats(sampled))
        record['signal'] = float(bool(kept))  # 0: no group had a reward spread; only the KL term acts
        batch = collate(kept or sampled, tok.pad_id)
        advantages = compute_advantages(batch, cfg)
        try:
            if kept or cfg.kl_coef:
                record.update(rl_update(model, optimizer, batch, advantages, cfg, ref_model, gen))
            else:  # nothing to learn from: no step (an Adam step on a zero gradient would still move the weights)
                record.update(skipped_update(model, batch, cfg))
        except NonFiniteLossError as error:
            raise NonFiniteLossError(f'GRPO step {step}: {error}') from error
        if cfg.eval_every and (step + 1) % cfg.eval_every == 0:
            record['heldout_pass1'] = heldout_pass_at_1(model, tok, cfg, eval_tasks)
        history.append(record)
    return history
