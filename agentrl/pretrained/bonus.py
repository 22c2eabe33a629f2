"""The entropy bonus on a real vocabulary: a few Adam steps of SmolLM2 with five losses, and where the mass goes.

The bonus's loss -alpha H has logit gradient alpha pi_j (log pi_j + H): every token with log pi_j < -H is pushed up.
On 49,152 tokens nearly all of them are tokens the policy should never emit. The five variants, each from the same
reference weights and on one batch sampled once from the reference (the steps reuse it, as PPO's epochs do):

  bonus              -alpha H                       (H: the full-vocabulary entropy at each of the batch's positions)
  reward             the clipped surrogate with group-normalised advantages of a parse reward
  reward + bonus     both
  reward + KL        the surrogate + alpha KL(pi || ref), the exact full-vocabulary KL at each position
  reward + nucleus   the surrogate - alpha H_S, H_S the entropy of pi renormalised over the reference's top-p set

Measured at held-out positions: the positions of a fresh batch sampled from the reference with another seed, the same
batch whose texts are the reference's row of the output table; each trained variant's replies are drawn with that
seed too.
"""
import ast
import math
import re
import time
from dataclasses import asdict, dataclass, field

import torch

from agentrl.ch10.ties import Z
from agentrl.core.logprobs import entropy_from_logits, masked_mean
from agentrl.core.off_policy import clipped_objective
from agentrl.cpu import adam, fixed_threads
from agentrl.pretrained.covariance import restore
from agentrl.pretrained.loader import MODEL_THREADS, trainable_copy
from agentrl.pretrained.sampling import chat_ids, sample
from agentrl.progress import beat

PROMPT = 'Write a Python function that returns the sum of a list.'
ALPHA = 0.1  # the bonus's and the KL's coefficient
LR = 2e-5  # Adam's learning rate
STEPS = 3  # Adam steps on the one batch
CLIP = 0.2  # the surrogate's clip on both sides
TOP_K = 50
TOP_P = 0.9
VARIANTS = ('bonus', 'reward', 'reward + bonus', 'reward + KL', 'reward + nucleus')
METRICS = ('outside_top_k', 'outside_nucleus', 'never_emitted', 'entropy', 'kl')
FENCE = re.compile(r'```[ \t]*(?:python|py)?[ \t]*\n(.*?)```', re.DOTALL)


# --- the reward ------------------------------------------------------------------------------------------------------

def code_block(text):
    """The first closed fenced block (```python, ```py or bare ```) of a reply -> its code, or None."""
    found = FENCE.search(text)
    return found.group(1) if found else None


def parses(text):
    """1.0 if the reply's first closed fenced block holds non-empty code that ast.parse accepts, else 0.0.

    A block cut off by the length limit is not closed and scores 0."""
    code = code_block(text)
    if code is None or not code.strip():
        return 0.0
    try:
        ast.parse(code)
    except (SyntaxError, ValueError):
        return 0.0
    return 1.0


def group_advantages(rewards, eps=1e-6):
    """GRPO's (r - mean) / (std + eps) within one group: [G] -> [G]; all zeros when every reward is the same."""
    rewards = torch.as_tensor(rewards, dtype=torch.float32)
    if rewards.ndim != 1 or rewards.numel() < 2:
        raise ValueError(f'rewards must be one group of at least 2 values, got shape {tuple(rewards.shape)}')
    spread = rewards.std()
    if spread == 0:
        return torch.zeros_like(rewards)
    return (rewards - rewards.mean()) / (spread + eps)


# --- sets and masses over the vocabulary -----------------------------------------------------------------------------

def top_k_set(logp, k):
    """The k most likely tokens at each position: logp [..., V] -> bool [..., V]."""
    if not 1 <= k <= logp.shape[-1]:
        raise ValueError(f'k must be between 1 and the vocabulary size {logp.shape[-1]}, got {k}')
    keep = torch.zeros_like(logp, dtype=torch.bool)
    return keep.scatter_(-1, logp.topk(k, -1).indices, True)


