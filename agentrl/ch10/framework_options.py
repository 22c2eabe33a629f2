"""The RL frameworks' KL, aggregation, ratio and sampler options, computed exactly on policies small enough to
enumerate: what each option's expected gradient is, set against the gradient it claims to follow.

Two toy policies carry every check. A categorical over K outcomes (one token) for the KL estimators, and a tabular
two-token policy (K first tokens, K second tokens after each) wherever sequences matter: ratios of whole sequences,
rewards given to a sequence, a sampler that draws sequences. Every expectation is a weighted sum over all outcomes;
nothing is sampled, so an error printed here is a bias, never noise.
"""
import torch

from agentrl.core import off_policy
from agentrl.core.exact import expected_off_policy_kl, kl_grads, two_token_kl_grads, two_token_log_probs

F64 = torch.float64


def relative_error(grad, truth):
    """|grad - truth| / |truth| (Euclidean norms)."""
    return ((grad - truth).norm() / truth.norm()).item()


def categorical_kl(log_a, log_b):
    """KL(a || b) of two categoricals given as log-probs [K]."""
    return (log_a.exp() * (log_a - log_b)).sum().item()


def policies_apart(k, steps, seed=0):
    """A fixed reference, a fixed pi_old and, for each size in `steps`, a pi moved that far from pi_old along one
    random direction of logit space -> (ref_logp [K], old_logp [K], [theta [K] leaf per step])."""
    gen = torch.Generator().manual_seed(seed)
    start = torch.randn(k, generator=gen, dtype=F64)
    direction = torch.randn(k, generator=gen, dtype=F64)
    ref = torch.randn(k, generator=gen, dtype=F64).log_softmax(-1)
    return ref, start.log_softmax(-1), [(start + step * direction).requires_grad_() for step in steps]


def off_policy_kl_table(steps=(0.0, 0.25, 0.5, 1.0, 2.0), kinds=('k1', 'k2', 'k3', 'k3+'),
                        weightings=off_policy.KL_WEIGHTINGS, k=8, seed=0):
    """For each distance of pi from pi_old and each (kind, weighting): the relative error of the expected gradient
    against the reverse KL's and the forward KL's -> list of dicts (step, kl_from_old, kind, weighting,
    reverse_error, forward_error, value, kl)."""
    ref, old, thetas = policies_apart(k, steps, seed)
    rows = []
    for step, theta in zip(steps, thetas):
        reverse, forward = kl_grads(theta, ref)
        logp = theta.detach().log_softmax(-1)
        for kind in kinds:
            for weighting in weightings:
                value, grad = expected_off_policy_kl(theta, old, ref, kind, weighting)
                rows.append(dict(step=step, kl_from_old=categorical_kl(logp, old), kind=kind, weighting=weighting,
                                 reverse_error=relative_error(grad, reverse), forward_error=relative_error(grad, forward),
                                 value=value, kl=categorical_kl(logp, ref)))
    return rows


def two_token_policy(k=4, seed=1, reference_shift=1.0):
    """A two-token tabular policy (first [K], second [K, K] logits, both leaves) and a reference whose logits differ
    by reference_shift times unit noise -> (first, second, (ref_first [K, 1], ref_second [K, K]))."""
    gen = torch.Generator().manual_seed(seed)
    first = torch.randn(k, generator=gen, dtype=F64)
    second = torch.randn(k, k, generator=gen, dtype=F64)
    ref = two_token_log_probs(first + reference_shift * torch.randn(k, generator=gen, dtype=F64),
                              second + reference_shift * torch.randn(k, k, generator=gen, dtype=F64))
    return first.requires_grad_(), second.requires_grad_(), ref


def two_token_kl_table(k=4, seed=1, shifts=(0.3, 1.0, 2.0)):
    """For references at several distances: each way of penalising the sequence KL, its relative error against the
    exact gradient, on the first token's logits and on the second's -> list of dicts."""
    rows = []
    for shift in shifts:
        first, second, (ref_a, ref_b) = two_token_policy(k, seed, shift)
        grads = two_token_kl_grads(first, second, ref_a, ref_b)
        lp_a, lp_b = two_token_log_probs(first.detach(), second.detach())
        sequence_kl = ((lp_a + lp_b).exp() * (lp_a + lp_b - ref_a - ref_b)).sum().item()
        exact_first, exact_second = grads['exact']
        for name, (grad_first, grad_second) in grads.items():
            rows.append(dict(shift=shift, sequence_kl=sequence_kl, loss=name,
                             first_error=relative_error(grad_first, exact_first),
                             second_error=relative_error(grad_second, exact_second)))
    return rows


