"""The arithmetic probe: the bits this machine computes for every kind of operation the companion's numbers rest on.

Each row runs one operation on inputs drawn from its own seeded generator and hashes the result's bytes. Two machines
(or two settings of one machine) that print the same row compute the same bits for that operation; a row that
differs names where their results part. The digest of all rows names the arithmetic as a whole: the committed
outputs record the digest they were computed with (data/arithmetic/outputs.txt), and the tests that compare a fresh
execution with them digit for digit run only where this machine's digest is the same.

    python -m machinery.arithmetic                       # print this machine's rows
    python -m machinery.arithmetic --compare FILE        # and the rows that differ from a recorded probe
    python -m machinery.arithmetic --write FILE          # record them

Run it as make does (the pin in the environment, or agentrl imported before torch, which this module does).

AGENTRL_ARITHMETIC_REFERENCE=FILE names another recorded probe to stand for the committed outputs' arithmetic in the
tests (a path, relative to the repository or absolute): with data/arithmetic/portable-amd-epyc.txt, a machine whose
probe matches the outputs takes the path of one that does not, so the tests a differing machine runs can be run and
judged where every machine at hand computes the committed bits.

The rows named 'SmolLM2 ...' are the pretrained model's operations at its shapes (on random inputs; the model itself
is not loaded). They were recorded on this project's AMD EPYC under both arithmetics; no Intel machine has probed them
yet, so whether the portable arithmetic gives an Intel CPU the same bits at these wider shapes is still to be seen.
"""
import argparse
import hashlib
import math
import os
import platform
import sys
from pathlib import Path

import agentrl  # noqa: F401  (sets the CPU pin before torch and numpy load)
from agentrl.atomic import atomic_output
from agentrl.cpu import PINS, arithmetic, fixed_threads, pin_wanted
from agentrl.paths import REPO
from agentrl.pretrained.loader import MODEL_THREADS
from machinery.probe_record import differing, digest, parse, read, render  # noqa: F401  (the record's format)

import numpy as np  # noqa: E402
import torch  # noqa: E402

REFERENCES = REPO / 'data' / 'arithmetic'  # recorded probes, one file each
OUTPUTS = REFERENCES / 'outputs.txt'  # the probe of the machine and arithmetic the committed outputs came from
REFERENCE_VARIABLE = 'AGENTRL_ARITHMETIC_REFERENCE'  # another recorded probe to hold this machine's to, in the tests
TOKENS, WIDTH, HIDDEN, VOCAB, HEADS = 1920, 64, 256, 316, 4  # a TinyAgent update's rows and widths
# SmolLM2-135M-Instruct's widths (agentrl/pretrained/): 576 wide, 9 query heads over 3 key-value heads of 64, an MLP
# of 1536, 49,152 tokens; rotary embeddings with theta 100,000 and RMSNorm with epsilon 1e-5. The pretrained model's
# notebook samples, scores and trains at these shapes, on MODEL_THREADS threads; its rows here use random inputs at
# those shapes (2 continuations of 48 positions), so that the probe names the operations whose bits the model's
# numbers rest on without loading the model (which takes seconds, and the probe must stay fast).
SMOL_BATCH, SMOL_POSITIONS, SMOL_WIDTH, SMOL_MLP, SMOL_VOCAB = 2, 48, 576, 1536, 49152
SMOL_HEADS, SMOL_KV_HEADS, SMOL_HEAD_DIM, SMOL_ROPE_THETA, SMOL_EPS = 9, 3, 64, 100000.0, 1e-5


