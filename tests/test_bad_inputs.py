"""Bad or extreme values are refused where they enter, or handled exactly (issue: 'bad values rejected')."""
import copy
import dataclasses
import math

import pytest
import torch

import agentrl as arl
from agentrl.substrate import config
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


# ------------------------------------------------------------------- the configurations' checks (pydantic, strict)

_CONFIG_REFUSALS = [  # (class, field, a value of the right type but out of range, or of a wrong type)
    ('Habits', 'read', True), ('Habits', 'slip', -0.01), ('Habits', 'full_read', float('nan')),
    ('SFTConfig', 'careful_steps', True), ('SFTConfig', 'habit_lr', float('inf')), ('SFTConfig', 'seed', 1.0),
    ('SubstrateConfig', 'max_offset', 2.0), ('SubstrateConfig', 'rl_lr', True), ('SubstrateConfig', 'init_std', -0.1),
    ('ModelConfig', 'vocab_size', 316.0), ('ModelConfig', 'context', True), ('ModelConfig', 'logit_scale', float('nan')),
    ('RLConfig', 'minibatches', True), ('RLConfig', 'kl_coef', float('-inf')), ('RLConfig', 'max_turns', '6'),
]


@pytest.mark.parametrize('name, field, value', _CONFIG_REFUSALS, ids=repr)
def test_each_configuration_refuses_bools_non_finite_floats_and_wrong_types_naming_the_field(name, field, value):
    cls = getattr(config, name, None) or getattr(arl, name)
    kwargs = {'vocab_size': 316} if name == 'ModelConfig' else {}
    with pytest.raises(ValueError) as raised:
        cls(**{**kwargs, field: value})
    [error] = raised.value.errors()
    assert error['loc'] == (field,) and repr(error['input']) == repr(value)
    assert str(raised.value).startswith(f'1 validation error for {name}\n{field}\n  Input should be ')


def test_the_configurations_stay_frozen_hashable_standard_dataclasses():
    DEFAULT = config.DEFAULT
    cfg = arl.RLConfig.for_substrate(DEFAULT, seed=3)
    assert (cfg.lr, cfg.turn_cost, cfg.seed) == (DEFAULT.rl_lr, DEFAULT.turn_cost, 3)
    bare = arl.RLConfig()  # its default_factory reads the substrate in use
    assert (bare.lr, bare.turn_cost) == (config.active().rl_lr, config.active().turn_cost)
    assert dataclasses.asdict(cfg)['seed'] == 3 and [f.name for f in dataclasses.fields(cfg)][:2] == ['seed', 'lr']
    assert dataclasses.replace(cfg, epochs=2) == arl.RLConfig.for_substrate(DEFAULT, seed=3, epochs=2)
    assert hash(cfg) == hash(arl.RLConfig.for_substrate(DEFAULT, seed=3)) and len({cfg, dataclasses.replace(cfg)}) == 1
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.seed = 4
    with pytest.raises(ValueError, match='epochs'):
        dataclasses.replace(cfg, epochs=0)  # replace builds a new instance, so it is checked too
    assert config.SubstrateConfig.from_description(DEFAULT.describe()) == DEFAULT
    assert copy.deepcopy(DEFAULT) == DEFAULT and hash(copy.deepcopy(DEFAULT)) == hash(DEFAULT)


def test_an_int_given_for_a_float_setting_is_the_equal_float():
    cfg = arl.RLConfig(kl_coef=0, lr=1, turn_cost=0)
    assert (cfg.kl_coef, cfg.lr, cfg.turn_cost) == (0.0, 1.0, 0.0) and type(cfg.lr) is float
    assert cfg == arl.RLConfig(kl_coef=0.0, lr=1.0, turn_cost=0.0)
