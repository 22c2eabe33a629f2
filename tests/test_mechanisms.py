"""Each mechanism of the GRPO engine and of chapter 10's plug-ins, on small hand-built models and batches: what it
must do, in tests that fail when the line doing it is broken. None needs the SFT'd RL base; each takes well under a
second once torch is warm."""
import math

import pytest
import torch

import agentrl as arl
from agentrl.core.logprobs import selected_log_probs
from agentrl.ch10 import live
from agentrl.substrate import grpo
from agentrl.substrate.sft import model_config
from substrate_fixtures import max_param_difference, tokenizer

VOCAB, LENGTH, ROWS = 12, 10, 8


def tiny_model(seed=0):
    """A one-layer TinyAgent over 12 tokens: model(ids [B, T]) -> logits [B, T, 12]."""
    torch.manual_seed(seed)
    return arl.TinyAgent(arl.ModelConfig(vocab_size=VOCAB, context=16, width=16, n_layer=1, n_head=2))


def tiny_batch():
    """ids [8, 10]; action_mask [8, 9] with a prompt of 3 positions and one row padded; advantages +-1 [8]."""
    ids = torch.randint(0, VOCAB, (ROWS, LENGTH), generator=torch.Generator().manual_seed(0))
    mask = torch.ones(ROWS, LENGTH - 1)
    mask[:, :3] = 0
    mask[0, 7:] = 0
    return dict(ids=ids, action_mask=mask), torch.tensor([1.0, -1.0] * (ROWS // 2))


class Recorder(arl.Plugin):
    """Records, for each minibatch, the log-probs the surrogate saw, its rows and its stats; changes nothing."""

    def __init__(self):
        self.calls = []

    def reshape_surrogate(self, surrogate, logp, old_logp, advantages, mask, stats):
        self.calls.append(dict(logp=logp.detach().clone(), old_logp=old_logp.detach().clone()))
        return surrogate

    def extend_loss(self, loss, rows, logits, logp, mask, stats):
        self.calls[-1].update(rows=rows.clone(), stats=dict(stats))
        return loss


def log_probs(model, ids, temperature=1.0):
    with torch.no_grad():
        return selected_log_probs(model(ids)[:, :-1] / temperature, ids[:, 1:])  # [B, T-1]


def recorded_update(cfg, lr=0.03, seed=1):
    """rl_update of the tiny model on the tiny batch -> (recorder, log-probs before the update, stats, optimizer)."""
    model = tiny_model()
    batch, advantages = tiny_batch()
    before = log_probs(model, batch['ids'], cfg.temperature)
    recorder = Recorder()
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    stats = arl.rl_update(model, optimizer, batch, advantages, cfg, generator=torch.Generator().manual_seed(seed),
                          plugins=[recorder])
    return recorder, before, stats, optimizer


# --------------------------------------------------------------------------- old_logp frozen within an update

def test_the_second_minibatch_is_clipped_against_the_policy_before_the_update():
    cfg = arl.RLConfig(minibatches=2, temperature=0.8)
    recorder, before, _, _ = recorded_update(cfg)
    first, second = recorder.calls
    for call in (first, second):  # both minibatches compare with the log-probs from before the update
        assert torch.equal(call['old_logp'], before[call['rows']])
    assert first['stats']['ratio'] == pytest.approx(1.0, abs=1e-6) and first['stats']['clip_frac'] == 0.0
    # the first step moved the policy: the second minibatch's ratios leave 1 and the clip acts on some tokens
    assert not torch.allclose(second['logp'], second['old_logp'], atol=1e-3)
    assert second['stats']['approx_kl_old'] > 1e-4
    assert second['stats']['clip_frac'] > 0


# --------------------------------------------------------------------------- each step: its own gradient, clipped

class StepRecorder(torch.optim.SGD):
    """Plain SGD that keeps the gradient each of its steps applies."""

    def __init__(self, params, lr):
        super().__init__(params, lr=lr)
        self.applied = []

    def step(self, closure=None):
        self.applied.append([p.grad.clone() for group in self.param_groups for p in group['params']])
        return super().step(closure)


def surrogate_gradient(model, batch, advantages, old_logp, rows, cfg):
    """The gradient of the clipped surrogate of minibatch `rows` alone, at the model's weights now."""
    logits = model(batch['ids'][rows])[:, :-1] / cfg.temperature  # [b, T-1, V]
    logp = selected_log_probs(logits, batch['ids'][rows, 1:])
    loss, _ = arl.policy_loss(logp, old_logp[rows], advantages[rows], batch['action_mask'][rows], cfg)
    grads = torch.autograd.grad(loss, list(model.parameters()), allow_unused=True)
    return [torch.zeros_like(p) if g is None else g for p, g in zip(model.parameters(), grads)]


def test_each_step_applies_the_gradient_of_its_own_minibatch_only():
    cfg = arl.RLConfig(minibatches=2, max_grad_norm=1e6, temperature=0.8)  # a norm no gradient here reaches
    model, batch, advantages = tiny_model(), *tiny_batch()
    twin = tiny_model()  # the same weights, updated by hand below
    old_logp = log_probs(twin, batch['ids'], cfg.temperature)
    optimizer = StepRecorder(model.parameters(), lr=0.05)
    arl.rl_update(model, optimizer, batch, advantages, cfg, generator=torch.Generator().manual_seed(3), plugins=[])
    order = torch.randperm(ROWS, generator=torch.Generator().manual_seed(3)).chunk(2)
    assert len(optimizer.applied) == 2
    for rows, applied in zip(order, optimizer.applied):
        expected = surrogate_gradient(twin, batch, advantages, old_logp, rows, cfg)
        for got, want in zip(applied, expected):
            assert torch.allclose(got, want, atol=1e-7)  # not the sum with the previous minibatch's gradient
        with torch.no_grad():
            for p, g in zip(twin.parameters(), expected):
                p -= 0.05 * g


def test_a_gradient_longer_than_max_grad_norm_is_scaled_down_to_it_and_the_log_keeps_its_length():
    cfg = arl.RLConfig(minibatches=1, max_grad_norm=1e-3)
    model, batch, advantages = tiny_model(), *tiny_batch()
    optimizer = StepRecorder(model.parameters(), lr=0.05)
    stats = arl.rl_update(model, optimizer, batch, advantages, cfg, generator=torch.Generator().manual_seed(3),
                          plugins=[])
    (applied,) = optimizer.applied
    length = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in applied]))
    assert stats['grad_norm'] > 10 * cfg.max_grad_norm  # the logged norm is the one before clipping
    assert length == pytest.approx(cfg.max_grad_norm, rel=1e-4)


