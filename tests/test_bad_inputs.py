"""Bad or extreme values are refused where they enter, or handled exactly (issue: 'bad values rejected')."""
import copy
import math

import pytest
import torch

import agentrl as arl
from substrate_fixtures import (max_param_difference, on_main, quick_base, quick_base_dir, tokenizer, WrappedModel)  # noqa: F401 (on_main: autouse)


def test_entropy_with_a_masked_token_is_finite_and_exact_with_a_finite_gradient():
    logits = torch.tensor([[0.5, -1.0, float('-inf'), 2.0]], requires_grad=True)
    value = arl.entropy_from_logits(logits)
    p = torch.softmax(torch.tensor([0.5, -1.0, 2.0], dtype=torch.float64), -1)
    assert value.item() == pytest.approx(float(-(p * p.log()).sum()), rel=1e-6)
    value.sum().backward()
    assert torch.isfinite(logits.grad).all() and logits.grad[0, 2] == 0.0


def test_masked_mean_does_not_overflow_in_float16():
    x = torch.full((1000,), 300.0, dtype=torch.float16)  # sum 300,000 > float16's largest 65,504
    mean = arl.masked_mean(x, torch.ones(1000, dtype=torch.float16))
    assert mean.dtype == torch.float16 and mean.item() == 300.0


@pytest.mark.parametrize('call, error', [([], ValueError), ((), ValueError), (None, TypeError), ([1, ';'], TypeError)])
def test_an_empty_or_malformed_call_is_a_clear_error(call, error):
    env = arl.make_env()
    env.reset(arl.make_tasks('train')[0])
    with pytest.raises(error, match='call'):
        env.step(call)


class NaNGradient(WrappedModel):
    """Its loss is finite but its gradient is not: 0 * d sqrt(x)/dx at x = 0 is nan."""

    def __init__(self, model):
        super().__init__(model)
        self.zero = torch.nn.Parameter(torch.zeros(()))

    def forward(self, ids, widths=None):
        return self.model(ids, widths) + 0.0 * torch.sqrt(self.zero)


def test_a_non_finite_gradient_stops_training_before_the_weights_change():
    base = quick_base(quick_base_dir())
    model = NaNGradient(copy.deepcopy(base))
    with pytest.raises(arl.NonFiniteLossError, match=r'GRPO, step \d+: the gradient norm is nan'):
        arl.train_rl(model, arl.make_tasks('train'), tokenizer(), arl.RLConfig(eval_every=0, tasks_per_step=2), steps=2)
    assert max_param_difference(model.model, base) == 0.0 and model.zero.item() == 0.0
    assert not math.isnan(model.zero.item())
