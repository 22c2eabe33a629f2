"""`make calibrate`: our substrate against what the book's chapters 1-9 show, on seeds 0, 1 and 2.

The calibration set is the RL base and the unregularised default GRPO run (chapter 9's behaviour), nothing
else: no regularised setting of chapter 10 is run here. For each seed this trains the default run for 40
and for 80 steps, evaluates the 40-step policy on the held-out tasks (16 attempts on each of the 10), and
pushes one RL-base batch (the one section 10.6 uses) through 8 full-batch clipped-surrogate steps at
clip_high 0.2. It prints one row per quantity: the book's value, the band the mean over the seeds must fall
in, ours (mean, then the three seeds), and whether it holds. Exit status 1 if a row does not hold.

`--variant '{"rl": {"lr": 3e-4}, "sft": {...}, "model": {...}}'` measures a candidate substrate (other
defaults for RLConfig, SFTConfig, ModelConfig) without changing the package's defaults.
"""
import argparse
import concurrent.futures
import copy
import dataclasses
import json
import multiprocessing
import sys

import torch

from agentrl.ch10.evaluation import diversity
from agentrl.core.logprobs import entropy_from_logits, masked_mean, selected_log_probs
from agentrl.substrate.grpo import RLConfig, compute_advantages, policy_loss, train_rl
from agentrl.substrate.gym import make_env, make_tasks
from agentrl.substrate.model import ModelConfig, count_parameters
from agentrl.substrate.rollout import collate, sample_groups
from agentrl.substrate.sft import SFTConfig, make_rl_base
from agentrl.substrate.tokenizer import build_tokenizer

SEEDS = (0, 1, 2)
PUSH_UPDATES, PUSH_LR, PUSH_CLIP = 8, 1e-3, 0.2  # section 10.6's single-batch experiment, at the default clip


@dataclasses.dataclass(frozen=True)
class Variant:
    """A candidate substrate: overrides of RLConfig, SFTConfig and ModelConfig defaults (empty: the package's)."""
    rl: tuple = ()
    sft: tuple = ()
    model: tuple = ()

    @classmethod
    def from_json(cls, text):
        spec = json.loads(text or '{}')
        unknown = set(spec) - {'rl', 'sft', 'model'}
        if unknown:
            raise ValueError(f'--variant: unknown parts {sorted(unknown)}; allowed: rl, sft, model')
        return cls(**{part: tuple(sorted(spec.get(part, {}).items())) for part in ('rl', 'sft', 'model')})

    def rl_config(self, **fields):
        return RLConfig(**{**dict(self.rl), **fields})


def setup(variant):
    """Tokenizer, train and held-out tasks, RL base of the variant (built once, then loaded from the cache)."""
    tok = build_tokenizer(make_tasks('all'))
    base = make_rl_base(tok, sft_cfg=SFTConfig(**dict(variant.sft)),
                        model_cfg=ModelConfig(vocab_size=len(tok), **dict(variant.model)))
    return tok, make_tasks('train'), make_tasks('heldout'), base


def section_10_6_batch(rl_base, tok, train_tasks, cfg, seed):
    """The RL-base batch section 10.6 studies: one group of cfg.group_size episodes on each of the first 8 training
    tasks, drawn with a generator seeded `seed` -> (collated batch, advantages [B])."""
    episodes = sample_groups(rl_base, lambda: make_env(cfg), train_tasks[:8], tok, cfg, torch.Generator().manual_seed(seed))
    batch = collate(episodes, tok.pad_id)
    return batch, compute_advantages(batch, cfg)