# --------------------------------------------------------------------------- the KL term in the loss

@pytest.mark.parametrize('kind', ['k1', 'k2', 'k3'])
def test_the_kl_term_in_the_loss_estimates_kl_of_the_policy_from_the_reference(kind):
    logp = torch.tensor([[-0.2, -1.5, -0.7], [-2.0, -0.1, -0.9]], requires_grad=True)
    ref_logp = torch.tensor([[-0.5, -1.0, -0.7], [-1.2, -0.6, -3.0]])
    mask = torch.tensor([[0.0, 1.0, 1.0], [1.0, 1.0, 0.0]])
    term = arl.ReferenceKL(None, 0.5, kind)
    term.ref_logp = torch.cat([torch.zeros(1, 3), ref_logp])  # the update's batch; these rows are 1 and 2
    stats = {}
    loss = term.extend_loss(torch.tensor(1.0), torch.tensor([1, 2]), None, logp, mask, stats)
    ratio = ref_logp - logp.detach()  # l = log ref - log pi, per sampled token of pi
    per_token = {'k1': -ratio, 'k2': ratio ** 2 / 2, 'k3': ratio.exp() - 1 - ratio}[kind]
    slope = {'k1': torch.ones_like(ratio), 'k2': -ratio, 'k3': 1 - ratio.exp()}[kind]  # d per_token / d logp
    kept = mask > 0
    assert stats['kl_ref'] == pytest.approx(per_token[kept].mean().item(), rel=1e-6)
    assert loss.item() == pytest.approx(1.0 + 0.5 * per_token[kept].mean().item(), rel=1e-6)
    (grad,) = torch.autograd.grad(loss, logp)
    assert torch.allclose(grad, torch.where(kept, 0.5 * slope / kept.sum(), torch.zeros_like(slope)), atol=1e-7)


