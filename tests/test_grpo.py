"""GRPO: settings validation, advantages, the clipped surrogate, the update, the loop's random streams."""
import concurrent.futures
import copy
import dataclasses
import math
import multiprocessing

import pytest
import torch

import agentrl as arl
from agentrl.substrate.config import use
from substrate_fixtures import (MAIN, max_param_difference, on_main, quick_base, quick_base_dir, tokenizer, WrappedModel)  # noqa: F401 (on_main: autouse)


@pytest.fixture(scope='module')
def base_dir():
    return quick_base_dir()


@pytest.fixture(scope='module')
def base(base_dir):
    return quick_base(base_dir)


_TEMPERATURE = "a finite number in \\[0.01, 100.0\\]"
_SEED = 'an int in \\[0, 2\\*\\*63\\)'


@pytest.mark.parametrize('field, value, allowed', [
    ('kl_kind', 'k4', 'valid kinds'), ('kl_coef', -0.1, 'greater than or equal to 0'), ('lr', 0.0, 'greater than 0'),
    ('lr', -1e-3, 'greater than 0'), ('group_size', 1, 'greater than or equal to 2'),
    ('temperature', 0.0, _TEMPERATURE), ('temperature', 1e-30, _TEMPERATURE), ('temperature', 1e4, _TEMPERATURE),
    ('seed', 2 ** 70, _SEED),
    ('seed', -1, _SEED), ('eval_seed', 2 ** 64, _SEED), ('clip_low', 1.0, 'a finite number in \\(0, 1\\)'),
    ('clip_low', 0.0, 'a finite number in \\(0, 1\\)'), ('clip_high', -0.2, 'greater than 0'),
    ('epochs', 0, 'greater than or equal to 1'), ('minibatches', 0, 'greater than or equal to 1'),
    ('max_grad_norm', 0.0, 'greater than 0'), ('tasks_per_step', 0, 'greater than or equal to 1'),
    ('max_turns', 0, 'greater than or equal to 1'), ('eval_every', -1, 'greater than or equal to 0'),
    ('epochs', 1.5, 'a valid integer'), ('lr', float('nan'), 'a finite number'),
])
def test_rlconfig_rejects_bad_values_naming_the_field(field, value, allowed):
    # pydantic's message: the field on a line of its own, then what is allowed, then the value given
    with pytest.raises(ValueError, match=f'for RLConfig\\n{field}\\n .*{allowed}.* input_value='):
        arl.RLConfig(**{field: value})


def test_rlconfig_defaults():
    cfg = arl.RLConfig()
    assert (cfg.epochs, cfg.minibatches, cfg.temperature, cfg.kl_coef, cfg.kl_kind) == (1, 2, 1.0, 0.0, 'k3')
    assert cfg.clip_low == cfg.clip_high == 0.2 and cfg.group_size * cfg.tasks_per_step == 64
    assert arl.RLConfig(kl_kind='k3+').kl_kind == 'k3+'


def test_advantages_normalise_each_group_and_zero_variance_gives_zero():
    cfg = arl.RLConfig(group_size=4)
    rewards = torch.tensor([1., 0., 0., 0., 1., 1., 1., 1., 0., 1., 0., 1.])
    advantages = arl.compute_advantages(dict(rewards=rewards), cfg)
    groups = advantages.view(3, 4)
    assert groups[1].abs().max() == 0
    for g in (0, 2):
        assert groups[g].mean().abs() < 1e-6 and abs(groups[g].std().item() - 1) < 1e-4
    assert groups[0, 0] > 0 > groups[0, 1]
    with pytest.raises(ValueError, match='group_size=4'):
        arl.compute_advantages(dict(rewards=torch.ones(6)), cfg)


