"""KL estimators and the regularisers of chapter 10: KL to a reference policy, entropy bonus."""
import copy
import dataclasses

import torch

import agentrl as arl
from agentrl.logprobs import check_same_shape

KL_KINDS = ('k1', 'k2', 'k3')
KL_ESTIMATE_KINDS = ('k1', 'k2', 'k3', 'k1+', 'k3+')


def kl_penalty(logp, ref_logp, kind):
    """Per-token estimate of KL(pi || ref) for tokens drawn from pi, l = ref_logp - logp: [...], [...] -> [...]; k1 = -l, k2 = l^2/2, k3 = e^l - 1 - l."""
    check_same_shape('logp', logp, 'ref_logp', ref_logp)
    log_ratio = ref_logp - logp  # l = log pi_ref(y) - log pi(y), y ~ pi
    if kind == 'k1':
        return -log_ratio
    if kind == 'k2':
        return 0.5 * log_ratio ** 2
    if kind == 'k3':
        return torch.expm1(log_ratio) - log_ratio
    raise ValueError(f'unknown KL kind {kind!r}; valid kinds: {", ".join(map(repr, KL_KINDS))}')


def check_kl_kind(kind):
    """Raise ValueError unless kind is one of kl_estimate's kinds."""
    if kind not in KL_ESTIMATE_KINDS:
        raise ValueError(f'unknown KL kind {kind!r}; valid kinds: {", ".join(map(repr, KL_ESTIMATE_KINDS))}')


def kl_estimate(logp, ref_logp, kind='k3'):
    """Per-token KL(pi_theta || pi_ref) estimate [B, T]; kind 'k1'|'k2'|'k3', or 'k1+'|'k3+' = value of k, gradient of k2."""
    arl.check_kl_kind(kind)
    if kind.endswith('+'):
        value = arl.kl_penalty(logp, ref_logp, kind[:-1])
        grad = arl.kl_penalty(logp, ref_logp, 'k2')
        return grad - grad.detach() + value.detach()  # straight-through: forward value, k2 gradient
    return arl.kl_penalty(logp, ref_logp, kind)


def entropy_bonus(logits, mask):
    """Mean full-vocabulary entropy over policy positions: logits [B, T, V], mask [B, T] -> differentiable scalar."""
    return arl.masked_mean(arl.entropy_from_logits(logits), mask)


def regularized_update(model, optimizer, batch, advantages, cfg, ref_model=None, generator=None, entropy_coef=0.0):
    """arl.rl_update with an entropy bonus and the KL term computed by kl_estimate(cfg.kl_kind) -> dict of stats."""
    ids, mask = batch['ids'], batch['action_mask']  # [B, T], [B, T-1]
    with torch.no_grad():
        old_logp = arl.selected_log_probs(model(ids)[:, :-1] / cfg.temperature, ids[:, 1:])
        ref_logp = None if ref_model is None else \
            arl.selected_log_probs(ref_model(ids)[:, :-1] / cfg.temperature, ids[:, 1:])
    logs = []
    for _ in range(cfg.epochs):
        for rows in torch.randperm(len(ids), generator=generator).chunk(cfg.minibatches):
            logits = model(ids[rows])[:, :-1] / cfg.temperature  # [b, T-1, V]
            logp = arl.selected_log_probs(logits, ids[rows, 1:])
            loss, stats = arl.policy_loss(logp, old_logp[rows], advantages[rows], mask[rows], cfg)
            entropy = arl.entropy_bonus(logits, mask[rows])
            loss = loss - entropy_coef * entropy
            if ref_logp is not None and cfg.kl_coef:
                kl = arl.masked_mean(arl.kl_estimate(logp, ref_logp[rows], cfg.kl_kind), mask[rows])
                loss, stats['kl_ref'] = loss + cfg.kl_coef * kl, kl.item()
            optimizer.zero_grad()
            loss.backward()
            stats['grad_norm'] = float(torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.max_grad_norm))
            optimizer.step()
            stats['entropy'] = entropy.item()
            logs.append(stats)
    return {k: sum(s[k] for s in logs) / len(logs) for k in logs[0]}


def sequence_kl(batch, ref_model, temperature=1.0):
    """Sum over policy tokens of k1 = log pi_old - log pi_ref, from the sampler's log-probs -> [B]."""
    ids, mask = batch['ids'], batch['action_mask']
    with torch.no_grad():
        ref_logp = arl.selected_log_probs(ref_model(ids)[:, :-1] / temperature, ids[:, 1:])
    return ((batch['sample_logp'] - ref_logp) * mask).sum(-1)


def adapt_kl_coef(kl_coef, kl, kl_target):
    """Ziegler et al.'s proportional controller: beta * (1 + clip(KL / target - 1, -0.2, 0.2) / 10)."""
    return kl_coef * (1 + min(max(kl / kl_target - 1, -0.2), 0.2) / 10)


