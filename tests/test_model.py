"""TinyAgent: size, shapes, cached reading in chunks equal to the full forward pass, context limit."""
import pytest
import torch

import agentrl as arl
from substrate_fixtures import tokenizer


def test_parameter_count_and_no_dropout():
    model = arl.TinyAgent(arl.ModelConfig(vocab_size=len(tokenizer())))
    assert 120_000 <= arl.count_parameters(model) <= 200_000
    assert arl.count_parameters(arl.TinyAgent(arl.ModelConfig(vocab_size=316))) == 157_244  # the book's size
    assert not any(isinstance(m, torch.nn.Dropout) for m in model.modules())


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
        before = [part.clone() for block in cache for part in block]
        rows = torch.tensor([2, 0])  # out of order on purpose: row i of the chunk belongs to cache row rows[i]
        out = model.logits(model.read(ids[rows, 6:12], cache, 6, rows))
        after = [part for block in cache for part in block]
    assert torch.allclose(out, full[rows, 6:12], atol=1e-5)
    for old, new in zip(before, after):
        assert torch.equal(old[[1, 3], :, :12], new[[1, 3], :, :12])  # rows not read: untouched
        assert torch.equal(old[[0, 2], :, :6], new[[0, 2], :, :6])  # positions already cached: untouched


def test_context_is_a_clear_limit():
    model = arl.TinyAgent(arl.ModelConfig(vocab_size=10, context=8))
    with pytest.raises(ValueError, match='longer than the context'):
        model(torch.zeros(1, 9, dtype=torch.long))
    with pytest.raises(ValueError, match='outside the context'):
        model.read(torch.zeros(1, 3, dtype=torch.long), model.new_cache(1), 6, None)
    with pytest.raises(ValueError, match='divisible'):
        arl.ModelConfig(vocab_size=10, width=30, n_head=4)