def test_policy_loss_clips_both_sides_on_hand_made_ratios():
    cfg = arl.RLConfig(clip_low=0.2, clip_high=0.3)
    ratios = torch.tensor([[1.5, 1.1, 0.5, 0.9], [1.5, 1.1, 0.5, 0.9]])  # [B=2, T=4]
    advantages = torch.tensor([1.0, -1.0])  # row 0: A > 0 (clip above 1.3); row 1: A < 0 (clip below 0.8)
    mask = torch.tensor([[1., 1., 1., 1.], [1., 1., 1., 0.]])
    old_logp = torch.full((2, 4), -1.0)
    logp = (old_logp + ratios.log()).requires_grad_()
    loss, stats = arl.policy_loss(logp, old_logp, advantages, mask, cfg)
    # clipped tokens: (0, 0) ratio 1.5 > 1.3 with A > 0; (1, 2) ratio 0.5 < 0.8 with A < 0 -> 2 of 7 policy tokens
    assert stats['clip_frac'] == pytest.approx(2 / 7) and stats['clip_high_frac'] == pytest.approx(1 / 7)
    assert stats['clip_low_frac'] == pytest.approx(1 / 7)
    expected = -(1.3 + 1.1 + 0.5 + 0.9 - 1.5 - 1.1 - 0.8) / 7
    assert loss.item() == pytest.approx(expected, abs=1e-6)
    loss.backward()
    assert logp.grad[0, 0] == 0 and logp.grad[1, 2] == 0  # clipped tokens get no gradient
    assert logp.grad[0, 1] < 0 and logp.grad[1, 1] > 0 and logp.grad[1, 3] == 0  # others do; padding does not
    assert logp.grad[0, 2] < 0 and logp.grad[1, 0] > 0  # the unclipped sides of the min still count


def test_rl_update_logs_entropy_kl_and_refuses_plus_kinds(base):
    tok = tokenizer()
    cfg = arl.RLConfig(kl_coef=0.1, kl_kind='k2', minibatches=1, temperature=0.7)
    trajs = arl.sample_groups(base, lambda: arl.make_env(cfg), arl.make_tasks('train')[:4], tok, cfg,
                              torch.Generator().manual_seed(0))
    batch = arl.collate(trajs, tok.pad_id)
    batch['rewards'] = torch.arange(len(trajs), dtype=torch.float) % 3  # a spread in every group
    advantages = arl.compute_advantages(batch, cfg)

    def entropy_of(model):  # full-vocabulary entropy over policy tokens at the run's temperature, by hand
        with torch.no_grad():
            logits = model(batch['ids'])[:, :-1] / cfg.temperature
            return arl.masked_mean(arl.entropy_from_logits(logits), batch['action_mask']).item()

    model = copy.deepcopy(base)
    stats = arl.rl_update(model, torch.optim.Adam(model.parameters(), lr=1e-3), batch, advantages, cfg,
                          copy.deepcopy(base), torch.Generator().manual_seed(0))
    for key in ('entropy', 'clip_frac', 'kl_ref', 'grad_norm', 'pg_loss'):
        assert key in stats
    # one minibatch, measured before its step: the model is still the reference and the policy of old_logp
    # (computed at the same temperature), so the ratio is exactly 1 and nothing is clipped
    assert stats['kl_ref'] == 0.0
    assert stats['ratio'] == 1.0 and stats['approx_kl_old'] == 0.0 and stats['clip_frac'] == 0.0
    assert stats['entropy'] == pytest.approx(entropy_of(base), rel=1e-6) and stats['grad_norm'] > 0
    moved = copy.deepcopy(model)
    stats = arl.rl_update(model, torch.optim.Adam(model.parameters(), lr=1e-3), batch, advantages, cfg, base)
    assert stats['kl_ref'] > 0  # after one step it is not
    assert stats['ratio'] == 1.0 and stats['clip_frac'] == 0.0  # old_logp is recomputed at each update
    assert stats['entropy'] == pytest.approx(entropy_of(moved), rel=1e-6) and entropy_of(moved) != entropy_of(base)
    assert stats['entropy'] < math.log(len(tok)) and max_param_difference(model, base) > 0
    with pytest.raises(ValueError, match="kl_estimate"):
        arl.rl_update(model, torch.optim.Adam(model.parameters()), batch, advantages,
                      dataclasses.replace(cfg, kl_kind='k3+'), base)


