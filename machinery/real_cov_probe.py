"""How large Cui et al.'s covariance scores are on SmolLM2's GRPO minibatches, to choose Clip-Cov's bounds for the
real-model sweep (python -m machinery.real_cov_probe [--steps 4] [--seed 0]).

It trains the sweep's unregularised setting for a few steps with a plug-in that only looks: per minibatch it keeps the
number of reply tokens, how many of them the PPO clip leaves free, and how many free ones have a score above each
threshold, and writes results/real_cov_probe.json. The paper's bounds (1, 5) were set for its models and batches;
this measures what they select here. `make` never runs it.
"""
import argparse
import datetime
import json

import torch

from agentrl.atomic import atomic_output
from agentrl.ch10.regularizers import centered_cross_product, clipped_sides
from agentrl.paths import REPO
from agentrl.pretrained.loader import load_smollm2
from agentrl.realrl import runs
from agentrl.substrate.grpo import Plugin
from machinery.substrate_sweep import cpu_name

RECORD = REPO / 'results' / 'real_cov_probe.json'
THRESHOLDS = (0.05, 0.1, 0.2, 0.3, 0.5, 1.0)  # lower bounds whose selections are counted
TOP = 8  # the largest scores kept per minibatch


class CovarianceWatch(Plugin):
    """Records the covariance scores of each minibatch; the surrogate is returned unchanged."""

    def __init__(self):
        self.cfg, self.minibatches = None, []

    def begin(self, model, cfg):
        self.cfg = cfg

    def reshape_surrogate(self, surrogate, logp, old_logp, advantages, mask, stats):
        with torch.no_grad():
            cov = centered_cross_product(logp, advantages, mask)  # [b, T]
            free = (mask > 0) & ~torch.logical_or(*clipped_sides(torch.exp(logp - old_logp), advantages, self.cfg))
            scores = cov[free]
            self.minibatches.append(dict(
                tokens=int((mask > 0).sum()), free=int(free.sum()),
                above={str(t): int((scores > t).sum()) for t in THRESHOLDS},
                top=[round(v, 4) for v in scores.topk(min(TOP, scores.numel())).values.tolist()]))
        return surrogate


def probe(steps, seed, say=print):
    spec = runs.setting_spec('none', seed, steps=steps)
    cfg = spec.config()
    watch = CovarianceWatch()
    original = runs.plugins_for
    runs.plugins_for = lambda spec, cfg: original(spec, cfg) + [watch]
    try:
        run = runs.train_and_evaluate(spec, load_smollm2())
    finally:
        runs.plugins_for = original
    per_step = cfg.epochs * cfg.minibatches
    record = dict(date=datetime.date.today().isoformat(), cpu=cpu_name(), setting='none', seed=seed, steps=steps,
                  thresholds=list(THRESHOLDS), minibatches=watch.minibatches,
                  entropy=[step['entropy'] for step in run['history']], minibatches_per_step=per_step)
    with atomic_output(RECORD, suffix='.json') as tmp:
        tmp.write_text(json.dumps(record, indent=1) + '\n')
    for t in THRESHOLDS:
        counts = [m['above'][str(t)] for m in watch.minibatches]
        say(f'score > {t}: selects none in {sum(c == 0 for c in counts)} of {len(counts)} minibatches; '
            f'median {sorted(counts)[len(counts) // 2]} tokens')
    return record


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--steps', type=int, default=4)
    parser.add_argument('--seed', type=int, default=0)
    args = parser.parse_args(argv)
    probe(args.steps, args.seed)


if __name__ == '__main__':
    main()