def sequence_log_probs(first, second):
    """log pi of every sequence (a, b) -> [K, K] (row a, column b), and its two token log-probs as [K, K] each."""
    lp_a, lp_b = two_token_log_probs(first, second)
    lp_a = lp_a.expand_as(lp_b)
    return lp_a + lp_b, lp_a, lp_b


RATIO_LOSSES = ('token ratios, unclipped', 'PPO, token ratios', 'CISPO', 'GSPO', 'sequence ratio, unclipped')


def ratio_gradients(first, second, old_first, old_second, reward, clip=0.2):
    """Expected gradients (w.r.t. first and second, flattened) of the ratio losses on sequences drawn by pi_old,
    advantages reward - E_old[reward], each sequence's tokens summed -> ({name: grad}, the true gradient of E_pi[R])."""
    logp, lp_a, lp_b = sequence_log_probs(first, second)  # [K, K] each
    old, old_a, old_b = (x.detach() for x in sequence_log_probs(old_first, old_second))
    drawn = old.exp()  # [K, K]
    advantage = (reward - (drawn * reward).sum()).reshape(-1)  # [K*K]
    token_logp = torch.stack([lp_a, lp_b], -1).reshape(-1, 2)  # [K*K, 2]
    token_old = torch.stack([old_a, old_b], -1).reshape(-1, 2)
    mask = torch.ones_like(token_logp)
    weight = drawn.reshape(-1, 1)  # [K*K, 1]
    ratio = torch.exp(token_logp - token_old)
    surrogates = {
        'token ratios, unclipped': ratio * advantage[:, None],
        'PPO, token ratios': off_policy.clipped_objective(ratio, advantage[:, None], clip, clip),
        'CISPO': off_policy.cispo_surrogate(token_logp, token_old, advantage, clip, clip),
        'GSPO': off_policy.gspo_surrogate(token_logp, token_old, advantage, mask, clip, clip)[:, None],
        'sequence ratio, unclipped': torch.exp((token_logp - token_old).sum(-1, keepdim=True)) * advantage[:, None]}
    params = (first, second)
    flat = {}
    for name, surrogate in surrogates.items():
        grads = torch.autograd.grad((weight * surrogate).sum(), params, retain_graph=True)
        flat[name] = torch.cat([g.reshape(-1) for g in grads])
    truth = torch.autograd.grad((logp.exp() * reward).sum(), params)
    return flat, torch.cat([g.reshape(-1) for g in truth])


def ratio_table(steps=(0.0, 0.1, 0.3, 0.6, 1.0), k=4, seed=2, clip=0.2):
    """For pi moved by each step from pi_old: each ratio loss's expected gradient against the true policy gradient
    (relative error and cosine) -> list of dicts."""
    gen = torch.Generator().manual_seed(seed)
    old_first, old_second = torch.randn(k, generator=gen, dtype=F64), torch.randn(k, k, generator=gen, dtype=F64)
    move_first, move_second = torch.randn(k, generator=gen, dtype=F64), torch.randn(k, k, generator=gen, dtype=F64)
    reward = (torch.rand(k, k, generator=gen, dtype=F64) < 0.4).to(F64)  # a success or a failure per sequence
    rows = []
    for step in steps:
        first = (old_first + step * move_first).requires_grad_()
        second = (old_second + step * move_second).requires_grad_()
        grads, truth = ratio_gradients(first, second, old_first, old_second, reward, clip)
        logp = sequence_log_probs(first.detach(), second.detach())[0].reshape(-1)
        old = sequence_log_probs(old_first, old_second)[0].reshape(-1)
        for name, grad in grads.items():
            rows.append(dict(step=step, kl_from_old=categorical_kl(logp, old), loss=name,
                             error=relative_error(grad, truth),
                             cosine=torch.nn.functional.cosine_similarity(grad, truth, dim=0).item()))
    return rows