# --------------------------------------------------------------------------- epochs = 2

def test_two_epochs_pass_twice_over_the_batch_in_fresh_orders_against_the_same_old_policy():
    cfg = arl.RLConfig(minibatches=2, epochs=2)
    recorder, before, stats, optimizer = recorded_update(cfg, seed=5)
    assert len(recorder.calls) == 4  # epochs x minibatches optimizer steps
    assert all(state['step'] == 4 for state in optimizer.state.values())
    replay = torch.Generator().manual_seed(5)
    orders = [torch.randperm(ROWS, generator=replay) for _ in range(2)]  # one shuffle per epoch, from the generator
    assert not torch.equal(orders[0], orders[1])
    for epoch, order in enumerate(orders):
        calls = recorder.calls[2 * epoch:2 * epoch + 2]
        assert [c['rows'].tolist() for c in calls] == [chunk.tolist() for chunk in order.chunk(2)]
    for call in recorder.calls:  # old_logp stays the policy before the update, in the second epoch too
        assert torch.equal(call['old_logp'], before[call['rows']])
    third = recorder.calls[2]  # epoch 2 starts from a policy that has moved
    assert not torch.allclose(third['logp'], third['old_logp'], atol=1e-3) and third['stats']['approx_kl_old'] > 1e-4
    for key in ('clip_frac', 'ratio', 'pg_loss'):  # the logged value is the mean over the 4 minibatches
        assert stats[key] == pytest.approx(sum(c['stats'][key] for c in recorder.calls) / 4)


# --------------------------------------------------------------------------- KL in the reward

class TableModel(torch.nn.Module):
    """A 'reference' whose logits depend on the position only: logits[t] = table[t] for every row."""

    def __init__(self, table):
        super().__init__()
        self.table = table  # [T, V]

    def forward(self, ids, widths=None):  # position-only logits: widths change nothing
        return self.table[:ids.shape[1]].expand(ids.shape[0], -1, -1)


def kl_batch():
    """ids [2, 5], action_mask [2, 4] (prompt, two policy tokens, an observation, padding), sample_logp [2, 4]."""
    ids = torch.tensor([[1, 2, 3, 0, 2], [3, 1, 1, 2, 0]])
    mask = torch.tensor([[0., 1., 1., 0.], [0., 1., 0., 1.]])
    sample_logp = torch.tensor([[-50., -0.2, -0.7, 40.], [9., -0.1, -30., -0.5]])  # off the mask: anything
    return dict(ids=ids, action_mask=mask, sample_logp=sample_logp, rewards=torch.tensor([1.0, 0.0]))


def test_sequence_kl_sums_log_pi_minus_log_ref_over_policy_tokens_only():
    table = torch.randn(5, 4, generator=torch.Generator().manual_seed(3))
    batch = kl_batch()
    for temperature in (1.0, 2.0):
        ref = (table / temperature).log_softmax(-1)  # [5, 4]: log ref at each position
        expected = []
        for b in range(2):
            terms = [batch['sample_logp'][b, t] - ref[t, batch['ids'][b, t + 1]]
                     for t in range(4) if batch['action_mask'][b, t]]
            expected.append(sum(terms).item())
        got = arl.sequence_kl(batch, TableModel(table), temperature)
        assert got.tolist() == pytest.approx(expected, rel=1e-6)
    other = kl_batch()
    other['sample_logp'] = torch.where(other['action_mask'] > 0, other['sample_logp'], torch.tensor(-7.0))
    assert torch.equal(arl.sequence_kl(other, TableModel(table), 2.0), got)  # nothing off the mask counts