def nucleus_set(logp, p):
    """The top-p set at each position: the most likely tokens whose mass reaches p (the one crossing p included):
    logp [..., V] -> bool [..., V]."""
    if not 0 < p <= 1:
        raise ValueError(f'p must be in (0, 1], got {p}')
    probs, order = torch.exp(logp.double()).sort(-1, descending=True)
    before = probs.cumsum(-1) - probs  # [..., V], the mass strictly above each token in the order
    keep_sorted = before < p
    keep_sorted[..., 0] = True  # the most likely token is always in
    return torch.zeros_like(keep_sorted).scatter_(-1, order, keep_sorted)


def mass_outside(logp, keep):
    """Probability outside the set: sum of pi_j over the tokens where keep is False: [..., V] x 2 -> [...] float64."""
    if logp.shape != keep.shape:
        raise ValueError(f'logp has shape {tuple(logp.shape)} and keep {tuple(keep.shape)}; they must be equal')
    return torch.where(keep, 0.0, logp.double().exp()).sum(-1)


def restricted_entropy(logp, keep):
    """Entropy of pi renormalised over the set (tokens outside get probability 0): [..., V] x 2 -> [...]."""
    return entropy_from_logits(logp.masked_fill(~keep, float('-inf')))


def exact_kl(logp, ref_logp):
    """KL(pi || ref) = sum_j pi_j (log pi_j - log ref_j) over the whole vocabulary: [..., V] x 2 -> [...]."""
    if logp.shape != ref_logp.shape:
        raise ValueError(f'logp has shape {tuple(logp.shape)} and ref_logp {tuple(ref_logp.shape)}; they must be '
                         'equal')
    return (logp.exp() * (logp - ref_logp)).sum(-1)


def raised_by_bonus(logp):
    """How many tokens the bonus's gradient pushes up at each position: those with log pi_j < -H: [..., V] -> [...]."""
    h = -(logp.double().exp() * logp.double()).sum(-1, keepdim=True)
    return (logp.double() < -h).sum(-1)


def emitted_set(tokens, mask, vocab_size):
    """Every token id the samples hold at their policy positions -> bool [V]."""
    seen = torch.zeros(vocab_size, dtype=torch.bool)
    seen[tokens[mask > 0]] = True
    return seen


# --- ties ------------------------------------------------------------------------------------------------------------

def rates_differ(k1, n1, k2, n2, z=Z):
    """Whether two pass rates k1/n1 and k2/n2 differ beyond z binomial standard errors of their difference (the pooled
    rate's sqrt(p (1 - p) (1/n1 + 1/n2))); a gap inside it is a tie."""
    if min(n1, n2) < 1 or not (0 <= k1 <= n1 and 0 <= k2 <= n2):
        raise ValueError(f'rates need 0 <= k <= n and n >= 1, got {k1}/{n1} and {k2}/{n2}')
    pooled = (k1 + k2) / (n1 + n2)
    se = math.sqrt(pooled * (1 - pooled) * (1 / n1 + 1 / n2))
    return abs(k1 / n1 - k2 / n2) > z * se


def paired_compare(a, b, z=Z):
    """'higher', 'lower' or 'tied': the mean of a against b over the same positions, tied when the mean paired
    difference is within z standard errors (sd / sqrt(n)). Positions within one reply are correlated, so this
    tolerance is if anything too narrow."""
    d = torch.as_tensor(a, dtype=torch.float64) - torch.as_tensor(b, dtype=torch.float64)
    if d.ndim != 1 or d.numel() < 2:
        raise ValueError(f'paired_compare needs two equal-length lists of at least 2 values, got {d.numel()}')
    se = float(d.std() / math.sqrt(d.numel()))
    mean = float(d.mean())
    if abs(mean) <= z * se:
        return 'tied'
    return 'higher' if mean > 0 else 'lower'


# --- the run ---------------------------------------------------------------------------------------------------------

