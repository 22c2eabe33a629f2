"""TinyAgent: size, shapes, cached decoding equal to the full forward pass, context limit."""
import pytest
import torch

import agentrl as arl
from substrate_fixtures import tokenizer


def test_parameter_count_and_no_dropout():
    model = arl.TinyAgent(arl.ModelConfig(vocab_size=len(tokenizer())))
    assert 120_000 <= arl.count_parameters(model) <= 200_000
    assert arl.count_parameters(arl.TinyAgent(arl.ModelConfig(vocab_size=316))) == 157_244  # the book's size
    assert not any(isinstance(m, torch.nn.Dropout) for m in model.modules())


def test_cached_decoding_matches_the_full_forward_pass():
    torch.manual_seed(0)
    model = arl.TinyAgent(arl.ModelConfig(vocab_size=50, context=32))
    ids = torch.randint(0, 50, (3, 20))
    with torch.no_grad():
        full = model(ids)  # [B, T, V]
        cache = model.new_cache(3)
        steps = [model.prefill(ids[:, :5], cache)]
        for t in range(5, 20):
            steps.append(model.decode_step(ids[:, t], cache, t))
    assert full.shape == (3, 20, 50)
    assert torch.allclose(torch.stack(steps[:-1], 1), full[:, 4:19], atol=1e-5)
    assert torch.allclose(steps[-1], full[:, 19], atol=1e-5)


def test_context_is_a_clear_limit():
    model = arl.TinyAgent(arl.ModelConfig(vocab_size=10, context=8))
    with pytest.raises(ValueError, match='longer than the context'):
        model(torch.zeros(1, 9, dtype=torch.long))
    with pytest.raises(ValueError, match='divisible'):
        arl.ModelConfig(vocab_size=10, width=30, n_head=4)
