"""The pretrained model's part of `make bench`: SmolLM2-135M-Instruct's speed in tokens per second, beside a floor.

On its fixed MODEL_THREADS threads: a forward over sampled continuations (next_token_logprobs), a forward and backward
through a trainable copy, and sampling with the KV cache. The floor is not a FLOP count over a rate, as in
machinery/bench.py: it is timed, next to each repetition, as the same linear layers' products done as plain
torch.matmul with the model's own weights, on the same threads, at the same rows per model call (one call of all the
rows for a forward; the prompt's rows and then one row per continuation per sampled token for sampling; the backward
adds each layer's input and weight gradients, twice the forward's products). The ratio model / floor is what
attention, norms, activations, the log-softmax over the vocabulary and Python add to the products the model cannot
avoid. Its FLOP formula is held to torch's own count of a Llama forward and backward by tests/test_speed_tools.py.
"""
import os
import statistics
import time

import torch

from agentrl.cpu import fixed_threads
from agentrl.pretrained.loader import MODEL_THREADS
from machinery.bench import MATMUL_SIZE, matmul_rate, rate_sample

MODEL_PROMPT = 'Name three prime numbers and say in one sentence why each is prime.'  # one chat turn, as sampled
MODEL_SAMPLES, MODEL_LENGTH = 2, 16  # continuations per measurement and tokens sampled in each: small, so the part stays short


def linear_weights(model):
    """The weight [out, in] of every torch.nn.Linear in `model`, in module order: the matrix products of one forward
    (a tied lm_head once, as the model runs it; the embedding lookup is no product)."""
    return [module.weight for module in model.modules() if isinstance(module, torch.nn.Linear)]


def linear_flops(weights, rows, backward=False):
    """FLOPs of the linear layers on `rows` tokens: 2 * rows * in * out each; with backward, also the gradient of
    each layer's input and of its weight, products of the same size, so three times the forward."""
    forward = sum(2 * rows * weight.numel() for weight in weights)
    return 3 * forward if backward else forward


class MatmulFloor:
    """The linear layers' products alone, as plain torch.matmul with the model's own weights (so the same bytes are
    read as in the model) on seeded inputs, one pass per model call; `calls` lists each call's rows."""

    def __init__(self, weights, calls, backward=False):
        self.weights, self.calls, self.backward = weights, list(calls), backward
        generator = torch.Generator().manual_seed(0)
        sizes = sorted({d for w in weights for d in w.shape})
        self.inputs = {(rows, size): torch.randn(rows, size, generator=generator)
                       for rows in set(self.calls) for size in sizes}  # drawn once, outside the timing

    @property
    def flops(self):
        return sum(linear_flops(self.weights, rows, self.backward) for rows in self.calls)

    def run(self):
        """One pass: per call, x @ W.T for every weight (and, with backward, g @ W and g.T @ x)."""
        with torch.no_grad():
            for rows in self.calls:
                for weight in self.weights:
                    out_size, in_size = weight.shape
                    x = self.inputs[rows, in_size]
                    torch.matmul(x, weight.t())
                    if self.backward:
                        grad = self.inputs[rows, out_size]
                        torch.matmul(grad, weight)  # the input's gradient [rows, in]
                        torch.matmul(grad.t(), x)  # the weight's gradient [out, in]


def timed(function, threads):
    """Seconds of one call of `function` on `threads` threads."""
    with fixed_threads(threads):
        start = time.perf_counter()
        function()
        return time.perf_counter() - start