@dataclass
class VariantRecord:
    """One model (the reference or a trained variant), measured at the held-out positions and on its own samples."""
    name: str
    per_position: dict  # {metric: [value at each held-out position]}, METRICS
    texts: list  # its replies to the prompt (seeded), decoded up to the end of turn
    parsed: list  # parses() of each reply
    losses: list = field(default_factory=list)  # the training loss before each step (empty for the reference)

    def mean(self, metric):
        values = self.per_position[metric]
        return sum(values) / len(values)

    @property
    def n_parsed(self):
        return int(sum(self.parsed))

    def as_dict(self):
        return asdict(self)


@dataclass
class BonusRun:
    """What run_variants measured, with the settings that produced it."""
    reference: VariantRecord
    variants: list  # [VariantRecord] in VARIANTS order
    alpha: float
    lr: float
    steps: int
    top_k: int
    top_p: float
    prompt: str
    group: int  # replies in the training batch
    length: int  # tokens sampled per reply
    train_seed: int
    eval_seed: int
    train_rewards: list  # parses() of the training batch's replies
    n_emitted: int  # distinct tokens the reference emitted in its training and held-out replies
    n_positions: int  # held-out positions measured
    vocab_size: int
    typical: dict  # medians over held-out positions under the reference: entropy, raised, top_k_mass, nucleus_size
    seconds: dict  # wall time of each part

    def variant(self, name):
        for v in self.variants:
            if v.name == name:
                return v
        raise ValueError(f'no variant {name!r}; this run has {", ".join(v.name for v in self.variants)}')


def _forward_logp(model, ids, tokens):
    """log-probs over the vocabulary at each sampled position: [P], [N, T] -> [N, T, V] (grad as the caller allows)."""
    full = torch.cat([ids.expand(tokens.shape[0], -1), tokens], 1)  # [N, P + T]
    return torch.log_softmax(model(full).logits[:, ids.numel() - 1:-1].float(), -1)


def variant_loss(name, logp, tokens, mask, ref_logp, advantages, nucleus, alpha, clip=CLIP):
    """The loss of one variant on the batch: logp, ref_logp [N, T, V], tokens, mask [N, T], advantages [N],
    nucleus bool [N, T, V] -> scalar."""
    if name not in VARIANTS:
        raise ValueError(f'unknown variant {name!r}; allowed: {", ".join(map(repr, VARIANTS))}')
    loss = torch.zeros(())
    if name.startswith('reward'):
        chosen = logp.gather(-1, tokens[..., None])[..., 0]  # [N, T]
        old = ref_logp.gather(-1, tokens[..., None])[..., 0]  # the batch was drawn by the reference
        ratio = torch.exp(chosen - old)
        loss = loss - masked_mean(clipped_objective(ratio, advantages[:, None].expand_as(ratio), clip, clip), mask)
    if name in ('bonus', 'reward + bonus'):
        loss = loss - alpha * masked_mean(entropy_from_logits(logp), mask)
    if name == 'reward + KL':
        loss = loss + alpha * masked_mean(exact_kl(logp, ref_logp), mask)
    if name == 'reward + nucleus':
        loss = loss - alpha * masked_mean(restricted_entropy(logp, nucleus), mask)
    return loss


def measure(logp, ref_logp, mask, top, nucleus, emitted):
    """Per held-out position (mask's ones, flattened) each of METRICS -> {metric: [floats]}."""
    keep = mask > 0  # [N, T]
    values = {'outside_top_k': mass_outside(logp, top), 'outside_nucleus': mass_outside(logp, nucleus),
              'never_emitted': mass_outside(logp, emitted.expand_as(logp)),
              'entropy': entropy_from_logits(logp.double()), 'kl': exact_kl(logp.double(), ref_logp.double())}
    return {k: v[keep].tolist() for k, v in values.items()}