def test_kl_in_the_reward_lowers_the_reward_of_episodes_the_policy_likes_more_than_the_reference():
    table = torch.zeros(5, 4)  # a uniform reference: log ref = -log 4 = -1.386 everywhere
    plugin = arl.KLInReward(TableModel(table), coef=0.5)
    plugin.begin(None, arl.RLConfig(temperature=1.0))
    batch, record = kl_batch(), {}
    plugin.shape_rewards(batch, record)
    # on its two policy tokens each, pi gives its samples more than ref's 1/4: episode 0 (-0.2 + 1.386) + (-0.7 + 1.386),
    # episode 1 (-0.1 + 1.386) + (-0.5 + 1.386), both > 0, so the KL must lower both rewards
    per_episode = torch.tensor([-0.9, -0.6]) + 2 * math.log(4)
    assert per_episode.min() > 0
    assert batch['rewards'].tolist() == pytest.approx((torch.tensor([1.0, 0.0]) - 0.5 * per_episode).tolist())
    assert record['kl_seq'] == pytest.approx(per_episode.mean().item())
    # the reference is read at the run's temperature, as the sampler's log-probs were
    shaped = TableModel(torch.randn(5, 4, generator=torch.Generator().manual_seed(4)))
    cold, batch = arl.KLInReward(shaped, coef=0.5), kl_batch()
    cold.begin(None, arl.RLConfig(temperature=0.5))
    cold.shape_rewards(batch, {})
    expected = torch.tensor([1.0, 0.0]) - 0.5 * arl.sequence_kl(kl_batch(), shaped, temperature=0.5)
    assert torch.equal(batch['rewards'], expected)
    assert not torch.allclose(expected, torch.tensor([1.0, 0.0]) - 0.5 * arl.sequence_kl(kl_batch(), shaped, 1.0))


# --------------------------------------------------------------------------- the adaptive controller

@pytest.mark.parametrize('ratio, factor', [
    (1.1, 1.01), (1.2, 1.02), (10.0, 1.02),  # KL above the target: the coefficient grows, at most 2% a step
    (1.0, 1.0),
    (0.95, 0.995), (0.8, 0.98), (0.0, 0.98),  # below: it shrinks, at most 2%
])
def test_adapt_kl_coef_moves_towards_the_target_on_both_sides(ratio, factor):
    target = 0.02
    assert arl.adapt_kl_coef(0.3, ratio * target, target) == pytest.approx(0.3 * factor, rel=1e-12)


def test_adaptive_kl_steers_the_coefficient_the_loss_uses_step_by_step():
    term = arl.ReferenceKL(None, 0.2, 'k3+', estimator=arl.kl_estimate)
    controller = arl.AdaptiveKL(term, target=0.05)
    for kl, factor in [(0.1, 1.02), (0.01, 0.98), (0.05, 1.0)]:
        record = dict(kl_ref=kl)
        used = term.coef
        controller.end_step(record)
        assert record['kl_coef'] == used  # the log names the coefficient this step ran with
        assert term.coef == pytest.approx(used * factor)  # the next step's


# --------------------------------------------------------------------------- the chapter's plug-ins and update

