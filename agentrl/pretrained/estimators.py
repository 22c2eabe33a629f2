"""The chapter's estimator facts (10.2, 10.3) computed exactly over a real vocabulary, at real sampled positions.

At each position the policy and the reference are full distributions over 49,152 tokens, so every expectation under
pi is a sum over the vocabulary: nothing here is a Monte-Carlo estimate except where a docstring says so.
"""
from dataclasses import dataclass, field

import torch

from agentrl.core.exact import estimator_moments_rows
from agentrl.core.kl import KL_KINDS, kl_estimate, kl_penalty
from agentrl.core.logprobs import selected_log_probs
from agentrl.cpu import fixed_threads
from agentrl.pretrained.loader import MODEL_THREADS
from agentrl.pretrained.sampling import next_token_logits
from agentrl.progress import beat

GRADIENT_KINDS = ('k1', 'k2', 'k3', 'k3+')


@dataclass
class PairMoments:
    """Per-position exact moments of one pair, over the positions the masks keep (float64)."""
    name: str
    kl: torch.Tensor  # [M], KL(pi || ref) at each position
    mean: dict  # kind -> [M], exact mean of one draw under pi
    std: dict  # kind -> [M], exact single-draw std under pi
    k1_negative: torch.Tensor  # [M], the chance that a draw of k1 is negative
    sampled_log_ratio32: torch.Tensor  # [M], l = log ref - log pi at the sampled token, as float32 log-softmax gives it
    sampled_log_ratio64: torch.Tensor  # [M], the same from a float64 log-softmax of the same logits
    sequences: dict = field(default_factory=dict)  # per-sequence sums, see sequence_sums

    def pooled(self, kind):
        """(mean/KL, std/KL) of one draw at a position chosen uniformly among the M, relative to the mean KL."""
        kl = self.kl.mean()
        mean = self.mean[kind].mean()
        spread = (self.std[kind].square() + (self.mean[kind] - mean).square()).mean().sqrt()
        return (mean / kl).item(), (spread / kl).item()

    def median_ratio(self, kind):
        """The median over positions of a single draw's std relative to that position's KL."""
        return (self.std[kind] / self.kl).median().item()


def _rows(tensor, mask):
    """[n, T, ...] -> [M, ...]: the positions the mask keeps, in row order."""
    return tensor[mask.bool()]


def pair_moments(name, policy_logits, ref_logits, samples):
    """PairMoments of one pair from per-request logits lists ([n, T, V] each) and the Samples they scored."""
    parts = {'kl': [], 'k1<0': [], 'l32': [], 'l64': []}
    means = {kind: [] for kind in KL_KINDS}
    stds = {kind: [] for kind in KL_KINDS}
    seq = {'path_kl': [], 'k1': [], 'k2': [], 'k3': [], 'whole_k3': []}
    for z, z_ref, s in zip(policy_logits, ref_logits, samples):
        beat()  # exact moments over 49,152 tokens per row: slow on a busy machine, never silent to the runner
        logp64, ref64 = torch.log_softmax(z.double(), -1), torch.log_softmax(z_ref.double(), -1)  # [n, T, V]
        rows = estimator_moments_rows(_rows(logp64, s.mask), _rows(ref64, s.mask))
        for kind in KL_KINDS:
            means[kind].append(rows[kind][0])
            stds[kind].append(rows[kind][1])
        parts['kl'].append(rows['kl'])
        parts['k1<0'].append(rows['k1<0'])
        picked = s.tokens[..., None]
        l32 = selected_log_probs(z_ref, s.tokens) - selected_log_probs(z, s.tokens)  # [n, T], as a trainer has it
        l64 = (ref64.gather(-1, picked) - logp64.gather(-1, picked))[..., 0]  # [n, T]
        parts['l32'].append(_rows(l32, s.mask))
        parts['l64'].append(_rows(l64, s.mask))
        for key, value in sequence_sums(logp64, ref64, l64, s.mask).items():
            seq[key].append(value)
    cat = torch.cat
    return PairMoments(name, cat(parts['kl']), {k: cat(v) for k, v in means.items()},
                       {k: cat(v) for k, v in stds.items()}, cat(parts['k1<0']), cat(parts['l32']), cat(parts['l64']),
                       {k: cat(v) for k, v in seq.items()})


def sequence_sums(logp, ref_logp, log_ratio, mask):
    """Whole-sequence quantities of n sampled sequences -> {name: [n]} (float64).

    path_kl: the sum over the sequence's positions of the exact per-token KL at its own prefixes, whose mean over
    sequences is the sequence KL(pi || ref). k1, k2, k3: the per-token estimators summed along the sequence.
    whole_k3: k3 applied once to the sequence's log-ratio L = sum of l, i.e. e^L - 1 - L.
    """
    kl = (logp.exp() * (logp - ref_logp)).sum(-1)  # [n, T]
    out = {'path_kl': (kl * mask).sum(-1)}
    for kind in KL_KINDS:
        out[kind] = (kl_penalty(torch.zeros_like(log_ratio), log_ratio, kind) * mask).sum(-1)
    total = (log_ratio * mask).sum(-1)  # [n], log ref(seq) - log pi(seq)
    out['whole_k3'] = torch.expm1(total) - total
    return out