def run_variants(pretrained, alpha=ALPHA, lr=LR, steps=STEPS, group=8, length=48, n_eval=8, train_seed=0,
                 eval_seed=1, top_k=TOP_K, top_p=TOP_P, prompt=PROMPT, variants=VARIANTS):
    """Sample a training batch from the reference, take `steps` Adam steps of each variant from the reference weights
    on it, and measure each at the held-out positions and on n_eval replies -> BonusRun. Every model's replies are
    drawn with the same seed (eval_seed) as the reference's held-out batch, so they differ only through the weights."""
    if not (alpha >= 0 and lr > 0 and steps >= 1):
        raise ValueError(f'need alpha >= 0, lr > 0 and steps >= 1, got alpha={alpha}, lr={lr}, steps={steps}')
    if group < 2 or n_eval < 1 or length < 2:
        raise ValueError(f'need group >= 2 (advantages are relative), n_eval >= 1 and length >= 2, got group={group}, '
                         f'n_eval={n_eval}, length={length}')
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        raise ValueError(f'unknown variants {unknown}; allowed: {", ".join(map(repr, VARIANTS))}')
    clock, seconds = time.perf_counter(), {}

    def lap(part):
        nonlocal clock
        now = time.perf_counter()
        seconds[part] = seconds.get(part, 0.0) + now - clock
        clock = now

    model, tok = pretrained.model, pretrained.tokenizer
    end_id = tok.convert_tokens_to_ids('<|im_end|>')
    ids = chat_ids(tok, prompt)  # [P]
    batch = sample(model, ids, group, length, torch.Generator().manual_seed(train_seed), end_id=end_id)
    held = sample(model, ids, n_eval, length, torch.Generator().manual_seed(eval_seed), end_id=end_id)
    lap('reference samples')
    rewards = [parses(t) for t in batch.texts(tok)]
    advantages = group_advantages(rewards)  # [G]
    with fixed_threads(MODEL_THREADS), torch.no_grad():
        ref_logp = _forward_logp(model, ids, batch.tokens)  # [G, T, V]
        ref_held = _forward_logp(model, ids, held.tokens)  # [E, T, V]
    train_nucleus = nucleus_set(ref_logp, top_p)  # [G, T, V]
    held_top, held_nucleus = top_k_set(ref_held, top_k), nucleus_set(ref_held, top_p)  # [E, T, V]
    emitted = emitted_set(torch.cat([batch.tokens, held.tokens]), torch.cat([batch.mask, held.mask]),
                          ref_held.shape[-1])  # [V]
    keep = held.mask > 0
    typical = {'entropy': float(entropy_from_logits(ref_held.double())[keep].median()),
               'raised': int(raised_by_bonus(ref_held)[keep].median()),
               'top_k_mass': float((1 - mass_outside(ref_held, held_top))[keep].median()),
               'nucleus_size': int(held_nucleus.sum(-1)[keep].median())}
    held_texts = held.texts(tok)
    reference = VariantRecord('reference', measure(ref_held, ref_held, held.mask, held_top, held_nucleus, emitted),
                              held_texts, [parses(t) for t in held_texts])
    lap('reference measures')
    copy = trainable_copy(model)
    records = []
    for name in variants:
        restore(copy, model)
        optimiser = adam([p for p in copy.parameters() if p.requires_grad], lr)
        losses = []
        with fixed_threads(MODEL_THREADS):
            for _ in range(steps):
                beat()  # each Adam step through the whole model: tell the notebook runner work goes on
                optimiser.zero_grad(set_to_none=True)
                logp = _forward_logp(copy, ids, batch.tokens)  # [G, T, V]
                loss = variant_loss(name, logp, batch.tokens, batch.mask, ref_logp, advantages, train_nucleus, alpha)
                loss.backward()
                optimiser.step()
                losses.append(float(loss.detach()))
            del optimiser, logp, loss
            lap('training')
            with torch.no_grad():
                after = _forward_logp(copy, ids, held.tokens)  # [E, T, V]
            per_position = measure(after, ref_held, held.mask, held_top, held_nucleus, emitted)
            lap('measures')
        out = sample(copy, ids, n_eval, length, torch.Generator().manual_seed(eval_seed), end_id=end_id)
        texts = out.texts(tok)
        records.append(VariantRecord(name, per_position, texts, [parses(t) for t in texts], losses))
        lap('samples after')
    restore(copy, model)
    return BonusRun(reference, records, alpha, lr, steps, top_k, top_p, prompt, group, length, train_seed, eval_seed,
                    rewards, int(emitted.sum()), int(keep.sum()), ref_held.shape[-1], typical, seconds)


