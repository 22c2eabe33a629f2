"""Section 10.6's first-order entropy rule on SmolLM2's real logits: one SGD step, four cases.

For logits z over V tokens, pi = softmax(z) and H = -sum pi log pi, dH/dz_j = -pi_j (log pi_j + H), so a small
change dz moves the entropy by dH ~= -Cov_{j~pi}(log pi_j, dz_j). The chapter feeds it the idealised change of one
policy-gradient step, dz = eta A (e_a - pi), as if the logits were free parameters. Here the change comes from one
plain SGD step of the network's 135M parameters on -A log pi(a | prefix), measured over the whole vocabulary at that
prefix. All entropy arithmetic runs in float64 on the logits.
"""
import time
from dataclasses import asdict, dataclass

import torch

from agentrl.cpu import fixed_threads
from agentrl.pretrained.loader import MODEL_THREADS, trainable_copy
from agentrl.pretrained.sampling import chat_ids, sample
from agentrl.progress import beat

PROMPT = 'Write a Python function that returns the sum of a list.'
LR = 1e-5  # plain SGD: small enough that the first-order rule holds to a few percent (at 1e-4 it errs by 9-27%)
LIKELY_AT_LEAST = 0.5  # a "likely" token has pi >= this ...
LIKELY_TARGET = 0.6  # ... and is the one closest to this (near the toy table's 0.61, away from pi ~ 1 where H ~ 0)
CASES = (('likely', 1.0), ('likely', -1.0), ('rare', 1.0), ('rare', -1.0))


def label(kind, advantage):
    """'likely, A > 0' and so on, the book's row names."""
    return f'{kind}, A {">" if advantage > 0 else "<"} 0'


# --- the exact quantities, on one logit vector -------------------------------------------------------------------

def entropy64(z):
    """Entropy in nats of softmax(z) over the last axis, computed in float64: [..., V] -> [...]."""
    logp = torch.log_softmax(z.double(), -1)
    return -(logp.exp() * logp).sum(-1)


def entropy_gradient(z):
    """dH/dz_j = -pi_j (log pi_j + H), float64: [..., V] -> [..., V]."""
    logp = torch.log_softmax(z.double(), -1)
    h = -(logp.exp() * logp).sum(-1, keepdim=True)
    return -logp.exp() * (logp + h)


def predicted_entropy_change(z, dz):
    """First-order dH = -Cov_{j~pi}(log pi_j, dz_j), float64: [..., V] x 2 -> [...]."""
    logp = torch.log_softmax(z.double(), -1)
    p, dz = logp.exp(), dz.double()
    mean_logp = (p * logp).sum(-1, keepdim=True)
    mean_dz = (p * dz).sum(-1, keepdim=True)
    return -(p * (logp - mean_logp) * (dz - mean_dz)).sum(-1)


def idealised_change(z, token, advantage, eta):
    """The chapter's dz = eta A (e_a - pi) of one policy-gradient step on free logits, float64: [V] -> [V]."""
    p = torch.softmax(z.double(), -1)
    return eta * advantage * (torch.nn.functional.one_hot(torch.tensor(token), p.numel()).double() - p)


def centred(v):
    """v minus its mean over the vocabulary: the part softmax sees (a constant shift changes nothing)."""
    return v - v.mean(-1, keepdim=True)


def cosine(a, b):
    """Cosine between two logit changes after removing each one's constant shift."""
    a, b = centred(a.double()), centred(b.double())
    return float((a @ b) / (a.norm() * b.norm()))


def weighted_cosine(z, a, b):
    """Cosine between two logit changes in the inner product Cov_{j~pi}: the tokens weighted by how likely they are,
    which is where the entropy is decided (shift-invariant by construction)."""
    p = torch.softmax(z.double(), -1)
    a, b = a.double() - (p * a.double()).sum(), b.double() - (p * b.double()).sum()
    return float((p * a * b).sum() / ((p * a * a).sum() * (p * b * b).sum()).sqrt())


def share_on_token(dz, token):
    """Fraction of the centred change's squared norm that sits on the chosen token itself."""
    c = centred(dz.double())
    return float(c[token] ** 2 / (c @ c))


