"""Steps where no group has a reward spread: plain GRPO makes no update; the regularisers act alone."""
import copy

import pytest
import torch

import agentrl as arl
from substrate_fixtures import max_param_difference, quick_base, tokenizer


@pytest.fixture(scope='module')
def base():
    return quick_base()


@pytest.fixture
def no_signal(monkeypatch):
    """sample_step as the substrate's, except that no group is ever kept; returns the draws it made."""
    real, draws = arl.sample_step, []

    def without_signal(*args):
        _, sampled = real(*args)
        draws.append(sampled)
        return [], sampled
    monkeypatch.setattr(arl, 'sample_step', without_signal)
    import agentrl.substrate.grpo
    monkeypatch.setattr(agentrl.substrate.grpo, 'sample_step', without_signal)
    return draws


def batch_entropy(model, trajs, tok):
    batch = arl.collate(trajs, tok.pad_id)
    with torch.no_grad():
        return arl.entropy_bonus(model(batch['ids'])[:, :-1], batch['action_mask']).item()


@pytest.mark.parametrize('loop', ['train_rl', 'train_regularized'])
def test_unregularised_step_without_signal_leaves_the_weights_untouched(base, no_signal, loop):
    model, tok = copy.deepcopy(base), tokenizer()
    cfg = arl.RLConfig(eval_every=0, tasks_per_step=2)
    history = getattr(arl, loop)(model, arl.make_tasks('train'), tok, cfg, 2)
    assert max_param_difference(model, base) == 0.0
    assert [h['signal'] for h in history] == [0.0, 0.0] and [h['grad_norm'] for h in history] == [0.0, 0.0]
    # the logged entropy is the policy's on the draw, not a placeholder
    assert history[0]['entropy'] == pytest.approx(batch_entropy(base, no_signal[0], tok), rel=1e-6)
    assert history[0]['entropy'] > 0.1


def test_entropy_bonus_acts_alone_when_no_group_has_signal(base, no_signal):
    model, tok = copy.deepcopy(base), tokenizer()
    cfg = arl.RLConfig(tasks_per_step=2)
    history = arl.train_regularized(model, arl.make_tasks('train'), tok, cfg, 3, entropy_coef=0.1)
    assert [h['signal'] for h in history] == [0.0] * 3
    assert all(h['grad_norm'] > 0 for h in history)
    before, after = batch_entropy(base, no_signal[0], tok), batch_entropy(model, no_signal[0], tok)
    assert after > before  # with zero advantages the only force is the bonus, which raises the entropy


def test_kl_acts_alone_when_no_group_has_signal(base, no_signal):
    start = copy.deepcopy(base)
    with torch.no_grad():  # move away from the reference so that the KL has a gradient
        start.head.weight.add_(0.5 * torch.randn(start.head.weight.shape, generator=torch.Generator().manual_seed(0)))
    model, tok = copy.deepcopy(start), tokenizer()
    cfg = arl.RLConfig(tasks_per_step=2, kl_coef=1.0, kl_kind='k3+')
    arl.train_regularized(model, arl.make_tasks('train'), tok, cfg, 3, ref_model=copy.deepcopy(base).eval())
    draw = arl.collate(no_signal[0], tok.pad_id)

    def kl_to_base(m):  # exact KL(pi || pi_ref) over the vocabulary, averaged over the draw's policy positions
        with torch.no_grad():
            logp = torch.log_softmax(m(draw['ids'])[:, :-1], -1)  # [B, T-1, V]
            ref = torch.log_softmax(base(draw['ids'])[:, :-1], -1)
        return arl.masked_mean((logp.exp() * (logp - ref)).sum(-1), draw['action_mask']).item()
    assert kl_to_base(model) < kl_to_base(start)  # the KL pulled the policy back towards the reference