class NaNModel(WrappedModel):
    """Its logits become NaN (a broken network)."""

    def forward(self, ids, widths=None):
        return self.model(ids, widths) * float('nan')


def test_a_nan_loss_stops_training_naming_the_step(base):
    model = NaNModel(copy.deepcopy(base))
    cfg = arl.RLConfig(eval_every=0, tasks_per_step=2)
    with pytest.raises(arl.NonFiniteLossError, match=r'GRPO, step \d+: the loss is nan'):
        arl.train_rl(model, arl.make_tasks('train'), tokenizer(), cfg, steps=2)
    assert max_param_difference(model.model, base) == 0.0  # the model was not updated


def test_a_nan_loss_stops_a_regularised_run_too_naming_it(base):
    model = NaNModel(copy.deepcopy(base))
    cfg = arl.RLConfig(eval_every=0, tasks_per_step=2, kl_coef=0.1, kl_kind='k3+')
    with pytest.raises(arl.NonFiniteLossError, match=r"run 'probe', step 0: the loss is nan"):
        arl.train_rl(model, arl.make_tasks('train'), tokenizer(), cfg, 2, label="run 'probe'",
                     plugins=arl.chapter_plugins(cfg, entropy_coef=0.1))
    assert max_param_difference(model.model, base) == 0.0


# The chapter's train_regularized (section 10.6) with every coefficient at zero adds no plug-in: it is train_rl,
# random draw for random draw, evaluation included.
@pytest.mark.parametrize('fields', [dict(), dict(kl_coef=0.3, kl_kind='k3')])
def test_chapter_loop_without_regularisers_equals_train_rl_after_3_steps(base, fields):
    tok, train = tokenizer(), arl.make_tasks('train')
    cfg = arl.RLConfig(eval_every=2, eval_group_size=2, **fields)  # train_rl evaluates at step 1; must not matter
    model_a, model_b = copy.deepcopy(base), copy.deepcopy(base)
    history_a = arl.train_rl(model_a, train, tok, cfg, steps=3)
    history_b = arl.train_regularized(model_b, train, tok, cfg, steps=3)
    assert max_param_difference(model_a, model_b) == 0.0
    assert 'heldout_pass1' in history_a[1] and history_a == history_b


def test_same_seed_same_history_bit_for_bit(base):
    tok, train = tokenizer(), arl.make_tasks('train')
    runs = []
    for _ in range(2):
        model = copy.deepcopy(base)
        runs.append((arl.train_rl(model, train, tok, arl.RLConfig(eval_every=0), steps=3), model))
    assert runs[0][0] == runs[1][0] and max_param_difference(runs[0][1], runs[1][1]) == 0.0
    other = arl.train_rl(copy.deepcopy(base), train, tok, arl.RLConfig(eval_every=0, seed=1), steps=3)
    assert other != runs[0][0]


def test_evaluation_touches_neither_the_model_nor_the_global_rng(base):
    model = copy.deepcopy(base)
    torch.manual_seed(123)
    state = torch.get_rng_state()
    first = arl.heldout_pass_at_1(model, tokenizer(), arl.RLConfig(), attempts=2)
    assert torch.equal(torch.get_rng_state(), state)
    assert max_param_difference(model, base) == 0.0
    assert arl.heldout_pass_at_1(model, tokenizer(), arl.RLConfig(), attempts=2) == first


def train_two_steps(directory):
    """Worker: load the quick base from `directory` and train it for 2 default steps -> history (on the substrate
    'main', which a spawned process does not inherit from this module's fixture)."""
    with use(MAIN):
        model = quick_base(directory)
        return arl.train_rl(model, arl.make_tasks('train'), tokenizer(), arl.RLConfig(eval_every=0), steps=2)