# --- choosing the positions --------------------------------------------------------------------------------------

def pick_positions(chosen_probs, mask, likely_at_least=LIKELY_AT_LEAST, likely_target=LIKELY_TARGET):
    """(likely, rare) positions as (row, t) among the sampled tokens: likely = pi >= likely_at_least and closest to
    likely_target; rare = the smallest pi. chosen_probs, mask: [N, T]."""
    if chosen_probs.shape != mask.shape:
        raise ValueError(f'chosen_probs has shape {tuple(chosen_probs.shape)} and mask {tuple(mask.shape)}; '
                         'they must be equal')
    inside = mask > 0
    if not inside.any():
        raise ValueError('mask selects no sampled token; at least one is needed')
    candidates = inside & (chosen_probs >= likely_at_least)
    if not candidates.any():
        raise ValueError(f'no sampled token has pi >= {likely_at_least}; lower likely_at_least or sample more')
    gap = torch.where(candidates, (chosen_probs - likely_target).abs(), torch.full_like(chosen_probs, float('inf')))
    likely = divmod(int(gap.argmin()), chosen_probs.shape[1])
    rare = divmod(int(torch.where(inside, chosen_probs, torch.full_like(chosen_probs, 2.0)).argmin()),
                  chosen_probs.shape[1])
    return likely, rare


# --- the measurement ---------------------------------------------------------------------------------------------

@dataclass
class CaseRecord:
    """One case: one SGD step on -A log pi(token | prefix), the logits at that prefix before and after."""
    label: str  # 'likely, A > 0', ...
    kind: str  # 'likely' or 'rare'
    advantage: float
    token: int
    token_text: str
    prob: float  # pi(token) before the step
    entropy: float  # H before the step, nats
    lr: float
    predicted: float  # -Cov_pi(log pi, dz) with the network's dz
    actual: float  # H(after) - H(before)
    ideal_predicted: float  # the same rule with the idealised dz = lr A (e_a - pi)
    ideal_actual: float  # H(z + idealised dz) - H(z)
    cosine: float  # between the network's and the idealised dz, each with its mean over the vocabulary removed
    cosine_pi: float  # the same in the pi-weighted inner product Cov_pi
    gain: float  # the network's dz projected on the idealised one, in units of it (1 = the idealised size)
    token_logit_change: float  # the network's dz at the token minus its vocabulary mean
    share_on_token: float  # fraction of the network's centred ||dz||^2 on the token (idealised: ideal_share)
    ideal_share: float
    max_abs_change: float  # largest |dz_j - mean dz| over the vocabulary
    moved_tokens: int  # tokens other than the chosen one whose |dz_j - mean dz| is at least a tenth of the token's

    @property
    def relative_error(self):
        return abs(self.predicted - self.actual) / abs(self.actual)

    def as_dict(self):
        return asdict(self)


@dataclass
class CovarianceRun:
    """What run_cases measured: the four cases, where they were taken, and what it cost."""
    cases: list  # [CaseRecord] in CASES order
    prompt: str
    seed: int
    n_samples: int
    length: int
    positions: dict  # {'likely': (row, t), 'rare': (row, t)}
    prefixes: dict  # {'likely': decoded continuation up to the token, 'rare': ...}
    float32_predicted: list  # the predicted dH recomputed in float32, per case, to show what float64 buys
    seconds: float


def last_logits(model, ids):
    """The logits after the last of ids [L] -> [V] float32 (gradients as the caller's mode allows)."""
    return model(ids[None]).logits[0, -1].float()


def one_step_change(copy, ids, token, advantage, lr):
    """Logits at the end of ids before and after one SGD step on -A log pi(token | ids) -> (z [V], z_after [V]).
    The copy's parameters are left moved; the caller restores them."""
    params = [p for p in copy.parameters() if p.requires_grad]
    for p in params:
        p.grad = None
    z = last_logits(copy, ids)  # [V]
    loss = -advantage * torch.log_softmax(z, -1)[token]
    loss.backward()
    with torch.no_grad():
        for p in params:
            if p.grad is not None:
                p.sub_(lr * p.grad)
        z_after = last_logits(copy, ids)
    return z.detach(), z_after