def sampler_table(temperatures=(1.0, 1.3, 2.0), thresholds=(1.2, 2.0, float('inf')), k=4, seed=3):
    """A sampler that draws at another temperature than the trainer's pi (= pi_old here, the update's first
    minibatch): for each correction mode and threshold, the relative error of the expected policy gradient against
    the true one, and the uncorrected error -> list of dicts."""
    gen = torch.Generator().manual_seed(seed)
    first = torch.randn(k, generator=gen, dtype=F64).requires_grad_()
    second = torch.randn(k, k, generator=gen, dtype=F64).requires_grad_()
    reward = (torch.rand(k, k, generator=gen, dtype=F64) < 0.4).to(F64)
    logp, lp_a, lp_b = sequence_log_probs(first, second)
    (truth_first, truth_second) = torch.autograd.grad((logp.exp() * reward).sum(), (first, second), retain_graph=True)
    truth = torch.cat([truth_first.reshape(-1), truth_second.reshape(-1)])
    token_logp = torch.stack([lp_a, lp_b], -1).reshape(-1, 2)  # [K*K, 2]
    mask = torch.ones_like(token_logp)
    rows = []
    for temperature in temperatures:
        sampled, s_a, s_b = (x.detach() for x in sequence_log_probs(first.detach() / temperature,
                                                                    second.detach() / temperature))
        drawn = sampled.exp().reshape(-1, 1)  # [K*K, 1], the sampler's sequence probabilities
        advantage = (reward.reshape(-1) - (drawn[:, 0] * reward.reshape(-1)).sum())[:, None]  # [K*K, 1]
        sampler_logp = torch.stack([s_a, s_b], -1).reshape(-1, 2)

        def gradient(weights):
            grads = torch.autograd.grad((drawn * weights * advantage * token_logp).sum(), (first, second),
                                        retain_graph=True)
            return torch.cat([g.reshape(-1) for g in grads])
        uncorrected = relative_error(gradient(torch.ones_like(token_logp)), truth)
        for mode in off_policy.SAMPLER_MODES:
            for threshold in thresholds:
                weights = off_policy.sampler_weights(token_logp.detach(), sampler_logp, mask, mode, threshold)
                rows.append(dict(temperature=temperature, mode=mode, threshold=threshold,
                                 kl_sampler=categorical_kl(logp.detach().reshape(-1), sampled.reshape(-1)),
                                 error=relative_error(gradient(weights), truth), uncorrected=uncorrected))
    return rows


def ratio_k3_plus_table(steps=(0.0, 0.25, 0.5, 1.0, 2.0), k=8, seed=0):
    """What `k3+` weighted by a differentiated ratio follows: at each distance from pi_old, its expected gradient's
    relative error against 2 grad KL(pi || ref) - grad KL(ref || pi), against the reverse KL's and against the
    forward KL's -> list of dicts (step, kl_from_old, combined_error, reverse_error, forward_error)."""
    ref, old, thetas = policies_apart(k, steps, seed)
    rows = []
    for step, theta in zip(steps, thetas):
        reverse, forward = kl_grads(theta, ref)
        _, grad = expected_off_policy_kl(theta, old, ref, 'k3+', 'ratio')
        rows.append(dict(step=step, kl_from_old=categorical_kl(theta.detach().log_softmax(-1), old),
                         combined_error=relative_error(grad, 2 * reverse - forward),
                         reverse_error=relative_error(grad, reverse), forward_error=relative_error(grad, forward)))
    return rows


def scale_pairs(lengths=(3, 12, 40), horizon=64):
    """relative_scale for every ordered pair of different aggregation modes on sequences of the given lengths ->
    list of dicts (term, policy, scales [B], constant: one value for the whole batch, involves_per_sequence_mean)."""
    from agentrl.core.aggregation import AGGREGATIONS, relative_scale
    mask = (torch.arange(max(lengths))[None, :] < torch.tensor(lengths)[:, None]).to(F64)
    rows = []
    for term in AGGREGATIONS:
        for policy in AGGREGATIONS:
            if term != policy:
                scales = relative_scale(mask, term, policy, horizon).tolist()
                rows.append(dict(term=term, policy=policy, scales=scales,
                                 constant=max(scales) - min(scales) < 1e-12 * max(scales),
                                 involves_per_sequence_mean='seq-mean-token-mean' in (term, policy)))
    return rows