def test_a_run_in_another_process_gives_the_same_numbers(base, base_dir):
    here = train_two_steps(base_dir)
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=multiprocessing.get_context('spawn')) as pool:
        there = pool.submit(train_two_steps, base_dir).result()
    assert here == there


def test_training_results_do_not_depend_on_the_callers_thread_count(base):
    tok, train, histories = tokenizer(), arl.make_tasks('train'), []
    saved = torch.get_num_threads()
    try:
        for threads in (1, 2):
            torch.set_num_threads(threads)
            model = copy.deepcopy(base)
            histories.append((arl.train_rl(model, train, tok, arl.RLConfig(eval_every=0), steps=2), model))
            assert torch.get_num_threads() == threads  # restored after training
    finally:
        torch.set_num_threads(saved)
    assert histories[0][0] == histories[1][0] and max_param_difference(histories[0][1], histories[1][1]) == 0.0


def test_negative_steps_are_refused():
    with pytest.raises(ValueError, match='steps'):
        arl.train_rl(None, [], None, arl.RLConfig(), steps=-3)


def test_plain_train_rl_refuses_chapter_10_kinds_and_points_to_train_regularized():
    with pytest.raises(ValueError, match='train_regularized'):
        arl.train_rl(None, [], None, arl.RLConfig(kl_coef=0.1, kl_kind='k3+'), steps=1)


@pytest.mark.parametrize('shape', [(0, 5), (0, 0)])  # (0, 0): what collate makes of no trajectories
def test_an_empty_batch_reads_no_widths(shape):
    from agentrl.substrate.grpo import read_widths
    widths = read_widths(torch.zeros(shape))
    assert widths.shape == (0,) and widths.dtype == torch.long


class FullWidth(WrappedModel):
    """Computes every position of every row, whatever the update says it reads."""

    def forward(self, ids, widths=None):
        return self.model(ids)


def test_the_update_reads_each_row_up_to_its_last_policy_token_and_learns_what_the_full_batch_teaches(base):
    from agentrl.substrate.grpo import read_widths
    mask = torch.tensor([[0., 1., 1., 0., 0.], [0., 0., 0., 0., 0.], [1., 0., 0., 0., 1.]])
    assert read_widths(mask).tolist() == [3, 1, 5]  # the logits at position p score the token at p + 1
    tok = tokenizer()
    cfg = arl.RLConfig(kl_coef=0.1, minibatches=2)
    trajs = arl.sample_groups(base, lambda: arl.make_env(cfg), arl.make_tasks('train')[:4], tok, cfg,
                              torch.Generator().manual_seed(0))
    batch = arl.collate(trajs, tok.pad_id)
    batch['rewards'] = torch.arange(len(trajs), dtype=torch.float) % 3  # a spread in every group
    widths = read_widths(batch['action_mask'])
    assert widths.max() <= batch['ids'].shape[1] and widths.float().mean() < 0.9 * batch['ids'].shape[1]
    results = []
    for model in (copy.deepcopy(base), FullWidth(copy.deepcopy(base))):
        # plain SGD: Adam would blow the rounding of near-zero gradients up to a step of lr
        stats = arl.rl_update(model, torch.optim.SGD(model.parameters(), lr=1.0), batch,
                              arl.compute_advantages(batch, cfg), cfg, copy.deepcopy(base),
                              torch.Generator().manual_seed(0))
        results.append((stats, model))
    (grouped, grouped_model), (full, full_model) = results
    assert grouped.keys() == full.keys()
    for key in grouped:
        assert grouped[key] == pytest.approx(full[key], rel=1e-4, abs=1e-6), key
    moved = max_param_difference(full_model.model, base)
    assert moved > 1e-3 and max_param_difference(grouped_model, full_model.model) < 1e-4 * moved