def train_regularized(model, tasks, tok, cfg, steps, entropy_coef=0.0, kl_in_reward=False, ref_model=None,
                      kl_target=None, probe=None):
    """arl.train_rl with an entropy bonus, KL in the loss or (kl_in_reward) in the reward, optionally an adaptive KL
    coefficient steered towards kl_target, and an optional probe(model, batch, advantages) -> after(model) -> dict.
    When no group has a reward spread the regularisers act alone on the whole draw (advantages 0)."""
    if kl_target is not None and (kl_target <= 0 or not cfg.kl_coef or kl_in_reward):
        raise ValueError(f'kl_target={kl_target} needs kl_target > 0, a KL in the loss and a starting kl_coef > 0 '
                         f'(got kl_coef={cfg.kl_coef}, kl_in_reward={kl_in_reward})')
    torch.manual_seed(cfg.seed)
    gen = torch.Generator().manual_seed(cfg.seed)
    env_factory = lambda: arl.make_env(cfg)  # noqa: E731
    if cfg.kl_coef and ref_model is None:
        ref_model = copy.deepcopy(model).eval()  # frozen pi_ref = the starting policy
    optimizer = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    history = []
    for step in range(steps):
        kept, sampled = arl.sample_step(model, env_factory, tasks, tok, cfg, gen)
        record = dict(step=step, **arl.behavior_stats(sampled))
        record['signal'] = float(bool(kept))  # 0: no group had a reward spread; the regularisers act alone
        batch = arl.collate(kept or sampled, tok.pad_id)
        batch['n_turns'] = torch.tensor([float(t.info['n_turns']) for t in kept or sampled])
        if kl_in_reward and cfg.kl_coef:  # r_i - beta * sum_t k1_t, then advantages
            seq_kl = arl.sequence_kl(batch, ref_model, cfg.temperature)
            batch['rewards'], record['kl_seq'] = batch['rewards'] - cfg.kl_coef * seq_kl, seq_kl.mean().item()
        advantages = arl.compute_advantages(batch, cfg)
        after = probe(model, batch, advantages) if probe else None  # measurements that must not touch the RNG
        if kept or entropy_coef or cfg.kl_coef:
            record.update(arl.regularized_update(model, optimizer, batch, advantages, cfg,
                                                 None if kl_in_reward else ref_model, gen, entropy_coef))
        else:  # nothing to learn from: no step (an Adam step on a zero gradient would still move the weights)
            record.update(arl.skipped_update(model, batch, cfg))
        if after:
            record.update(after(model))
        if kl_target is not None:  # adaptive beta for the next step
            record['kl_coef'] = cfg.kl_coef
            cfg = dataclasses.replace(cfg, kl_coef=arl.adapt_kl_coef(cfg.kl_coef, record['kl_ref'], kl_target))
        history.append(record)
    return history


def centered_cross_product(logp, advantages, mask):
    """Cui et al.'s per-token Cov(y_i) = (logp_i - mean logp) * (A_i - mean A), means over the batch's policy tokens:
    logp, mask [B, T], advantages [B] -> [B, T] (0 off the mask)."""
    arl.check_same_shape('logp', logp, 'mask', mask)
    adv = advantages[:, None].expand_as(logp)  # [B, T]: each token carries its episode's advantage
    centred = (logp - arl.masked_mean(logp, mask)) * (adv - arl.masked_mean(adv, mask))
    return torch.where(mask > 0, centred, torch.zeros_like(centred))


def clip_cov_selection(cov, mask, fraction, bounds, generator):
    """Clip-Cov's detached tokens, bool [B, T]: int(fraction * N) of the N policy tokens, drawn uniformly (with
    generator) among those with bounds[0] <= cov <= bounds[1]. fraction is a fraction (2e-4 = 0.02%), not a percent."""
    low, high = bounds
    flat_mask = (mask > 0).flatten()
    eligible = (flat_mask & (cov.flatten() >= low) & (cov.flatten() <= high)).nonzero().squeeze(-1)
    count = min(int(fraction * int(flat_mask.sum())), len(eligible))
    chosen = eligible[torch.randperm(len(eligible), generator=generator)[:count]]
    selected = torch.zeros_like(flat_mask)
    selected[chosen] = True
    return selected.view_as(mask)


def kl_cov_selection(cov, mask, fraction):
    """KL-Cov's penalised tokens, bool [B, T]: the int(fraction * N) policy tokens of largest cov, N = number of policy
    tokens. fraction is a fraction (2e-3 = 0.2%), not a percent."""
    flat_mask = (mask > 0).flatten()
    count = int(fraction * int(flat_mask.sum()))
    scores = torch.where(flat_mask, cov.flatten(), torch.full_like(cov.flatten(), -float('inf')))
    selected = torch.zeros_like(flat_mask)
    selected[torch.topk(scores, count).indices] = True
    return selected.view_as(mask)