def gspo_on_policy(mixed=True, k=4, seed=4, clip=0.2):
    """GSPO's expected gradient on policy against the true policy gradient, on a two-token tabular policy; mixed:
    the first token's last outcome ends the sequence there, so lengths 1 and 2 mix -> dict (lengths, cosine, error,
    error_vs_scaled: the relative error against the true gradient with each sequence's term divided by its
    length)."""
    gen = torch.Generator().manual_seed(seed)
    first = torch.randn(k, generator=gen, dtype=F64).requires_grad_()
    second = torch.randn(k, k, generator=gen, dtype=F64).requires_grad_()
    reward = (torch.rand(k, k, generator=gen, dtype=F64) < 0.4).to(F64)
    lp_a, lp_b = two_token_log_probs(first, second)  # [K, 1], [K, K]
    ends = torch.zeros(k, dtype=torch.bool)  # first tokens after which the sequence stops
    ends[-1] = mixed
    seq_a, seq_b, token, mask, rewards = [], [], [], [], []
    for a in range(k):
        for b in ([0] if ends[a] else range(k)):
            second_lp = torch.zeros((), dtype=F64) if ends[a] else lp_b[a, b]
            token.append(torch.stack([lp_a[a, 0], second_lp]))
            mask.append(torch.tensor([1.0, 0.0 if ends[a] else 1.0], dtype=F64))
            rewards.append(reward[a, b])
    token_logp, mask, rewards = torch.stack(token), torch.stack(mask), torch.stack(rewards)  # [N, 2], [N, 2], [N]
    logp = (token_logp * mask).sum(-1)  # [N]
    drawn = logp.exp().detach()
    advantage = rewards - (drawn * rewards).sum()
    length = mask.sum(-1)
    params = (first, second)

    def flat(objective):
        return torch.cat([g.reshape(-1) for g in torch.autograd.grad(objective, params, retain_graph=True)])
    gspo = flat((drawn * off_policy.gspo_surrogate(token_logp, token_logp.detach(), advantage, mask, clip, clip)).sum())
    truth = flat((logp.exp() * rewards).sum())
    scaled = flat((drawn * advantage * logp / length).sum())
    return dict(lengths=sorted(set(int(n) for n in length.tolist())), cosine=torch.nn.functional.cosine_similarity(
        gspo, truth, dim=0).item(), error=relative_error(gspo, truth), error_vs_scaled=relative_error(gspo, scaled))


ADVANTAGE_SCALES = ('group', 'batch', 'none')


def group_advantages(rewards, group_size, scale='group', eps=1e-6):
    """Each reward minus its group's mean, divided by a spread chosen by `scale`: rewards [B] -> [B] (groups are
    group_size contiguous rows). 'group': the group's std (Bessel-corrected); 'batch': the std of all the rewards;
    'none': no division (Dr. GRPO). The frameworks' switches between these are mapped to it."""
    if scale not in ADVANTAGE_SCALES:
        raise ValueError(f'unknown advantage scale {scale!r}; allowed: {", ".join(map(repr, ADVANTAGE_SCALES))}')
    grouped = rewards.view(-1, group_size)  # [G, group_size]
    centred = grouped - grouped.mean(dim=1, keepdim=True)
    if scale == 'group':
        centred = centred / (grouped.std(dim=1, keepdim=True) + eps)
    elif scale == 'batch':
        centred = centred / (rewards.std() + eps)
    return centred.reshape(-1)


def aggregation_example(lengths=(3, 12, 40), horizon=64, seed=0):
    """Section 3's batch: every mode's sequence scales and weight sums, two cross pairs, and autograd's token weights
    against the derived ones -> dict (scales, sums, pairs, largest)."""
    from agentrl.core.aggregation import AGGREGATIONS, aggregate, relative_scale, sequence_scale, token_weights
    mask = (torch.arange(max(lengths))[None, :] < torch.tensor(lengths)[:, None]).double()  # [B, T]
    scales = {mode: sequence_scale(mask, mode, horizon).tolist() for mode in AGGREGATIONS}
    sums = {mode: token_weights(mask, mode, horizon).sum().item() for mode in AGGREGATIONS}
    pairs = [(term, policy, relative_scale(mask, term, policy).tolist())
             for term, policy in (('token-mean', 'seq-mean-token-mean'), ('seq-mean-token-sum', 'token-mean'))]
    values = torch.randn(mask.shape, dtype=F64, generator=torch.Generator().manual_seed(seed)).requires_grad_()
    largest = []
    for mode in AGGREGATIONS:  # autograd's weights against the derived scales
        (weights,) = torch.autograd.grad(aggregate(values, mask, mode, horizon), values)
        derived = sequence_scale(mask, mode, horizon)[:, None] / len(lengths) * mask
        largest.append((weights - derived).abs().max().item())
    return dict(lengths=lengths, horizon=horizon, scales=scales, sums=sums, pairs=pairs, largest=max(largest))


