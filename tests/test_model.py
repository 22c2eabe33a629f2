"""TinyAgent: size, shapes, cached reading (one token per call, in chunks, some rows only) equal to the full forward
pass, context limit, rows grouped by width."""
import pytest
import torch

import agentrl as arl
from substrate_fixtures import tokenizer


def test_parameter_count_and_no_dropout():
    model = arl.TinyAgent(arl.ModelConfig(vocab_size=len(tokenizer())))
    assert 120_000 <= arl.count_parameters(model) <= 200_000
    assert arl.count_parameters(arl.TinyAgent(arl.ModelConfig(vocab_size=316))) == 157_244  # the book's size
    assert not any(isinstance(m, torch.nn.Dropout) for m in model.modules())


def test_reading_one_token_per_call_matches_the_full_forward_pass():
    torch.manual_seed(0)
    model = arl.TinyAgent(arl.ModelConfig(vocab_size=50, context=32))
    ids = torch.randint(0, 50, (3, 20))
    with torch.no_grad():
        full = model(ids)  # [B, T, V]
        cache = model.new_cache(3)
        steps = [model.logits(model.read(ids[:, :5], cache, 0, None))[:, -1]]
        for t in range(5, 20):
            steps.append(model.logits(model.read(ids[:, t:t + 1], cache, t, None))[:, 0])
    assert full.shape == (3, 20, 50)
    assert torch.allclose(torch.stack(steps, 1), full[:, 4:], atol=1e-5)


def test_context_is_a_clear_limit():
    model = arl.TinyAgent(arl.ModelConfig(vocab_size=10, context=8))
    with pytest.raises(ValueError, match='longer than the context'):
        model(torch.zeros(1, 9, dtype=torch.long))
    with pytest.raises(ValueError, match='outside the context'):
        model.read(torch.zeros(1, 3, dtype=torch.long), model.new_cache(1), 6, None)
    with pytest.raises(ValueError, match='divisible'):
        arl.ModelConfig(vocab_size=10, width=30, n_head=4)


def test_cached_reading_in_chunks_matches_the_full_forward_pass():
    torch.manual_seed(0)
    model = arl.TinyAgent(arl.ModelConfig(vocab_size=50, context=32))
    ids = torch.randint(0, 50, (3, 20))
    with torch.no_grad():
        full = model(ids)  # [B, T, V]
        cache = model.new_cache(3)
        chunks = [model.logits(model.read(ids[:, a:b], cache, a, None)) for a, b in [(0, 5), (5, 6), (6, 13), (13, 20)]]
    assert full.shape == (3, 20, 50)
    assert torch.allclose(torch.cat(chunks, 1), full, atol=1e-5)


def test_reading_some_rows_leaves_the_others_alone():
    torch.manual_seed(0)
    model = arl.TinyAgent(arl.ModelConfig(vocab_size=50, context=32))
    ids = torch.randint(0, 50, (4, 12))
    with torch.no_grad():
        full = model(ids)
        cache = model.new_cache(4)
        model.read(ids[:, :6], cache, 0, None)
        before = [part.clone() for block in cache for part in block]  # keys, then values, of each block
        rows = torch.tensor([2, 0])  # out of order on purpose: row i of the chunk belongs to cache row rows[i]
        out = model.logits(model.read(ids[rows, 6:12], cache, 6, rows))
        after = [part for block in cache for part in block]
    assert torch.allclose(out, full[rows, 6:12], atol=1e-5)
    for old, new in zip(before, after):
        assert torch.equal(old[[1, 3], :, :12], new[[1, 3], :, :12])  # rows not read: untouched
        assert torch.equal(old[[0, 2], :, :6], new[[0, 2], :, :6])  # positions already cached: untouched


def test_grouping_rows_by_width_keeps_every_read_position_and_its_gradient():
    torch.manual_seed(0)
    model = arl.TinyAgent(arl.ModelConfig(vocab_size=50, context=32))
    ids = torch.randint(0, 50, (7, 30))
    widths = torch.tensor([30, 3, 17, 1, 30, 9, 22])
    read = torch.arange(30)[None, :] < widths[:, None]  # [B, T]: the positions each row's width covers
    full, grouped = model(ids), model(ids, widths)
    assert torch.allclose(grouped[read], full[read], atol=1e-5)
    target = torch.randn(7, 30, 50)
    grads = []
    for out in (full, grouped):
        model.zero_grad()
        (out * target * read[..., None]).sum().backward()
        grads.append([p.grad.clone() for p in model.parameters()])
    for a, b in zip(*grads):
        assert torch.allclose(a, b, atol=1e-4)


def test_width_groups_are_the_cheapest_cut():
    import itertools
    import random
    from agentrl.substrate.model import GROUP_COST, width_groups

    def cost(widths, ends):
        starts = [0] + ends[:-1]
        return sum((e - s) * widths[e - 1] + GROUP_COST for s, e in zip(starts, ends))

    rng = random.Random(0)
    for _ in range(200):
        widths = sorted(rng.choice([1, 5, 40, 90, 120, 200, 256]) for _ in range(rng.randint(1, 8)))
        n = len(widths)
        every = [list(c) + [n] for k in range(n) for c in itertools.combinations(range(1, n), k)]
        ends = width_groups(widths)
        assert ends[-1] == n and ends == sorted(set(ends))
        assert cost(widths, ends) == min(cost(widths, e) for e in every)