def push_batch(rl_base, batch, advantages, cfg, updates=PUSH_UPDATES, lr=PUSH_LR):
    """Adam on one batch: `updates` full-batch steps of the clipped surrogate from the RL base -> dict of measures.

    Measures: rewarded (policy tokens with A > 0), rare (those with pi_old < 0.5), last_clip_frac, entropy_before,
    entropy_after (policy-token entropy of the whole next-token distribution).
    """
    ids, mask = batch['ids'], batch['action_mask']  # [B, T], [B, T-1]
    with torch.no_grad():
        logits = rl_base(ids)[:, :-1]  # [B, T-1, V]
        old_logp = selected_log_probs(logits, ids[:, 1:])
        before = masked_mean(entropy_from_logits(logits), mask).item()
    rewarded = (advantages[:, None] > 0) & (mask > 0)  # [B, T-1]
    policy = copy.deepcopy(rl_base)
    adam = torch.optim.Adam(policy.parameters(), lr=lr)
    for _ in range(updates):
        loss, stats = policy_loss(selected_log_probs(policy(ids)[:, :-1], ids[:, 1:]), old_logp, advantages, mask, cfg)
        adam.zero_grad()
        loss.backward()
        adam.step()
    with torch.no_grad():
        after = masked_mean(entropy_from_logits(policy(ids)[:, :-1]), mask).item()
    return dict(rewarded=int(rewarded.sum()), rare=int((rewarded & (old_logp.exp() < 0.5)).sum()),
                last_clip_frac=stats['clip_frac'], entropy_before=before, entropy_after=after)


def measure_seed(args):
    """Every calibration measurement of one seed -> dict (runs on one thread, in a worker process or here)."""
    variant, seed = args
    torch.set_num_threads(1)
    tok, train, heldout, base = setup(variant)
    cfg = variant.rl_config(seed=seed, eval_every=0)
    batch, advantages = section_10_6_batch(base, tok, train, variant.rl_config(seed=seed, clip_high=PUSH_CLIP), seed)
    out = dict(seed=seed, vocab=len(tok), params=count_parameters(base),
               push=push_batch(base, batch, advantages, variant.rl_config(clip_high=PUSH_CLIP)))
    model = copy.deepcopy(base)
    out['run40'] = train_rl(model, train, tok, cfg, 40)
    out['heldout'] = diversity(model, base, heldout, tok)
    out['run80'] = train_rl(copy.deepcopy(base), train, tok, cfg, 80)
    return out


def mean(values):
    return sum(values) / len(values)


# quantity, book, band (low, high; None = open), how to read it from one seed's measurements, printed format
ROWS = [
    ('vocabulary', '316', (280, 350), lambda m: m['vocab'], '{:.0f}'),
    ('TinyAgent parameters', '157,244', (140_000, 175_000), lambda m: m['params'], '{:,.0f}'),
    ('policy tokens per episode (RL base)', '12-14', (10, 16), lambda m: m['run40'][0]['policy_tokens'], '{:.1f}'),
    ('RL base: reads per episode', '0.21-0.24', (0.15, 0.30), lambda m: m['run40'][0]['reads'], '{:.3f}'),
    ('RL base: batch reward', '0.17', (0.12, 0.24), lambda m: m['run40'][0]['reward'], '{:.3f}'),
    ('RL base: policy-token entropy', '0.52-0.57', (0.47, 0.62), lambda m: m['run40'][0]['entropy'], '{:.3f}'),
    ('RL base batch of 10.6: A>0 policy tokens', '121', (90, 150), lambda m: m['push']['rewarded'], '{:.1f}'),
    ('that batch: share of A>0 tokens with pi_old < 0.5', '14%', (0.08, 0.22),
     lambda m: m['push']['rare'] / max(m['push']['rewarded'], 1), '{:.1%}'),
    ('that batch, clip_high 0.2, lr 1e-3, 8 full-batch steps: last-step clip_frac', '0.114', (0.07, 0.17),
     lambda m: m['push']['last_clip_frac'], '{:.3f}'),
    ('that batch: entropy after minus before (not higher)', 'falls', (None, 0.0),
     lambda m: m['push']['entropy_after'] - m['push']['entropy_before'], '{:+.3f}'),
    ('none, 40 steps: batch reward at step 5', '0.22', (None, 0.32), lambda m: m['run40'][5]['reward'], '{:.3f}'),
    ('none: batch reward at step 10', '0.41', (0.30, 0.52), lambda m: m['run40'][10]['reward'], '{:.3f}'),
    ('none: batch reward at step 20', '0.72', (0.60, 0.82), lambda m: m['run40'][20]['reward'], '{:.3f}'),
    ('none: batch reward at step 39', '0.86', (0.78, 0.94), lambda m: m['run40'][39]['reward'], '{:.3f}'),
    ('none: policy-token entropy at step 10', '0.37', (0.30, 0.45), lambda m: m['run40'][10]['entropy'], '{:.3f}'),
    ('none: policy-token entropy at step 20', '0.18', (0.13, 0.25), lambda m: m['run40'][20]['entropy'], '{:.3f}'),
    ('none: policy-token entropy, mean of steps 35-39', '0.120', (0.08, 0.16),
     lambda m: mean([h['entropy'] for h in m['run40'][35:40]]), '{:.3f}'),
    ('none: reads per episode at step 39', '0.98', (0.90, None), lambda m: m['run40'][39]['reads'], '{:.3f}'),
    ('none: share of tokens clipped over the run', '0.13%', (0.0005, 0.0030),
     lambda m: mean([h['clip_frac'] for h in m['run40']]), '{:.2%}'),
    ('none, held-out (16 attempts x 10 tasks): pass@1', '0.725', (0.62, 0.82), lambda m: m['heldout']['pass1'], '{:.3f}'),
    ('none, held-out: pass@8', '0.800', (0.70, 0.90), lambda m: m['heldout']['pass8'], '{:.3f}'),
    ('none, held-out: distinct action sequences', '4.3', (3.0, 6.0), lambda m: m['heldout']['distinct'], '{:.2f}'),
    ('none, held-out: invalid calls per episode', '0.04', (None, 0.10), lambda m: m['heldout']['invalid'], '{:.3f}'),
    ('none, held-out: KL from start', '0.237', (0.16, 0.32), lambda m: m['heldout']['kl_start'], '{:.3f}'),
    ('none, 80 steps: final entropy (mean of steps 75-79)', '0.08', (0.05, 0.11),
     lambda m: mean([h['entropy'] for h in m['run80'][75:80]]), '{:.3f}'),
    ('none: 80-step final entropy minus the 40-step one (below)', '-0.04', (None, -1e-9),
     lambda m: mean([h['entropy'] for h in m['run80'][75:80]]) - mean([h['entropy'] for h in m['run40'][35:40]]),
     '{:+.3f}'),
]