def restore(copy, reference):
    """Put the reference's parameters back into the trainable copy, bit for bit."""
    with torch.no_grad():
        for mine, theirs in zip(copy.parameters(), reference.parameters()):
            mine.copy_(theirs)
            mine.grad = None


def run_cases(pretrained, seed=0, n_samples=4, length=48, lr=LR, prompt=PROMPT, copy=None):
    """Sample n_samples continuations (seeded), pick a likely and a rare sampled token, and take the four one-step
    cases on a single trainable copy restored between them -> CovarianceRun."""
    if not lr > 0:
        raise ValueError(f'lr must be a positive learning rate, got {lr!r}')
    if n_samples < 1 or length < 2:
        raise ValueError(f'n_samples must be >= 1 and length >= 2, got {n_samples} and {length}')
    start = time.perf_counter()
    model, tok = pretrained.model, pretrained.tokenizer
    end_id = tok.convert_tokens_to_ids('<|im_end|>')
    ids = chat_ids(tok, prompt)  # [P]
    drawn = sample(model, ids, n_samples, length, torch.Generator().manual_seed(seed), end_id=end_id)
    with fixed_threads(MODEL_THREADS), torch.no_grad():
        full = torch.cat([ids.expand(n_samples, -1), drawn.tokens], 1)  # [N, P + T]
        logp = torch.log_softmax(model(full).logits[:, ids.numel() - 1:-1].double(), -1)  # [N, T, V]
    chosen = logp.gather(-1, drawn.tokens[..., None])[..., 0].exp()  # [N, T]
    likely, rare = pick_positions(chosen, drawn.mask)
    positions = {'likely': likely, 'rare': rare}
    copy = copy if copy is not None else trainable_copy(model)
    cases, f32 = [], []
    with fixed_threads(MODEL_THREADS):
        for kind, adv in CASES:
            beat()  # one real SGD step per case: minutes on a busy machine
            row, t = positions[kind]
            prefix = torch.cat([ids, drawn.tokens[row, :t]])  # [P + t]
            token = int(drawn.tokens[row, t])
            z, z_after = one_step_change(copy, prefix, token, adv, lr)
            restore(copy, model)
            cases.append(case_record(kind, adv, token, tok.decode([token]), z, z_after, lr))
            f32.append(float(predicted_float32(z, z_after - z)))
    prefixes = {k: tok.decode(drawn.tokens[r, :t]) for k, (r, t) in positions.items()}
    return CovarianceRun(cases, prompt, seed, n_samples, length, positions, prefixes, f32,
                         time.perf_counter() - start)


def predicted_float32(z, dz):
    """The first-order dH computed entirely in float32, to compare with the float64 one."""
    logp = torch.log_softmax(z.float(), -1)
    p, dz = logp.exp(), dz.float()
    return -(p * (logp - (p * logp).sum()) * (dz - (p * dz).sum())).sum()


def case_record(kind, advantage, token, token_text, z, z_after, lr):
    """The float64 comparison of one case from the logits before and after -> CaseRecord."""
    z, z_after = z.double(), z_after.double()
    dz = z_after - z  # [V]
    ideal = idealised_change(z, token, advantage, lr)  # [V]
    h = float(entropy64(z))
    ideal_c, dz_c = centred(ideal), centred(dz)
    return CaseRecord(
        label=label(kind, advantage), kind=kind, advantage=advantage, token=token, token_text=token_text,
        prob=float(torch.softmax(z, -1)[token]), entropy=h, lr=lr,
        predicted=float(predicted_entropy_change(z, dz)), actual=float(entropy64(z_after)) - h,
        ideal_predicted=float(predicted_entropy_change(z, ideal)), ideal_actual=float(entropy64(z + ideal)) - h,
        cosine=cosine(dz, ideal), cosine_pi=weighted_cosine(z, dz, ideal), gain=float((dz_c @ ideal_c) / (ideal_c @ ideal_c)),
        token_logit_change=float(dz_c[token]), share_on_token=share_on_token(dz, token),
        ideal_share=share_on_token(ideal, token), max_abs_change=float(dz_c.abs().max()),
        moved_tokens=int((dz_c.abs() >= 0.1 * dz_c[token].abs()).sum()) - 1)