def test_chapter_plugins_choose_the_terms_of_each_setting():
    kl = arl.RLConfig(kl_coef=0.1, kl_kind='k3+')
    names = lambda plugins: [type(p).__name__ for p in plugins]  # noqa: E731
    assert arl.chapter_plugins(arl.RLConfig()) == []
    assert names(arl.chapter_plugins(kl, entropy_coef=0.1, kl_target=0.01, policy_loss=dict(variant='kl_cov'))) == [
        'CovariancePolicyLoss', 'EntropyBonus', 'ReferenceKL', 'AdaptiveKL']
    in_reward = arl.chapter_plugins(kl, kl_in_reward=True)
    assert names(in_reward) == ['KLInReward'] and in_reward[0].coef == 0.1
    term, controller = arl.chapter_plugins(kl, kl_target=0.01)
    assert controller.kl_term is term and term.estimator is arl.kl_estimate and term.kind == 'k3+'
    with pytest.raises(ValueError, match='kl_target'):
        arl.chapter_plugins(kl, kl_in_reward=True, kl_target=0.01)


def test_regularized_update_is_rl_update_with_the_entropy_bonus_and_the_estimated_kl():
    cfg = arl.RLConfig(minibatches=2, kl_coef=0.3, kl_kind='k3+')
    batch, advantages = tiny_batch()
    reference = tiny_model(seed=1)
    models, logs = [], []
    for how in ('regularized', 'plugins'):
        model = tiny_model()
        optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
        generator = torch.Generator().manual_seed(2)
        if how == 'regularized':
            stats = arl.regularized_update(model, optimizer, batch, advantages, cfg, reference, generator, 0.1)
        else:
            terms = [arl.EntropyBonus(0.1), arl.ReferenceKL(reference, 0.3, 'k3+', estimator=arl.kl_estimate)]
            stats = arl.rl_update(model, optimizer, batch, advantages, cfg, generator=generator, plugins=terms)
        models.append(model)
        logs.append(stats)
    assert max_param_difference(*models) == 0.0 and logs[0] == logs[1]
    assert logs[0]['kl_ref'] > 0  # the reference is another network: the KL term was there


# --------------------------------------------------------------------------- plug-ins and the training streams

HOOKS = live.HOOKS


def test_the_hook_list_names_every_hook_of_the_engine():
    engine_hooks = {name for name, value in vars(arl.Plugin).items() if callable(value) and not name.startswith('_')}
    assert set(HOOKS) == engine_hooks and len(HOOKS) == len(engine_hooks)


class StreamGuard(arl.Plugin):
    """Wraps a plug-in: around each of its hooks, the training generator and torch's global RNG must not move."""

    def __init__(self, inner, streams):
        self.inner, self.streams, self.called, self.moved = inner, streams, set(), []
        self.acts_alone, self.replaces_reference_kl = inner.acts_alone, inner.replaces_reference_kl

    def _states(self):
        return [torch.get_rng_state()] + [g.get_state() for g in self.streams]

    def _guarded(self, hook, *args):
        before = self._states()
        out = getattr(self.inner, hook)(*args)
        if not all(torch.equal(a, b) for a, b in zip(before, self._states())):
            self.moved.append(hook)
        self.called.add(hook)
        return out

    def begin(self, *args):
        return self._guarded('begin', *args)

    def shape_rewards(self, *args):
        return self._guarded('shape_rewards', *args)

    def before_update(self, *args):
        return self._guarded('before_update', *args)

    def prepare(self, *args):
        return self._guarded('prepare', *args)

    def begin_minibatch(self, *args):
        return self._guarded('begin_minibatch', *args)

    def reshape_surrogate(self, *args):
        return self._guarded('reshape_surrogate', *args)

    def extend_loss(self, *args):
        return self._guarded('extend_loss', *args)

    def after_update(self, *args):
        return self._guarded('after_update', *args)

    def end_step(self, *args):
        return self._guarded('end_step', *args)