def sequence_summary(moments):
    """{estimator: (mean / sequence KL, std / sequence KL)} over the sampled sequences, and the sequence KL with its
    standard error (the mean of path_kl, a Monte-Carlo average over sequences; each path_kl is exact)."""
    seq = moments.sequences
    kl = seq['path_kl'].mean()
    error = seq['path_kl'].std() / len(seq['path_kl']) ** 0.5
    table = {name: ((seq[name].mean() / kl).item(), (seq[name].std() / kl).item())
             for name in ('k1', 'k2', 'k3', 'whole_k3', 'path_kl')}
    return {'sequence_kl': kl.item(), 'standard_error': error.item(), 'sequences': len(seq['path_kl']),
            'estimators': table}


def k3_numerics(log_ratio32, log_ratio64):
    """k3 at real sampled tokens, three ways: the naive float32 formula exp(l) - 1 - l, the package's float32
    kl_penalty (expm1), and float64 from a float64 log-softmax (the reference) -> dict of counts and worst errors."""
    naive = torch.exp(log_ratio32) - 1 - log_ratio32  # float32, the textbook form
    ours = kl_penalty(torch.zeros_like(log_ratio32), log_ratio32, 'k3')  # float32, expm1
    exact = torch.expm1(log_ratio64) - log_ratio64  # float64
    tiny = exact.abs().clamp_min(1e-300)

    def report(values):
        error = (values.double() - exact).abs()
        return {'negative': int((values < 0).sum()), 'most_negative': float(values.min().clamp_max(0)),
                'median_relative_error': (error / tiny).median().item(), 'max_absolute_error': error.max().item()}

    return {'tokens': len(exact), 'naive float32': report(naive), 'expm1 float32': report(ours),
            'float64': report(exact), 'smallest |l|': log_ratio64.abs().min().item()}


def _dot(a, b):
    """Inner product of two gradients kept as lists of float32 tensors, accumulated in float64."""
    return sum(torch.dot(x.reshape(-1).double(), y.reshape(-1).double()) for x, y in zip(a, b)).item()


def _distance(a, b):
    """|a - b| of two gradients kept as lists of float32 tensors, in float64."""
    return sum((x.double() - y.double()).square().sum() for x, y in zip(a, b)).item() ** 0.5


def gradient_comparison(model, samples, ref_logits, kinds=GRADIENT_KINDS):
    """Each KL estimator's exact expected gradient, used as a loss at the sampled positions, against the true
    gradients of reverse and forward KL, with respect to every parameter of `model` (pi) ->
    {kind: {'norm', 'cos reverse', 'cos forward', 'error reverse', 'error forward'}, 'norms': {...}}.

    The loss of kind k is the mean over positions of sum_y sg(pi(y)) * k(y): its gradient is exactly the expected
    gradient of k on tokens drawn from pi, since the sampler's probabilities are constants, as in a real batch. One
    backward pass per loss, through the whole network; relative error = |g - target| / |target|. samples: Samples
    list; ref_logits: the reference's matching [n, T, V] logits.
    """
    params = list(model.parameters())
    flags = [p.requires_grad for p in params]
    for p in params:
        p.requires_grad_(True)
    try:
        with fixed_threads(MODEL_THREADS):
            logp = [torch.log_softmax(next_token_logits(model, s.prompt, s.tokens, grad=True), -1)
                    for s in samples]  # [n, T, V] each
            refs = [torch.log_softmax(r.detach(), -1) for r in ref_logits]
            count = sum(s.mask.sum() for s in samples)

            def average(per_position):  # [n, T] per request -> the mean over kept positions
                return sum((value * s.mask).sum() for value, s in zip(per_position, samples)) / count

            def gradient(loss):  # float32 per parameter: three full gradients at a time, not six in float64
                parts = torch.autograd.grad(loss, params, retain_graph=True, allow_unused=True)
                return [g if g is not None else torch.zeros_like(p) for g, p in zip(parts, params)]

            targets = {'reverse': gradient(average([(lp.exp() * (lp - rl)).sum(-1) for lp, rl in zip(logp, refs)])),
                       'forward': gradient(average([(rl.exp() * (rl - lp)).sum(-1) for lp, rl in zip(logp, refs)]))}
            squares = {label: _dot(g, g) for label, g in targets.items()}
            out = {'norms': {f'{label} KL': value ** 0.5 for label, value in squares.items()}}
            for kind in kinds:
                g = gradient(average([(lp.exp().detach() * kl_estimate(lp, rl, kind)).sum(-1)
                                      for lp, rl in zip(logp, refs)]))
                own = _dot(g, g)
                row = {'norm': own ** 0.5}
                for label, target in targets.items():
                    cross = _dot(g, target)
                    row[f'error {label}'] = _distance(g, target) / squares[label] ** 0.5
                    row[f'cos {label}'] = cross / max((own * squares[label]) ** 0.5, 1e-300)
                out[kind] = row
                del g
    finally:
        for p, flag in zip(params, flags):
            p.requires_grad_(flag)
    return out