def band_text(low, high, fmt):
    if low is None:
        return f'<= {fmt.format(high)}' if high != -1e-9 else '< 0'
    if high is None:
        return f'>= {fmt.format(low)}'
    return f'{fmt.format(low)}-{fmt.format(high)}'


def table(measurements):
    """[(quantity, book, band, ours, holds)] from the seeds' measurements; ours = mean (then each seed)."""
    rows = []
    for quantity, book, (low, high), read, fmt in ROWS:
        values = [read(m) for m in measurements]
        average = mean(values)
        holds = (low is None or average >= low) and (high is None or average <= high)
        ours = f'{fmt.format(average)} ({", ".join(fmt.format(v) for v in values)})'
        rows.append((quantity, book, band_text(low, high, fmt), ours, holds))
    return rows


def print_table(rows, seeds):
    print(f'| quantity | book | band (mean over seeds {", ".join(map(str, seeds))}) | ours: mean (per seed) | holds |')
    print('|---|---|---|---|---|')
    for quantity, book, band, ours, holds in rows:
        print(f'| {quantity} | {book} | {band} | {ours} | {"yes" if holds else "NO"} |')
    print(f'\n{sum(r[-1] for r in rows)} of {len(rows)} rows hold')


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--variant', default='', help='JSON overrides of rl / sft / model defaults (a candidate)')
    parser.add_argument('--seeds', default=','.join(map(str, SEEDS)), help='comma-separated seeds (default 0,1,2)')
    parser.add_argument('--processes', type=int, default=2)
    parser.add_argument('--json', help='also write the raw measurements here')
    args = parser.parse_args(argv)
    variant = Variant.from_json(args.variant)
    seeds = [int(s) for s in args.seeds.split(',')]
    setup(variant)  # builds the RL base once, before the workers load it from the cache
    jobs = [(variant, seed) for seed in seeds]
    if args.processes > 1:
        with concurrent.futures.ProcessPoolExecutor(args.processes, mp_context=multiprocessing.get_context('spawn')) as pool:
            measurements = list(pool.map(measure_seed, jobs))
    else:
        measurements = [measure_seed(job) for job in jobs]
    if args.variant:
        print(f'variant: {args.variant}\n')
    rows = table(measurements)
    print_table(rows, seeds)
    if args.json:
        with open(args.json, 'w') as file:
            json.dump(measurements, file)
    return 0 if all(row[-1] for row in rows) else 1


if __name__ == '__main__':
    sys.exit(main())