def cpu_name():
    """The CPU's model name ('AMD EPYC', 'Intel(R) Xeon(R) ...'), or what platform knows."""
    try:
        with open('/proc/cpuinfo') as f:
            for line in f:
                if line.startswith('model name'):
                    return line.split(':', 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def vendor():
    """'amd', 'intel' or, for other CPUs, the machine's name ('aarch64', ...): how reference files are named."""
    name = cpu_name()
    return 'amd' if 'AMD' in name else 'intel' if 'Intel' in name else platform.machine().lower()


def references(arithmetic_name, cpu_vendor=None):
    """The recorded probes of an arithmetic (data/arithmetic/<arithmetic>-<vendor>-*.txt), of one vendor if given."""
    pattern = f'{arithmetic_name}-{cpu_vendor}-*.txt' if cpu_vendor else f'{arithmetic_name}-*.txt'
    return sorted(REFERENCES.glob(pattern))


def probe_in_fresh_process(env=None):
    """This machine's rows, probed in a new Python process (the pin takes effect before torch starts there; the
    caller's random state is left alone). env: the child's environment (default: this process's)."""
    import subprocess

    out = subprocess.run([sys.executable, '-m', 'machinery.arithmetic'], env=env, cwd=REPO, check=True,
                         capture_output=True, text=True).stdout
    rows, about = parse(out, '<the probe\'s output>')
    return rows, about


def outputs_reference():
    """The recorded probe the tests hold this machine's to: OUTPUTS, or the file AGENTRL_ARITHMETIC_REFERENCE names
    (relative to the repository, or absolute); a name that is not a file is refused rather than read as a match."""
    named = os.environ.get(REFERENCE_VARIABLE)
    if not named:
        return OUTPUTS
    path = Path(named) if Path(named).is_absolute() else REPO / named
    if not path.is_file():
        raise FileNotFoundError(f'{REFERENCE_VARIABLE}={named}: no such recorded probe (the files in '
                                f'{REFERENCES.relative_to(REPO)}/ are ones)')
    return path


def outputs_mismatch(reference=None):
    """None if this machine computes the committed outputs' arithmetic, else one sentence naming the rows that
    differ (what the tests print in place of the snapshot tests). reference: a recorded probe standing for the
    outputs' one (default outputs_reference())."""
    reference = outputs_reference() if reference is None else Path(reference)
    rows_there, recorded = read(reference)
    rows, about = probe_in_fresh_process()
    changed = differing(rows, rows_there)
    if not changed:
        return None
    shown = ', '.join(changed[:6]) + (f' and {len(changed) - 6} more' if len(changed) > 6 else '')
    if reference == OUTPUTS:
        what = f'the committed outputs ({recorded.get("arithmetic")})'
    else:
        where = reference.relative_to(REPO) if reference.is_relative_to(REPO) else reference
        what = (f'{where} ({recorded.get("cpu", "no cpu recorded")}, {recorded.get("arithmetic")}), which '
                f'{REFERENCE_VARIABLE} names in place of the committed outputs\' record')
    return (f'this machine ({about.get("cpu")}, arithmetic {about.get("arithmetic")}) computes other bits than '
            f'{what}: {len(changed)} of {len(rows_there)} probe rows differ ({shown}), so comparing digits would '
            f'fail for that reason alone')


def fingerprint(value):
    """16 hex digits of SHA-256 over a result's bytes (tensors and arrays) or its repr (Python numbers)."""
    if isinstance(value, torch.Tensor):
        value = value.detach().contiguous().numpy()
    if isinstance(value, np.ndarray):
        return hashlib.sha256(np.ascontiguousarray(value).tobytes()).hexdigest()[:16]
    return hashlib.sha256(repr(value).encode()).hexdigest()[:16]


def _draw(seed, *shape, scale=1.0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)) * scale