def guarded_run(monkeypatch, cfg, plugins, steps=2):
    """train_rl with each plug-in wrapped in a StreamGuard watching the generator train_rl samples with."""
    streams = []
    sample_step = grpo.sample_step

    def spy(model, env_factory, tasks, tok, cfg, generator):
        if not any(g is generator for g in streams):
            streams.append(generator)
        return sample_step(model, env_factory, tasks, tok, cfg, generator)

    monkeypatch.setattr(grpo, 'sample_step', spy)
    guards = [StreamGuard(p, streams) for p in plugins]
    tok = tokenizer()
    torch.manual_seed(0)
    model = arl.TinyAgent(model_config(len(tok)))  # untrained: its episodes fail, the plug-ins here act alone
    history = arl.train_rl(model, arl.make_tasks('train'), tok, cfg, steps, plugins=guards)
    assert len(streams) == 1  # the one training generator was seen, and watched
    return guards, history


def overridden_hooks(plugin):
    return {hook for hook in HOOKS if getattr(type(plugin), hook) is not getattr(arl.Plugin, hook)}


SMALL_RUN = dict(eval_every=0, tasks_per_step=2, group_size=2, max_turns=2, max_redraws=0)


@pytest.mark.parametrize('setting', [
    dict(kl_coef=0.1, kl_kind='k3+', entropy_coef=0.05, kl_target=1e-9,
         policy_loss=dict(variant='clip_cov', fraction=0.5, bounds=(-1e9, 1e9))),
    dict(kl_coef=0.1, kl_kind='k1', kl_in_reward=True, entropy_coef=0.05, policy_loss=dict(variant='kl_cov', fraction=0.5)),
], ids=['clip_cov+entropy+kl+adaptive', 'kl_cov+entropy+kl_in_reward'])
def test_no_chapter_plugin_draws_from_the_training_generator_or_the_global_rng(monkeypatch, setting):
    setting = dict(setting)
    cfg = arl.RLConfig(kl_coef=setting.pop('kl_coef'), kl_kind=setting.pop('kl_kind'), epochs=2, **SMALL_RUN)
    plugins = arl.chapter_plugins(cfg, **setting)
    guards, history = guarded_run(monkeypatch, cfg, plugins)
    assert len(plugins) == (4 if 'kl_target' in setting else 3)
    for guard in guards:
        assert guard.moved == [], (type(guard.inner).__name__, guard.moved)
        assert overridden_hooks(guard.inner) <= guard.called, type(guard.inner).__name__  # every hook it has ran
    if 'kl_target' in setting:  # the adaptive controller, in the loop: kl_ref above a tiny target, up 2% a step
        assert [h['kl_coef'] for h in history] == pytest.approx([0.1, 0.102])
    else:  # the KL in the reward: logged per episode, none in the loss; at step 0 the policy is the reference
        assert all('kl_ref' not in h for h in history) and abs(history[0]['kl_seq']) < 1e-3


class DrawsFromTraining(arl.Plugin):
    """Deliberately wrong: draws one number from the training generator (the guard must see it)."""
    acts_alone = True

    def __init__(self, streams):
        self.streams = streams

    def end_step(self, record):
        torch.rand(1, generator=self.streams[0])


class DrawsFromGlobal(arl.Plugin):
    """Deliberately wrong: draws from torch's global RNG in the update."""
    acts_alone = True

    def reshape_surrogate(self, surrogate, logp, old_logp, advantages, mask, stats):
        torch.rand(1)
        return surrogate


def test_the_stream_guard_sees_a_plugin_that_draws(monkeypatch):
    streams = []
    sample_step = grpo.sample_step

    def spy(model, env_factory, tasks, tok, cfg, generator):
        streams.append(generator)
        return sample_step(model, env_factory, tasks, tok, cfg, generator)

    monkeypatch.setattr(grpo, 'sample_step', spy)
    tok = tokenizer()
    torch.manual_seed(0)
    guards = [StreamGuard(DrawsFromTraining(streams), streams), StreamGuard(DrawsFromGlobal(), streams)]
    arl.train_rl(arl.TinyAgent(model_config(len(tok))), arl.make_tasks('train'), tok, arl.RLConfig(**SMALL_RUN),
                 1, plugins=guards)
    assert guards[0].moved == ['end_step'] and guards[1].moved == ['reshape_surrogate'] * 2