# --- what the notebook prints ------------------------------------------------------------------------------------

def table_lines(run):
    """The book's block (label | predicted dH | actual dH) with the extra columns of the network's step."""
    by_kind = {c.kind: c for c in run.cases}
    head = (f'one SGD step, lr {run.cases[0].lr:g} | ' + ' | '.join(
        f'{k} token {c.token_text!r}: pi {c.prob:.4f}, H {c.entropy:.4f}' for k, c in by_kind.items()))
    rows = [f'{c.label:<14} | predicted dH {c.predicted:+.5f} | actual dH {c.actual:+.5f} | '
            f'error {c.relative_error:5.1%} | idealised (eta = lr) predicted dH {c.ideal_predicted:+.2e} | '
            f'actual dH {c.ideal_actual:+.2e} | cos {c.cosine:+.3f} | cos_pi {c.cosine_pi:+.3f} | '
            f'gain {c.gain:.0f}' for c in run.cases]
    return [head] + rows


def _direction(x):
    return 'raises' if x > 0 else 'lowers'


def _span(values, fmt):
    lo, hi = min(values), max(values)
    return format(lo, fmt) if format(lo, fmt) == format(hi, fmt) else f'{format(lo, fmt)} to {format(hi, fmt)}'


def sentences(run, within=0.05):
    """The paragraph discussing run's four cases, every number taken from the records -> list of sentences."""
    cases = run.cases
    if not cases:
        raise ValueError('run has no cases; run_cases makes four')
    worst = max(cases, key=lambda c: c.relative_error)
    out = []
    if worst.relative_error <= within:
        out.append(f'After one plain SGD step at lr {cases[0].lr:g} on the network\'s weights, the first-order '
                   f'prediction is within {worst.relative_error:.1%} of the actual entropy change in each case '
                   f'(worst: {worst.label}).')
    else:
        off = [c.label for c in cases if c.relative_error > within]
        out.append(f'After one plain SGD step at lr {cases[0].lr:g}, the first-order prediction misses the actual '
                   f'change by more than {within:.0%} in {len(off)} of {len(cases)} cases ({", ".join(off)}; worst '
                   f'{worst.relative_error:.1%}): the step is too large for a first-order rule.')
    agree = [c for c in cases if (c.predicted > 0) == (c.actual > 0) == (c.ideal_predicted > 0)]
    if len(agree) == len(cases):
        out.append('The signs follow the covariance rule in all four cases, the same as for free logits: '
                   + '; '.join(f'{c.label} {_direction(c.actual)} the entropy' for c in cases) + '.')
    else:
        off = [c.label for c in cases if c not in agree]
        out.append(f'The signs do not all follow the idealised rule: {", ".join(off)} '
                   f'{"goes" if len(off) == 1 else "go"} the other way.')
    aligned = max(abs(c.cosine) for c in cases) >= 0.5
    out.append(
        f'The network\'s logit change {"is close to" if aligned else "is not"} the idealised eta A (e_a - pi) over the '
        f'whole vocabulary: with each change less its mean, the cosine between the two is '
        f'{_span([c.cosine for c in cases], "+.3f")}; the '
        f'sampled token carries {_span([100 * c.share_on_token for c in cases], ".2f")}% of the change\'s squared '
        f'norm, against {_span([100 * c.ideal_share for c in cases], ".0f")}% in the idealised step, and '
        f'{_span([c.moved_tokens for c in cases], ",d")} other tokens move by at least a tenth as much as it does, '
        'because every logit is computed from the same shared weights.')
    out.append(
        f'Weighted by pi, where the entropy is decided, the cosine is {_span([c.cosine_pi for c in cases], "+.3f")}, '
        f'and along the idealised direction the step is {_span([c.gain for c in cases], ".0f")} times the idealised '
        f'one at eta = lr: one SGD step of lr {cases[0].lr:g} on the weights moves these logits like eta ~ '
        f'{_span([c.gain * c.lr for c in cases], ".2f")} on free logits.')
    return out
