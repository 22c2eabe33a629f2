"""Notebook 14's measurements, run in one call: the estimator facts of 10.2 and 10.3 on SmolLM2's real pairs."""
import time
from dataclasses import dataclass, field

import torch

from agentrl.pretrained import estimators, pairs
from agentrl.pretrained.sampling import Samples
from agentrl.progress import beat


@dataclass
class EstimatorStudy:
    """What run_estimator_study measured, pair by pair, as plain data."""
    setup: pairs.Setup
    step: dict  # one_step's stats: lr, gradient norm, mean reward, groups with a reward signal
    positions: int  # sampled positions kept by the masks
    gradient_positions: int  # the positions the gradient comparison uses
    pairs: list  # [dict] one per reference, see pair_record
    parameters: int  # the model's parameter count, every one of which the gradients cover
    positions_record: dict = field(default_factory=dict)  # the sampled replies and each pair's exact values at
    # every kept position, for a reader who recomputes them with transformers alone (see positions_record)
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


def _digits(tensor):
    return [float(f'{value:.7g}') for value in tensor.tolist()]


def per_position(moments):
    """One pair's exact values at every kept position, in row order, to 7 significant digits."""
    return {'kl': _digits(moments.kl), **{f'{kind} std': _digits(moments.std[kind]) for kind in ('k1', 'k2', 'k3')},
            'k2 mean': _digits(moments.mean['k2'])}


def positions_record(rollouts, references, values):
    """What a reader needs to recompute any position without agentrl: each request's system prompt and user turn,
    the sampled token ids and masks (kept positions are the mask's ones, in row order), how each reference differs
    from pi, and each pair's per_position values."""
    return {'requests': [{'system': rollouts.setup.system, 'user': user, 'tokens': s.tokens.tolist(),
                          'mask': s.mask.long().tolist()} for user, s in zip(rollouts.setup.users, rollouts.samples)],
            'references': [{'name': r.name, 'stepped': r.stepped, 'system': r.system, 'temperature': r.temperature}
                           for r in references],
            'values': values}


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
    records, values, clock['moments'], clock['gradients'] = [], {}, 0.0, 0.0
    for reference in references:
        beat()  # each pair takes minutes on a busy machine: tell the notebook runner work goes on
        ref = pairs.reference_logits(pretrained, rollouts, reference, stepped)
        moments = estimators.pair_moments(reference.name, policy, ref, rollouts.samples)
        middle = time.perf_counter()
        gradients = estimators.gradient_comparison(pretrained.model, grad_samples, [ref[0][:gradient_rows]])
        gradients['kl_mean'] = moments.kl[:int(grad_samples[0].mask.sum())].mean().item()
        clock['gradients'] += time.perf_counter() - middle
        records.append(pair_record(moments, gradients))
        values[reference.name] = per_position(moments)
        del ref, moments
    clock['moments'] = time.perf_counter() - start - clock['gradients']
    return EstimatorStudy(setup, step_stats, rollouts.positions(), int(grad_samples[0].mask.sum()), records,
                          sum(p.numel() for p in pretrained.model.parameters()),
                          positions_record(rollouts, references, values), clock)