def _torch_rows():
    F = torch.nn.functional
    x, hidden, grad_out = _draw(1, TOKENS, WIDTH), _draw(2, TOKENS, HIDDEN), _draw(3, TOKENS, VOCAB)
    logits = _draw(4, TOKENS, VOCAB, scale=3.0)
    q, k, v = (_draw(10 + i, 32, HEADS, 60, WIDTH // HEADS) for i in range(3))
    return [
        ('torch linear: attention in projection [1920, 64] -> 192', lambda: F.linear(x, _draw(5, 3 * WIDTH, WIDTH, scale=.1))),
        ('torch linear: MLP in [1920, 64] -> 256', lambda: F.linear(x, _draw(6, HIDDEN, WIDTH, scale=.1))),
        ('torch linear: MLP out [1920, 256] -> 64', lambda: F.linear(hidden, _draw(7, WIDTH, HIDDEN, scale=.1))),
        ('torch linear: head [1920, 64] -> 316', lambda: F.linear(x, _draw(8, VOCAB, WIDTH, scale=.1))),
        ('torch linear: a decode tick [64, 64] -> 192', lambda: F.linear(x[:64], _draw(5, 3 * WIDTH, WIDTH, scale=.1))),
        ('torch matmul: head weight gradient [316, 1920] @ [1920, 64]', lambda: grad_out.t() @ x),
        ('torch bmm: one query over 60 keys [128, 1, 16] @ [128, 16, 60]',
         lambda: q[:, :, :1].reshape(-1, 1, 16) @ k.reshape(-1, 60, 16).transpose(1, 2)),
        ('torch attention: causal [32, 4, 60, 16]', lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True)),
        ('torch attention: one query [32, 4, 1, 16] over 60', lambda: F.scaled_dot_product_attention(q[:, :, -1:], k, v)),
        ('torch softmax [1920, 316]', lambda: torch.softmax(logits, -1)),
        ('torch log_softmax [1920, 316]', lambda: torch.log_softmax(logits, -1)),
        ('torch exp', lambda: torch.exp(logits)),
        ('torch expm1 (the k3 estimator)', lambda: torch.expm1(logits / 10)),
        ('torch log', lambda: torch.log(logits.abs() + 1e-3)),
        ('torch log1p', lambda: torch.log1p(logits.abs())),
        ('torch sqrt (MKL vector maths)', lambda: torch.sqrt(logits.abs())),
        ('torch tanh', lambda: torch.tanh(logits)),
        ('torch gelu', lambda: F.gelu(logits)),
        ('torch layer_norm [1920, 64]', lambda: F.layer_norm(x, (WIDTH,))),
        ('torch sum of [1920, 316]', lambda: logits.sum()),
        ('torch mean over rows', lambda: logits.mean(-1)),
        ('torch cumsum of probabilities', lambda: torch.softmax(logits, -1).cumsum(-1)),
        ('torch multinomial with a Generator', lambda: torch.multinomial(
            torch.softmax(logits[:64], -1), 1, generator=torch.Generator().manual_seed(20))),
        ('torch randn with a Generator', lambda: _draw(21, 1000)),
    ]


def _smollm2_rows():
    """SmolLM2-135M-Instruct's operations at its own shapes, computed as transformers' Llama computes them (its linear
    layers, RMSNorm, gated SiLU, rotary embedding, grouped-query attention, the log-softmax over the vocabulary and
    sampling), on random inputs: the bits of the pretrained model's notebook, whose matrix products are far wider
    than TinyAgent's and may take other kernels."""
    F = torch.nn.functional
    rows, width, mlp, vocab = SMOL_BATCH * SMOL_POSITIONS, SMOL_WIDTH, SMOL_MLP, SMOL_VOCAB
    heads, kv_heads, head_dim, groups = SMOL_HEADS, SMOL_KV_HEADS, SMOL_HEAD_DIM, SMOL_HEADS // SMOL_KV_HEADS
    shape = f'[{SMOL_BATCH}, {heads}, {SMOL_POSITIONS}, {head_dim}]'
    x, inner = _draw(60, rows, width), _draw(61, rows, mlp)
    logits = _draw(62, rows, vocab, scale=3.0)
    q = _draw(63, SMOL_BATCH, heads, SMOL_POSITIONS, head_dim)
    k, v = (_draw(64 + i, SMOL_BATCH, kv_heads, SMOL_POSITIONS, head_dim) for i in range(2))

    def weight(seed, out_size, in_size):
        return _draw(seed, out_size, in_size, scale=in_size ** -0.5)

    def rms_norm():  # LlamaRMSNorm: float32 variance, rsqrt, then the weight
        norm_weight = 1 + _draw(70, width, scale=.1)
        return norm_weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + SMOL_EPS))

    def rotary():  # LlamaRotaryEmbedding's cos and sin at positions 0..47 ('default' rope, no scaling)
        inv_freq = 1.0 / (SMOL_ROPE_THETA ** (torch.arange(0, head_dim, 2, dtype=torch.float) / head_dim))
        freqs = torch.arange(SMOL_POSITIONS)[None, :, None].float() * inv_freq  # [1, P, 32]
        emb = torch.cat((freqs, freqs), -1)
        return emb.cos(), emb.sin()  # times attention_scaling, which is 1.0 for the default rope

    def rotated():  # apply_rotary_pos_emb on the queries: q * cos + rotate_half(q) * sin
        cos, sin = (t.unsqueeze(1) for t in rotary())
        half = torch.cat((-q[..., head_dim // 2:], q[..., :head_dim // 2]), -1)
        return q * cos + half * sin

    def repeat_kv(t):  # each key-value head serves 3 query heads, expanded as transformers' repeat_kv does
        return t[:, :, None].expand(SMOL_BATCH, kv_heads, groups, SMOL_POSITIONS, head_dim).reshape(
            SMOL_BATCH, heads, SMOL_POSITIONS, head_dim)

    def scores():  # the eager attention's first product, scaled
        return torch.matmul(q, repeat_kv(k).transpose(2, 3)) * head_dim ** -0.5

    def attended():  # its causal softmax and second product
        causal = torch.ones(SMOL_POSITIONS, SMOL_POSITIONS, dtype=torch.bool).tril()
        probs = torch.softmax(scores().masked_fill(~causal, float('-inf')), -1, dtype=torch.float32)
        return torch.matmul(probs, repeat_kv(v))

    def attention_backward():
        leaves = [t.clone().requires_grad_(True) for t in (q, k, v)]
        out = F.scaled_dot_product_attention(*leaves, is_causal=True, enable_gqa=True)
        out.backward(_draw(67, *out.shape))
        return torch.cat([t.grad.flatten() for t in leaves])

    def log_softmax_backward():
        leaf = logits.clone().requires_grad_(True)
        torch.log_softmax(leaf, -1).backward(_draw(68, rows, vocab))
        return leaf.grad

    return [
        (f'SmolLM2 linear: q or o projection [{rows}, {width}] -> {width}', lambda: F.linear(x, weight(71, width, width))),
        (f'SmolLM2 linear: k or v projection [{rows}, {width}] -> {kv_heads * head_dim}',
         lambda: F.linear(x, weight(72, kv_heads * head_dim, width))),
        (f'SmolLM2 linear: MLP gate or up [{rows}, {width}] -> {mlp}', lambda: F.linear(x, weight(73, mlp, width))),
        (f'SmolLM2 linear: MLP down [{rows}, {mlp}] -> {width}', lambda: F.linear(inner, weight(74, width, mlp))),
        (f'SmolLM2 linear: lm_head [{rows}, {width}] -> {vocab}', lambda: F.linear(x, weight(75, vocab, width))),
        (f'SmolLM2 linear: a decode tick, lm_head [{SMOL_BATCH}, {width}] -> {vocab}',
         lambda: F.linear(x[:SMOL_BATCH], weight(75, vocab, width))),
        (f'SmolLM2 matmul: lm_head weight gradient [{vocab}, {rows}] @ [{rows}, {width}]',
         lambda: _draw(76, rows, vocab).t() @ x),
        (f'SmolLM2 RMSNorm [{rows}, {width}]', rms_norm),
        (f'SmolLM2 gated SiLU silu(gate) * up [{rows}, {mlp}]', lambda: F.silu(inner) * _draw(77, rows, mlp)),
        (f'SmolLM2 rotary cos and sin, {SMOL_POSITIONS} positions of {head_dim}', lambda: torch.cat(rotary())),
        (f'SmolLM2 rotary applied to queries {shape}', rotated),
        (f'SmolLM2 attention product: scores q @ k.T, {heads} query heads over {kv_heads} key-value heads {shape}',
         scores),
        (f'SmolLM2 attention product: causal softmax @ v {shape}', attended),
        (f'SmolLM2 attention: causal grouped-query {shape}, {kv_heads} key-value heads (sdpa, enable_gqa)',
         lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)),
        (f'SmolLM2 attention: a decode tick, one query [{SMOL_BATCH}, {heads}, 1, {head_dim}] over '
         f'{SMOL_POSITIONS} (sdpa, enable_gqa)',
         lambda: F.scaled_dot_product_attention(q[:, :, -1:], k, v, enable_gqa=True)),
        (f'SmolLM2 attention backward: query, key and value gradients {shape}', attention_backward),
        (f'SmolLM2 log_softmax [{rows}, {vocab}]', lambda: torch.log_softmax(logits, -1)),
        (f'SmolLM2 log_softmax backward [{rows}, {vocab}]', log_softmax_backward),
        (f'SmolLM2 softmax and multinomial over {vocab} with a Generator', lambda: torch.multinomial(
            torch.softmax(logits[:SMOL_BATCH], -1), 1, generator=torch.Generator().manual_seed(78))),
    ]


def _adam_step(fused):
    """One Adam step on fixed parameters and gradients (the unfused step is torch's default; ours is fused)."""
    param = torch.nn.Parameter(_draw(30, 4096))
    param.grad = _draw(31, 4096, scale=1e-3)
    optimizer = torch.optim.Adam([param], lr=1e-3, fused=fused)
    for _ in range(3):
        optimizer.step()
    return param.detach()


def _tinyagent_rows():
    """A forward, a backward and optimiser steps of the project's own TinyAgent and optimiser."""
    from agentrl.cpu import adam
    from agentrl.substrate.model import ModelConfig, TinyAgent

    torch.manual_seed(40)
    model = TinyAgent(ModelConfig(vocab_size=VOCAB))
    ids = torch.randint(0, VOCAB, (32, 60), generator=torch.Generator().manual_seed(41))

    def loss():
        out = model(ids)  # [B, T, V]
        return -torch.log_softmax(out[:, :-1], -1).gather(-1, ids[:, 1:, None]).mean(), out

    value, out = loss()
    rows = [('TinyAgent forward [32, 60] -> logits', out)]
    value.backward()
    rows.append(('TinyAgent backward: every gradient', torch.cat([p.grad.flatten() for p in model.parameters()])))
    optimizer = adam(model.parameters(), lr=1e-3)
    optimizer.step()
    rows.append(('TinyAgent after one Adam step (agentrl.cpu.adam)', torch.cat([p.detach().flatten()
                                                                                for p in model.parameters()])))
    for _ in range(10):
        optimizer.zero_grad()
        loss()[0].backward()
        optimizer.step()
    rows.append(('TinyAgent after 11 Adam steps', torch.cat([p.detach().flatten() for p in model.parameters()])))
    return rows


def _numpy_rows():
    rng = np.random.default_rng(50)
    a, m = rng.standard_normal(50_000), rng.standard_normal((300, 300))
    return [
        ('numpy exp (float64)', lambda: np.exp(a)),
        ('numpy log (float64)', lambda: np.log(np.abs(a) + 1e-3)),
        ('numpy tanh (float64)', lambda: np.tanh(a)),
        ('numpy exp (float32)', lambda: np.exp(a.astype(np.float32))),
        ('numpy matmul [300, 300] (OpenBLAS)', lambda: m @ m),
        ('numpy affine [5000, 3] @ [3, 3] (plot transforms)', lambda: m[:, :3].repeat(25, 0) @ m[:3, :3]),
        ('python math.exp and math.log', lambda: [math.exp(t) + math.log(abs(t) + 1e-3) for t in a[:5000].tolist()]),
    ]


def probe():
    """[(operation, fingerprint)] for every row, on one thread (training runs on one), SmolLM2's on MODEL_THREADS."""
    saved = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        rows = [(name, fingerprint(run())) for name, run in _torch_rows()]
        rows += [('torch Adam step, unfused (MKL square root)', fingerprint(_adam_step(False))),
                 ('torch Adam step, fused (exact square root)', fingerprint(_adam_step(True)))]
        rows += [(name, fingerprint(value)) for name, value in _tinyagent_rows()]
        rows += [(name, fingerprint(run())) for name, run in _numpy_rows()]
        with fixed_threads(MODEL_THREADS):  # the pretrained model runs on its own thread count, and so do its rows
            rows += [(name, fingerprint(run())) for name, run in _smollm2_rows()]
    finally:
        torch.set_num_threads(saved)
    return rows


def setting():
    """What this process computes with: CPU, versions, the arithmetic asked for, the pin variables in force."""
    pinned = ' '.join(f'{name}={os.environ[name]!r}' for name in PINS if name in os.environ) or 'none'
    return dict(cpu=cpu_name(), machine=platform.machine(), torch=torch.__version__, numpy=np.__version__,
                arithmetic=arithmetic() if pin_wanted() else 'unpinned (the pin does not apply here)',
                capability=torch.backends.cpu.get_cpu_capability(), variables=pinned)


def outputs_setting():
    """What the outputs' record says of their arithmetic: nothing that names one machine, so that two machines which
    compute the same bits write the same record."""
    about = setting()
    return {key: about[key] for key in ('arithmetic', 'torch', 'numpy', 'capability')}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--compare', type=Path, metavar='FILE', help='a recorded probe to compare with')
    parser.add_argument('--write', type=Path, metavar='FILE', help='record this machine\'s probe in FILE')
    parser.add_argument('--outputs', action='store_true',
                        help=f'record it as the arithmetic of the outputs just made ({OUTPUTS.relative_to(REPO)})')
    args = parser.parse_args(argv)
    rows = probe()
    text = render(rows, setting())
    print(text, end='')
    for path, about in ((args.write, setting()), (OUTPUTS if args.outputs else None, outputs_setting())):
        if path is not None:
            with atomic_output(path, '.txt') as tmp:
                tmp.write_text(render(rows, about), encoding='utf-8')
    if args.compare:
        reference, about = read(args.compare)
        changed = differing(rows, reference)
        where = f'{args.compare} ({about.get("cpu", "?")}, {about.get("arithmetic", "?")})'
        print(f'\n{len(changed)} of {len(reference)} rows differ from {where}' + (':' if changed else '.'))
        for name in changed:
            print(f'  {name}')
        return 1 if changed else 0
    return 0


if __name__ == '__main__':
    sys.exit(main())
