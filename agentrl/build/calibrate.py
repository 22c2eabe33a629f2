"""`python -m agentrl.build.calibrate`: measure the substrate against the book's chapter-9 calibration table.

Trains the default GRPO run from the RL base for 40 and for 80 steps (seed 0; two processes, each on
one thread), measures held-out pass@1 after 40 steps with 16 attempts on each of the 10 held-out
tasks, and prints: quantity | book | acceptable | measured | holds. Exit status 1 if a row fails.
"""
import argparse
import concurrent.futures
import copy
import multiprocessing
import sys

import torch

from agentrl.substrate.grpo import RLConfig, train_rl
from agentrl.substrate.gym import make_env, make_tasks
from agentrl.substrate.model import count_parameters
from agentrl.substrate.rollout import sample_groups
from agentrl.substrate.sft import make_rl_base
from agentrl.substrate.tokenizer import build_tokenizer

HELDOUT_ATTEMPTS = 16
HELDOUT_SEED = 0


def setup():
    """Tokenizer, train and held-out tasks, RL base (built once, then cached)."""
    torch.set_num_threads(1)
    tok = build_tokenizer(make_tasks('all'))
    return tok, make_tasks('train'), make_tasks('heldout'), make_rl_base(tok)


def default_run(steps):
    """The default GRPO run from the RL base for `steps` steps -> (history, held-out pass@1 of the final model)."""
    tok, train, heldout, base = setup()
    cfg = RLConfig(eval_every=0)
    model = copy.deepcopy(base)
    history = train_rl(model, train, tok, cfg, steps)
    return history, heldout_pass1(model, tok, heldout)


def heldout_pass1(model, tok, heldout):
    """Mean pass rate of HELDOUT_ATTEMPTS episodes on each held-out task (sample_groups, fixed generator seed)."""
    cfg = RLConfig(group_size=HELDOUT_ATTEMPTS)
    trajs = sample_groups(model, lambda: make_env(cfg), heldout, tok, cfg,
                              torch.Generator().manual_seed(HELDOUT_SEED))
    return sum(t.info['submitted'] and t.info['hidden_pass'] for t in trajs) / len(trajs)


def mean(values):
    return sum(values) / len(values)


def table_rows(tok, base, run40, run80):
    """The calibration rows: (quantity, book, acceptable, measured text, holds)."""
    history, pass1 = run40
    history80, _ = run80
    entropy = [h['entropy'] for h in history]
    entropy80 = [h['entropy'] for h in history80]
    tokens = [h['policy_tokens'] for h in history]
    start, end = mean(entropy[:5]), mean(entropy[35:40])
    clip = mean([h['clip_frac'] for h in history])
    params = count_parameters(base)
    rows = [
        ('vocabulary', '316', '250-400', f'{len(tok)}', 250 <= len(tok) <= 400),
        ('TinyAgent parameters', '157,244', '120k-200k', f'{params:,}', 120_000 <= params <= 200_000),
        ('policy tokens per episode', '12-14', '8-20',
         f'{mean(tokens):.1f} (steps 0-39; {tokens[0]:.1f} at 0, {tokens[39]:.1f} at 39)', 8 <= mean(tokens) <= 20),
        ('RL base: read calls per episode', '0.21-0.24', '0.10-0.35', f'{history[0]["reads"]:.3f}',
         0.10 <= history[0]['reads'] <= 0.35),
        ('RL base: batch reward at step 0', '0.17', '0.10-0.30', f'{history[0]["reward"]:.3f}',
         0.10 <= history[0]['reward'] <= 0.30),
        ('RL base: policy-token entropy at step 0', '0.52-0.57 nats', '0.40-0.80', f'{entropy[0]:.3f}',
         0.40 <= entropy[0] <= 0.80),
        ('default GRPO, 40 steps, seed 0: entropy, mean of steps 35-39', '0.12', '<= 0.35 x mean of steps 0-4',
         f'{end:.3f} ({end / start:.2f} x {start:.3f})', end <= 0.35 * start),
        ('same run: reads per episode at step 39', '0.98', '>= 0.8', f'{history[39]["reads"]:.3f}',
         history[39]['reads'] >= 0.8),
        ('same run: batch reward at step 39', '0.86', '>= 0.7', f'{history[39]["reward"]:.3f}',
         history[39]['reward'] >= 0.7),
        ('same run: held-out pass@1 (16 attempts x 10 tasks)', '0.725', '>= 0.6', f'{pass1:.3f}', pass1 >= 0.6),
        ('default GRPO, 80 steps: entropy at the end (mean of steps 75-79)', '0.08', 'lower than at step 40 (35-39)',
         f'{mean(entropy80[75:80]):.3f} vs {mean(entropy80[35:40]):.3f}',
         mean(entropy80[75:80]) < mean(entropy80[35:40])),
        ('default run: share of tokens clipped (mean over 40 steps)', '0.13%', 'under 1%', f'{100 * clip:.2f}%',
         clip < 0.01),
    ]
    return rows


def print_table(rows):
    """Print rows as a Markdown table."""
    print('| quantity | book | acceptable | measured | holds |')
    print('|---|---|---|---|---|')
    for quantity, book, acceptable, measured, holds in rows:
        print(f'| {quantity} | {book} | {acceptable} | {measured} | {"yes" if holds else "NO"} |')


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--sequential', action='store_true', help='run the 40- and 80-step runs in this process')
    args = parser.parse_args(argv)
    tok, _, _, base = setup()  # builds the RL base once, before the workers load it from the cache
    if args.sequential:
        run40, run80 = default_run(40), default_run(80)
    else:
        with concurrent.futures.ProcessPoolExecutor(2, mp_context=multiprocessing.get_context('spawn')) as pool:
            run40, run80 = pool.map(default_run, [40, 80])
    rows = table_rows(tok, base, run40, run80)
    print_table(rows)
    same = run80[0][:40] == run40[0]
    print(f'\nthe 80-step run repeats the 40-step run step for step: {"yes" if same else "NO"}')
    return 0 if all(row[-1] for row in rows) and same else 1


if __name__ == '__main__':
    sys.exit(main())