def exact_tables(seed=0):
    """Every exact table of notebook 12 for one seed of its small random policies -> dict."""
    return dict(kl_rows=off_policy_kl_table(seed=seed), k3_plus_rows=ratio_k3_plus_table(seed=seed),
                pair_rows=two_token_kl_table(seed=seed + 1), scale_rows=scale_pairs(), mixed=gspo_on_policy(),
                ratio_rows=ratio_table(seed=seed + 2), sampler_rows=sampler_table(seed=seed + 3))


# The clamps the frameworks put on k3: (bounds on the log-ratio l = log ref - log pi, bounds on the estimate),
# None for an open side. Ours clamps nothing, so E_pi[k3] is the KL itself.
K3_CLAMPS = {
    'verl low_var_kl, ms-swift k3': ((-20.0, 20.0), (-10.0, 10.0)),
    'OpenRLHF 0.11.0 k3': ((None, None), (-10.0, 10.0)),
    'OpenRLHF 0.11.2 k3': ((-10.0, None), (-10.0, 10.0)),
}


def clamped_k3_mean(logp, ref_logp, log_ratio=(None, None), value=(None, None)):
    """E_pi of k3 with l = ref_logp - logp clamped to `log_ratio` and then k3 to `value`, summed exactly over the K
    outcomes of a categorical (log-probs [K]); with no bounds it is KL(pi || ref)."""
    l = _clamp(ref_logp - logp, log_ratio)
    k3 = _clamp(torch.expm1(l) - l, value)
    return (logp.exp() * k3).sum().item()


def _clamp(x, bounds):
    return x if bounds == (None, None) else x.clamp(min=bounds[0], max=bounds[1])


def clamp_bias_table(shifts=(0.0, 1.0, 2.0, 3.0, 4.0, 6.0), k=8, seed=5, clamps=K3_CLAMPS):
    """A pi moved `shift` along one direction of logit space from a fixed reference, per shift: the exact
    KL(pi || ref), the largest log-ratio pi puts mass on, the mass on outcomes where some clamp binds, and for each
    clamp the bias of E_pi[clamped k3] as a share of the KL (0: unbiased) -> list of dicts."""
    gen = torch.Generator().manual_seed(seed)
    ref = torch.randn(k, generator=gen, dtype=F64).mul(1.5).log_softmax(-1)
    direction = torch.randn(k, generator=gen, dtype=F64)
    rows = []
    for shift in shifts:
        logp = (ref + shift * direction).log_softmax(-1)
        kl = clamped_k3_mean(logp, ref)
        l = ref - logp
        k3 = torch.expm1(l) - l
        binds = torch.zeros_like(l, dtype=torch.bool)  # where any of the clamps changes k3
        for log_ratio, value in clamps.values():
            clamped = _clamp(l, log_ratio)
            binds |= _clamp(torch.expm1(clamped) - clamped, value) != k3
        rows.append(dict(shift=shift, kl=kl, max_log_ratio=l.max().item(), min_log_ratio=l.min().item(),
                         mass_clamped=logp.exp()[binds].sum().item(),
                         bias={name: (clamped_k3_mean(logp, ref, *bounds) - kl) / kl if kl > 0 else 0.0
                               for name, bounds in clamps.items()}))
    return rows


def k3_reaches(cap, low=0.0, high=50.0):
    """The positive log-ratio l at which k3 = e^l - 1 - l reaches `cap` (bisection; k3 rises on l > 0)."""
    for _ in range(200):
        mid = (low + high) / 2
        low, high = (mid, high) if torch.expm1(torch.tensor(mid, dtype=F64)).item() - mid < cap else (low, mid)
    return (low + high) / 2