# --- what the notebook prints ----------------------------------------------------------------------------------------

LABELS = {'outside_top_k': 'outside top-{k}', 'outside_nucleus': 'outside top-p {p:g}', 'never_emitted': 'never emitted',
          'entropy': 'entropy', 'kl': 'KL to ref'}


def table_lines(run):
    """The settings line, then one row per model: the means over held-out positions and the replies that parse."""
    n_rows = len(run.reference.parsed)
    head = (f'Adam lr {run.lr:g}, {run.steps} steps on one batch of {run.group} replies x {run.length} tokens '
            f'({int(sum(run.train_rewards))}/{run.group} parse), alpha {run.alpha:g} | means over {run.n_positions} '
            f'held-out positions of {n_rows} reference replies | never emitted: outside the {run.n_emitted} tokens '
            f'the reference emitted in its {run.group + n_rows} replies')
    names = [LABELS[m].format(k=run.top_k, p=run.top_p) for m in METRICS]
    width = max(len(v.name) for v in [run.reference] + run.variants)
    lines = [head, ' | '.join([f'{"model":<{width}}'] + names + ['parses'])]
    for v in [run.reference] + run.variants:
        cells = [f'{v.mean(m):>{len(n)}.4f}' for m, n in zip(METRICS, names)]
        lines.append(' | '.join([f'{v.name:<{width}}'] + cells + [f'{v.n_parsed}/{len(v.parsed)}']))
    return lines


def example_markdown(run, n=1, max_lines=8):
    """The first n replies of every model as Markdown: a heading line per model (whether its code parses), then the
    reply verbatim in a ~~~ block (replies hold ``` fences of their own), cut after max_lines lines."""
    parts = []
    for v in [run.reference] + run.variants:
        for text, parsed in list(zip(v.texts, v.parsed))[:n]:
            lines = text.splitlines() or ['']
            shown = '\n'.join(lines[:max_lines]) + ('\n…' if len(lines) > max_lines else '')
            parts.append(f'**{v.name}** ({"its code parses" if parsed else "no closed code block that parses"}):\n\n'
                         f'~~~text\n{shown}\n~~~')
    return '\n\n'.join(parts)


def _pct(x):
    return f'{100 * x:.2f}%'


def _versus(a, b, metric):
    """'higher by 0.55 pp' (masses, in percentage points), 'lower by 0.061 nats' or 'tied, +0.02 pp': model a against
    model b on metric, by paired_compare over the positions."""
    word = paired_compare(a.per_position[metric], b.per_position[metric])
    diff = a.mean(metric) - b.mean(metric)
    amount = f'{100 * diff:+.2f} pp' if metric not in ('entropy', 'kl') else f'{diff:+.3f} nats'
    return f'tied, {amount}' if word == 'tied' else f'{word} by {amount.lstrip("+-")}'