def model_speed(repetitions):
    """Time SmolLM2's forward, forward + backward and sampling, each next to its matmul floor -> (a dict describing
    the setting, per measurement a dict of name, tokens, seconds and floor seconds per repetition, FLOPs)."""
    from agentrl.pretrained.loader import load_smollm2, trainable_copy
    from agentrl.pretrained.sampling import chat_ids, next_token_logprobs, sample

    pretrained = load_smollm2()
    model, n, length = pretrained.model, MODEL_SAMPLES, MODEL_LENGTH
    prompt = chat_ids(pretrained.tokenizer, MODEL_PROMPT)
    generator = torch.Generator().manual_seed(0)
    tokens = sample(model, prompt, n, length, generator).tokens  # what the forward and backward read
    trainable = trainable_copy(model)
    weights = linear_weights(model)
    rows = n * (prompt.numel() + length)

    def forward_backward():
        trainable.zero_grad(set_to_none=True)
        logprobs = next_token_logprobs(trainable, prompt, tokens, grad=True)
        logprobs.gather(-1, tokens[..., None]).mean().backward()

    plan = [  # name, the timed work, its floor, the tokens it is credited with
        (f'forward, next_token_logprobs ({n} x {prompt.numel()} + {length} tokens)',
         lambda: next_token_logprobs(model, prompt, tokens), MatmulFloor(weights, [rows]), rows),
        ('forward + backward, a trainable copy', forward_backward, MatmulFloor(weights, [rows], backward=True), rows),
        (f'sampling {n} x {length} tokens after the prompt (KV cache)',
         lambda: sample(model, prompt, n, length, generator), MatmulFloor(weights, [n * prompt.numel()] + [n] * (length - 1)), n * length),
    ]
    results = []
    for name, work, floor, credited in plan:
        work(), floor.run()  # warm-up
        seconds, floors = [], []
        for _ in range(repetitions):
            floors.append(timed(floor.run, MODEL_THREADS))
            seconds.append(timed(work, MODEL_THREADS))
        results.append(dict(name=name, tokens=credited, seconds=seconds, floors=floors, flops=floor.flops))
    about = dict(threads=MODEL_THREADS, load_seconds=pretrained.load_seconds, parameters=pretrained.n_parameters,
                 linear=sum(w.numel() for w in weights), prompt=prompt.numel())
    return about, results


MODEL_HEADER = ('| measurement | tokens | median s | tokens/s | floor s | floor GFLOP/s | ratio |\n'
                '|---|---|---|---|---|---|---|')


def model_row(name, tokens, seconds, floors, flops):
    """A table row: tokens per call, median seconds, tokens per second at the median, median floor seconds, the
    floor's rate at its median, median of the per-repetition ratios seconds / floor."""
    ratios = [s / f for s, f in zip(seconds, floors)]
    median, floor = statistics.median(seconds), statistics.median(floors)
    return (f'| {name} | {tokens} | {median:.3f} | {tokens / median:.0f} | {floor:.3f} | {flops / floor / 1e9:.1f} | '
            f'{statistics.median(ratios):.2f} |')


def model_bench(repetitions):
    """Measure the pretrained model and print its table (or one line saying why it cannot be measured here)."""
    from agentrl.pretrained.loader import ModelFileError

    try:
        load_start, rates_before = os.getloadavg(), (rate_sample(), matmul_rate(MODEL_THREADS, repetitions=5, inner=2))
        about, results = model_speed(repetitions)
    except ModelFileError as error:
        print(f'SmolLM2-135M-Instruct: not measured, {error}')
        return
    load_end, rates_after = os.getloadavg(), (rate_sample(), matmul_rate(MODEL_THREADS, repetitions=5, inner=2))
    print(f'SmolLM2-135M-Instruct (float32, {about["parameters"]:,} parameters, {about["linear"]:,} of them in linear '
          f'layers), on {about["threads"]} threads; loaded in {about["load_seconds"]:.1f} s; medians of '
          f'{repetitions} repetitions; load average (1 min) {load_start[0]:.2f} before, {load_end[0]:.2f} after')
    print(f'float32 {MATMUL_SIZE}x{MATMUL_SIZE} matmul before and after, 1 thread: {rates_before[0] / 1e9:.1f} and '
          f'{rates_after[0] / 1e9:.1f} GFLOP/s; {MODEL_THREADS} threads: {rates_before[1] / 1e9:.1f} and '
          f'{rates_after[1] / 1e9:.1f} GFLOP/s'
          + ('; more threads slower than one: other processes hold the cores, and the times below are theirs too'
             if min(rates_before[1], rates_after[1]) < max(rates_before[0], rates_after[0]) else ''))
    print()
    print(MODEL_HEADER)
    for result in results:
        print(model_row(**result))
    print()
    print('tokens = the tokens one call reads (forward, backward) or samples (sampling); floor = the same calls\' '
          'linear-layer products as plain torch.matmul with the model\'s weights, on the same threads, timed next to '
          'each repetition; ratio = seconds / floor (median over repetitions)')
