"""Notebook 14's measurements, run in one call: the estimator facts of 10.2 and 10.3 on SmolLM2's real pairs."""
import time
from dataclasses import dataclass, field

import torch

from agentrl.pretrained import estimators, pairs
from agentrl.pretrained.sampling import Samples


@dataclass
class EstimatorStudy:
    """What run_estimator_study measured, pair by pair, as plain data."""
    setup: pairs.Setup
    step: dict  # one_step's stats: lr, gradient norm, mean reward, groups with a reward signal
    positions: int  # sampled positions kept by the masks
    gradient_positions: int  # the positions the gradient comparison uses
    pairs: list  # [dict] one per reference, see pair_record
    parameters: int  # the model's parameter count, every one of which the gradients cover
    seconds: dict = field(default_factory=dict)  # wall time per part, on this machine


def pair_record(moments, gradients):
    """One pair's summary as plain numbers: KL, the pooled and per-position-median ratios, k1's negative chance,
    the sequences, k3's numerics and the gradient comparison."""
    kinds = ('k1', 'k2', 'k3')
    return {
        'name': moments.name,
        'kl_mean': moments.kl.mean().item(),
        'kl_median': moments.kl.median().item(),
        'pooled': {k: moments.pooled(k) for k in kinds},  # (mean/KL, std/KL) of one token drawn at any position
        'median_std_ratio': {k: moments.median_ratio(k) for k in kinds},
        'k1_negative': moments.k1_negative.median().item(),
        'sequences': estimators.sequence_summary(moments),
        'numerics': estimators.k3_numerics(moments.sampled_log_ratio32, moments.sampled_log_ratio64),
        'gradients': gradients,
    }


def gradient_samples(rollouts, rows):
    """The first `rows` sequences of the first request: where the whole-network gradients are taken."""
    first = rollouts.samples[0]
    return [Samples(first.prompt, first.tokens[:rows], first.mask[:rows])]


def run_estimator_study(pretrained, setup=pairs.Setup(), references=pairs.REFERENCES, step=pairs.Step(),
                        gradient_rows=1):
    """Sample from pi, build every reference, and measure each pair exactly -> EstimatorStudy."""
    clock = {}
    start = time.perf_counter()
    generator = torch.Generator().manual_seed(setup.seed)
    rollouts = pairs.draw(pretrained, setup, generator)  # where every pair is measured
    batch = pairs.draw(pretrained, setup, generator)  # what the optimiser step learns from: other replies, so that
    clock['sampling'] = time.perf_counter() - start  # the measured tokens are not the ones the step pushed on
    start = time.perf_counter()
    stepped, step_stats = pairs.one_step(pretrained, batch, step)
    clock['one optimiser step'] = time.perf_counter() - start
    start = time.perf_counter()
    policy = pairs.policy_logits(pretrained, rollouts)
    grad_samples = gradient_samples(rollouts, gradient_rows)
    records, clock['moments'], clock['gradients'] = [], 0.0, 0.0
    for reference in references:
        ref = pairs.reference_logits(pretrained, rollouts, reference, stepped)
        moments = estimators.pair_moments(reference.name, policy, ref, rollouts.samples)
        middle = time.perf_counter()
        gradients = estimators.gradient_comparison(pretrained.model, grad_samples, [ref[0][:gradient_rows]])
        gradients['kl_mean'] = moments.kl[:int(grad_samples[0].mask.sum())].mean().item()
        clock['gradients'] += time.perf_counter() - middle
        records.append(pair_record(moments, gradients))
        del ref, moments
    clock['moments'] = time.perf_counter() - start - clock['gradients']
    return EstimatorStudy(setup, step_stats, rollouts.positions(), int(grad_samples[0].mask.sum()), records,
                          sum(p.numel() for p in pretrained.model.parameters()), clock)