def sentences(run):
    """The paragraph discussing run, every number and comparison taken from the records -> list of sentences."""
    ref, t = run.reference, run.typical
    out = [f'At the median held-out position the reference\'s entropy is {t["entropy"]:.3f} nats, its top {run.top_k} '
           f'tokens hold {_pct(t["top_k_mass"])} of the probability and its top-p {run.top_p:g} set has '
           f'{t["nucleus_size"]} token{"s" if t["nucleus_size"] != 1 else ""}; the bonus\'s gradient pushes up '
           f'{t["raised"]:,} of the {run.vocab_size:,} tokens there (every token with log pi < -H).']
    names = [v.name for v in run.variants]
    if 'bonus' in names:
        v = run.variant('bonus')
        moves = {m: _versus(v, ref, m) for m in METRICS}  # "higher by ..." etc.
        out.append(
            f'{run.steps} Adam steps of the bonus alone '
            f'{"move probability into" if moves["outside_top_k"].startswith("higher") else "do not move probability into"}'
            f' the tail: outside the reference\'s top '
            f'{run.top_k} from {_pct(ref.mean("outside_top_k"))} to {_pct(v.mean("outside_top_k"))} '
            f'({moves["outside_top_k"]}), onto tokens the reference never emitted from {_pct(ref.mean("never_emitted"))} '
            f'to {_pct(v.mean("never_emitted"))} ({moves["never_emitted"]}); the entropy goes from '
            f'{ref.mean("entropy"):.3f} to {v.mean("entropy"):.3f} nats and the KL to the reference reaches '
            f'{v.mean("kl"):.3f}.')
    if {'reward', 'reward + bonus'} <= set(names):
        r, rb = run.variant('reward'), run.variant('reward + bonus')
        out.append(
            f'Added to the reward, the bonus leaves {_pct(rb.mean("outside_top_k"))} outside the top {run.top_k} against '
            f'{_pct(r.mean("outside_top_k"))} for the reward alone ({_versus(rb, r, "outside_top_k")}) and '
            f'{_pct(rb.mean("never_emitted"))} on never-emitted tokens against {_pct(r.mean("never_emitted"))} '
            f'({_versus(rb, r, "never_emitted")}); entropy {rb.mean("entropy"):.3f} against '
            f'{r.mean("entropy"):.3f} ({_versus(rb, r, "entropy")}).')
    if {'reward', 'reward + KL'} <= set(names):
        r, rk = run.variant('reward'), run.variant('reward + KL')
        same_start = abs(rk.losses[0] - r.losses[0]) < 1e-6
        out.append(
            f'The KL penalty at the same coefficient gives KL {rk.mean("kl"):.4f} against {r.mean("kl"):.4f} for the '
            f'reward alone ({_versus(rk, r, "kl")}) and {_pct(rk.mean("outside_top_k"))} outside the top '
            f'{run.top_k} ({_versus(rk, r, "outside_top_k")})'
            + ('; its first step is the reward\'s own, since the KL and its gradient are zero at the reference, so in '
               f'{run.steps} steps it has little to act on.' if same_start else '.'))
    if {'reward', 'reward + nucleus'} <= set(names):
        r, rn = run.variant('reward'), run.variant('reward + nucleus')
        out.append(
            f'The bonus restricted to the reference\'s top-p {run.top_p:g} set gives entropy '
            f'{rn.mean("entropy"):.3f} against {r.mean("entropy"):.3f} for the reward alone '
            f'({_versus(rn, r, "entropy")}) while the mass outside that set stays at '
            f'{_pct(rn.mean("outside_nucleus"))} (reference {_pct(ref.mean("outside_nucleus"))}, '
            f'{_versus(rn, ref, "outside_nucleus")}).')
    n = len(ref.parsed)
    differ = [v.name for v in run.variants if rates_differ(v.n_parsed, len(v.parsed), ref.n_parsed, n)]
    out.append(
        'Replies whose first fenced code block is closed and parses: '
        + ', '.join(f'{v.name} {v.n_parsed}/{len(v.parsed)}' for v in [ref] + run.variants) + '. '
        + (f'Against the reference, only {", ".join(differ)} differ{"s" if len(differ) == 1 else ""}'
           if differ else 'None of these differs from the reference') +
        f' by more than {Z:g} binomial standard errors of the difference (pooled rate); the other gaps are ties.'
        if differ else
        'Replies whose first fenced code block is closed and parses: '
        + ', '.join(f'{v.name} {v.n_parsed}/{len(v.parsed)}' for v in [ref] + run.variants)
        + f'. No variant differs from the reference by more than {Z:g} binomial standard errors of the difference '
          f'(pooled rate): with {n} replies each these gaps are ties.')
    out.append('Comparisons in brackets: the mean paired difference over the held-out positions against '
               f'{Z:g} of its standard errors, tied inside it; positions within one reply are correlated, so the '
               'rule is if anything too ready to call a difference, and it says nothing of how another training batch '
               'would have moved the weights (one batch, one seed).')
    return out
