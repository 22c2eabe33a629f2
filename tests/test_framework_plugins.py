"""The frameworks' options as engine settings and plug-ins: each against an independent computation, the engine's
draws untouched, and every new option off giving train_rl's run bit for bit."""
import copy
import dataclasses
import pytest
import torch

import agentrl as arl
from agentrl.ch10 import experiments, framework_claims
from agentrl.core.aggregation import aggregate
from agentrl.core.off_policy import cispo_surrogate, gspo_surrogate, ratio_weighted_kl, sampler_weights
from agentrl.substrate import grpo
from substrate_fixtures import max_param_difference, on_main, quick_base, tokenizer  # noqa: F401 (on_main: autouse)

SMALL = dict(eval_every=0, tasks_per_step=2, group_size=4, max_redraws=0)


def toy(seed=0, rows=3, length=5, vocab=7):
    """A minibatch of random logits [rows, length, vocab], chosen tokens, a ragged mask and advantages."""
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(rows, length, vocab, generator=g, dtype=torch.float64, requires_grad=True)
    tokens = torch.randint(vocab, (rows, length), generator=g)
    mask = torch.zeros(rows, length, dtype=torch.float64)
    for row, n in enumerate([length, 2, 4][:rows]):
        mask[row, :n] = 1
    old_logp = (arl.selected_log_probs(logits, tokens) + 0.3 * torch.randn(rows, length, generator=g,
                                                                            dtype=torch.float64)).detach()
    advantages = torch.tensor([1.0, -0.5, 2.0][:rows], dtype=torch.float64)
    return logits, tokens, mask, old_logp, advantages


def trained(plugins, cfg, steps=3, base=None):
    """(final model, history) of train_rl from a copy of the quick base."""
    model = copy.deepcopy(base)
    history = arl.train_rl(model, arl.make_tasks('train'), tokenizer(), cfg, steps, plugins=plugins)
    return model, history


class ActsAlone(arl.Plugin):
    """Adds nothing, but makes the engine update on every step (the quick base's groups often carry no signal), so the
    plug-ins' minibatch statistics are logged on every step."""
    acts_alone = True


@pytest.fixture(scope='module')
def base():
    return quick_base()


# ----------------------------------------------------------------------------------- off means off, bit for bit

def test_every_new_option_off_gives_train_rls_run_bit_for_bit(base):
    cfg = arl.RLConfig(seed=4, **SMALL)
    reference, reference_history = trained([], cfg, base=base)
    # the chapter's path with the new options at their defaults, and the measurements that change nothing
    regularized = copy.deepcopy(base)
    history = arl.train_rl(regularized, arl.make_tasks('train'), tokenizer(), cfg, 3,
                           plugins=arl.chapter_plugins(cfg, kl_weighting='none') + arl.framework_plugins({}))
    assert max_param_difference(reference, regularized) == 0.0 and history == reference_history
    measured, measured_history = trained([arl.SamplerCorrection('measure', None), arl.TopEntropyUpdate(1.0)], cfg,
                                         base=base)
    assert max_param_difference(reference, measured) == 0.0
    for ours, theirs in zip(measured_history, reference_history):
        assert {k: v for k, v in ours.items() if k not in ('sampler_kl', 'top_entropy_frac')} == theirs
        assert ours.get('top_entropy_frac', 1.0) == 1.0 and ('sampler_kl' in ours) == bool(ours['signal'])
    # a sampler named but at the trainer's own temperature draws exactly what the trainer draws
    same, same_history = trained([], dataclasses.replace(cfg, sample_temperature=cfg.temperature), base=base)
    assert max_param_difference(reference, same) == 0.0 and same_history == reference_history


def test_a_sampler_at_another_temperature_draws_other_episodes_and_the_gap_is_logged(base):
    cfg = arl.RLConfig(seed=4, **SMALL)
    seen = []
    sample_step = grpo.sample_step

    def spy(model, env_factory, tasks, tok, sampler_cfg, generator):
        seen.append(sampler_cfg.temperature)
        return sample_step(model, env_factory, tasks, tok, sampler_cfg, generator)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(grpo, 'sample_step', spy)
        _, hot = trained([arl.SamplerCorrection('measure', None), ActsAlone()],
                         dataclasses.replace(cfg, sample_temperature=2.0), base=base)
        _, cold = trained([arl.SamplerCorrection('measure', None), ActsAlone()], cfg, base=base)
    assert seen == [2.0] * 3 + [1.0] * 3
    # drawn at 2.0, scored at 1.0: the sampler's tokens are less likely under the trainer, far beyond batching noise
    hot, cold = ([h['sampler_kl'] for h in run] for run in (hot, cold))
    assert min(hot) > 0.05 > max(map(abs, cold))


@pytest.mark.parametrize('options', [
    dict(surrogate='gspo', surrogate_clip=(3e-4, 4e-4), top_entropy=0.3, sampler_correction='sequence_truncate',
         sampler_threshold=2.0),
    dict(surrogate='cispo', surrogate_clip=(1.0, 0.2), entropy_target=0.9, entropy_step=0.01, entropy_max=0.5,
         sampler_correction='token_mask', sampler_threshold=2.0)], ids=['gspo+top-entropy', 'cispo+entropy-target'])
def test_the_plugins_draw_nothing_from_the_training_streams(monkeypatch, options):
    from test_mechanisms import guarded_run, overridden_hooks  # the guard of the chapter's plug-ins, reused
    cfg = arl.RLConfig(seed=1, sample_temperature=1.5, epochs=2, **SMALL)
    guards, _ = guarded_run(monkeypatch, cfg, arl.framework_plugins(options) + [ActsAlone()])
    for guard in guards:
        assert guard.moved == [], (type(guard.inner).__name__, guard.moved)
        assert overridden_hooks(guard.inner) <= guard.called, type(guard.inner).__name__  # every hook it has ran


# ------------------------------------------------------------------------------------ the engine's aggregation

@pytest.mark.parametrize('mode', ['token-mean', 'seq-mean-token-mean', 'seq-mean-token-sum', 'seq-mean-token-sum-norm'])
def test_policy_kl_and_entropy_terms_are_reduced_by_the_one_mode(mode):
    logits, tokens, mask, old_logp, advantages = toy()
    horizon = 9.0 if mode.endswith('norm') else None
    cfg = arl.RLConfig(loss_agg=mode, loss_agg_horizon=horizon)
    logp = arl.selected_log_probs(logits, tokens)
    loss, _ = arl.policy_loss(logp, old_logp, advantages, mask, cfg)
    ratio = torch.exp(logp - old_logp)
    expected = -aggregate(torch.minimum(ratio * advantages[:, None],
                                        ratio.clamp(1 - cfg.clip_low, 1 + cfg.clip_high) * advantages[:, None]),
                          mask, mode, horizon)
    assert loss.item() == pytest.approx(expected.item(), rel=1e-12)
    # the KL and entropy terms follow the same mode
    ref_logp = (logp + 0.2).detach()
    kl_term = arl.ReferenceKL(None, 1.0, 'k3')
    kl_term.cfg, kl_term.ref_logp = cfg, ref_logp
    stats = {}
    kl_term.extend_loss(torch.tensor(0.0), torch.arange(3), logits, logp, mask, stats)
    assert stats['kl_ref'] == pytest.approx(aggregate(arl.kl_penalty(logp, ref_logp, 'k3'), mask, mode, horizon).item())
    bonus = arl.EntropyBonus(1.0)
    bonus.prepare(None, cfg)
    bonus.extend_loss(torch.tensor(0.0), None, logits, logp, mask, stats)
    assert stats['entropy'] == pytest.approx(aggregate(arl.entropy_from_logits(logits), mask, mode, horizon).item())


def test_token_mean_is_the_books_masked_mean_bit_for_bit():
    logits, tokens, mask, old_logp, advantages = toy(3)
    logp = arl.selected_log_probs(logits, tokens)
    assert torch.equal(grpo.token_reduce(logp, mask, arl.RLConfig()), arl.masked_mean(logp, mask))


def test_the_horizon_goes_with_its_mode_and_only_there():
    with pytest.raises(ValueError, match='horizon is required'):
        arl.RLConfig(loss_agg='seq-mean-token-sum-norm')
    with pytest.raises(ValueError, match='horizon is required'):
        arl.RLConfig(loss_agg='seq-mean-token-mean', loss_agg_horizon=10.0)
    with pytest.raises(ValueError, match='loss_agg'):
        arl.RLConfig(loss_agg='sum')


# --------------------------------------------------------------------------------------- the KL term's weighting

@pytest.mark.parametrize('weighting', ['ratio', 'ratio-detached'])
def test_the_kl_term_weights_by_the_update_s_own_old_log_probs(weighting):
    logits, tokens, mask, old_logp, _ = toy(1)
    logp = arl.selected_log_probs(logits, tokens)
    ref_logp = (logp - 0.4).detach()
    term = arl.ReferenceKL(None, 0.5, 'k3', estimator=arl.kl_estimate, weighting=weighting)
    term.cfg, term.ref_logp = arl.RLConfig(), ref_logp
    rows = torch.arange(3)
    term.begin_minibatch(rows, logits, logp, old_logp, mask)
    stats = {}
    loss = term.extend_loss(torch.tensor(0.0, dtype=torch.float64), rows, logits, logp, mask, stats)
    expected = 0.5 * arl.masked_mean(ratio_weighted_kl(logp, ref_logp, old_logp, 'k3', weighting), mask)
    got_grad, = torch.autograd.grad(loss, logits, retain_graph=True)
    want_grad, = torch.autograd.grad(expected, logits)
    assert torch.allclose(got_grad, want_grad, rtol=1e-12, atol=1e-15)
    unweighted = 0.5 * arl.masked_mean(arl.kl_estimate(logp, ref_logp, 'k3'), mask)
    assert abs(loss.item() - unweighted.item()) > 1e-3  # old_logp differs from logp: the weight is there


def test_kl_weighting_needs_a_kl_in_the_loss():
    with pytest.raises(ValueError, match='unknown KL weighting'):
        arl.ReferenceKL(None, 0.1, 'k3', weighting='importance')
    with pytest.raises(ValueError, match='kl_weighting'):
        arl.chapter_plugins(arl.RLConfig(kl_coef=0.0), kl_weighting='ratio')
    with pytest.raises(ValueError, match='kl_weighting'):
        arl.chapter_plugins(arl.RLConfig(kl_coef=0.3, kl_kind='k1'), kl_in_reward=True, kl_weighting='ratio')


# ------------------------------------------------------------------------------------------------- the plug-ins

def test_gspo_gives_each_token_its_sequence_objective():
    logits, tokens, mask, old_logp, advantages = toy(2)
    logp = arl.selected_log_probs(logits, tokens)
    stats = {}
    out = arl.SequenceRatioLoss((0.01, 0.02)).reshape_surrogate(None, logp, old_logp, advantages, mask, stats)
    per_sequence = gspo_surrogate(logp, old_logp, advantages, mask, 0.01, 0.02)
    assert torch.equal(out, per_sequence[:, None].expand_as(logp))
    # aggregated per sequence, GSPO's objective is the mean of the sequences' objectives
    assert aggregate(out, mask, 'seq-mean-token-mean').item() == pytest.approx(per_sequence.mean().item(), rel=1e-12)
    ratio = torch.exp(((logp - old_logp) * mask).sum(-1) / mask.sum(-1)).detach()
    silenced = ((ratio > 1.02) & (advantages > 0)) | ((ratio < 0.99) & (advantages < 0))
    assert stats['seq_clip_frac'] == pytest.approx(silenced.double().mean().item())


def test_cispo_keeps_a_capped_gradient_on_every_token():
    logits, tokens, mask, old_logp, advantages = toy(4)
    logp = arl.selected_log_probs(logits, tokens)
    stats = {}
    out = arl.CappedWeightLoss((1.0, 0.2)).reshape_surrogate(None, logp, old_logp, advantages, mask, stats)
    assert torch.equal(out, cispo_surrogate(logp, old_logp, advantages, 1.0, 0.2))
    grad, = torch.autograd.grad((out * mask).sum(), logp)
    weight = torch.exp(logp - old_logp).detach().clamp(max=1.2)
    assert torch.allclose(grad, weight * advantages[:, None] * mask, rtol=1e-12)
    ratio = torch.exp(logp - old_logp).detach()
    assert stats['capped_frac'] == pytest.approx(arl.masked_mean((ratio > 1.2).double(), mask).item())


def test_top_entropy_update_keeps_only_the_highest_entropy_tokens():
    logits, tokens, mask, old_logp, advantages = toy(5, rows=3, length=8)
    logp = arl.selected_log_probs(logits, tokens)
    plugin = arl.TopEntropyUpdate(0.25)
    plugin.begin_minibatch(torch.arange(3), logits, logp, old_logp, mask)
    surrogate = torch.ones_like(logp)
    stats = {}
    out = plugin.reshape_surrogate(surrogate, logp, old_logp, advantages, mask, stats)
    entropy = arl.entropy_from_logits(logits).detach()
    policy = entropy[mask > 0]
    kept = (out > 0) & (mask > 0)
    assert abs(int(kept.sum()) - 0.25 * len(policy)) <= 1  # a quarter of the policy tokens, up to the quantile's rounding
    assert entropy[kept].min() >= entropy[(mask > 0) & ~kept].max()  # every kept token outranks every dropped one
    assert torch.equal(out[~kept], torch.zeros_like(out[~kept]))
    assert stats['top_entropy_frac'] == pytest.approx(kept.sum().item() / len(policy))


def test_the_entropy_target_controller_steers_and_gates_the_bonus():
    logits, tokens, mask, _, _ = toy(6)
    logp = arl.selected_log_probs(logits, tokens)
    plugin = arl.EntropyTarget(target=1.0, step=0.1, highest=0.15)
    loss = torch.tensor(2.0, dtype=torch.float64)
    stats = {}
    assert plugin.extend_loss(loss, None, logits, logp, mask, stats) is loss  # off before any measurement
    coefs = []
    for entropy in (0.5, 0.5, 0.5, 1.5, 1.5, 1.5):
        record = dict(entropy=entropy)
        plugin.end_step(record)
        coefs.append((record['entropy_coef'], plugin.coef, plugin.on))
    assert coefs == [(0.0, 0.1, True), (0.1, 0.15, True), (0.15, 0.15, True), (0.15, pytest.approx(0.05), False),
                     (0.0, 0.0, False), (0.0, 0.0, False)]
    plugin.coef, plugin.on = 0.1, True
    extended = plugin.extend_loss(loss, None, logits, logp, mask, stats)
    assert extended.item() == pytest.approx(2.0 - 0.1 * arl.entropy_bonus(logits, mask).item())


@pytest.mark.parametrize('mode', ['token_truncate', 'sequence_mask'])
def test_sampler_correction_weights_the_surrogate_by_the_sampler_weights(mode):
    logits, tokens, mask, old_logp, advantages = toy(7)
    logp = arl.selected_log_probs(logits, tokens)
    sampled = (old_logp + 0.2 * torch.arange(5, dtype=torch.float64)).detach()  # [3, 5]
    plugin = arl.SamplerCorrection(mode, 2.0)
    plugin.shape_rewards(dict(sample_logp=torch.cat([sampled, sampled])), {})
    rows = torch.tensor([0, 1, 2])
    plugin.begin_minibatch(rows, logits, logp, old_logp, mask)
    surrogate = torch.full_like(logp, 3.0)
    stats = {}
    out = plugin.reshape_surrogate(surrogate, logp, old_logp, advantages, mask, stats)
    weights = sampler_weights(old_logp, sampled, mask, mode, 2.0)
    assert torch.equal(out, surrogate * weights)
    assert stats['sampler_kl'] == pytest.approx(arl.masked_mean(sampled - old_logp, mask).item())
    assert stats['sampler_weight'] == pytest.approx(arl.masked_mean(weights, mask).item())


@pytest.mark.parametrize('options,message', [
    (dict(surrogate='ppo2', surrogate_clip=(0.2, 0.2)), 'surrogate must be one of'),
    (dict(surrogate='gspo'), 'go together'),
    (dict(surrogate='gspo', surrogate_clip=(0.0, 0.2)), r'surrogate_clip\[0\]'),
    (dict(top_entropy=1.5), 'top_entropy'),
    (dict(entropy_target=0.3), 'go together'),
    (dict(sampler_correction='token_clip'), 'sampler_correction must be one of'),
    (dict(sampler_correction='token_mask'), 'needs a sampler_threshold'),
    (dict(sampler_threshold=2.0), 'means nothing'),
    (dict(top_k=3), 'unknown framework option top_k'),
])
def test_bad_framework_options_are_refused_clearly(options, message):
    with pytest.raises(ValueError, match=message):
        arl.framework_plugins(options)


def test_run_specs_carry_the_options_and_refuse_what_does_not_fit():
    spec = experiments.arm('x', options=dict(top_entropy=0.2), kl_weighting='none')
    assert spec.describe()['options'] == [['top_entropy', 0.2]]
    with pytest.raises(ValueError, match='kl_weighting'):
        experiments.arm('x', kl_weighting='ratio')
    with pytest.raises(ValueError, match='choose one'):
        experiments.arm('x', policy_loss=dict(variant='kl_cov'),
                                 options=dict(surrogate='cispo', surrogate_clip=(1.0, 0.2)))
    with pytest.raises(ValueError, match='unknown framework option'):
        experiments.arm('x', options=dict(cispo=True))


def test_every_option_arm_trains_with_its_plugins(base):
    """Two steps of each of the notebook's settings: each builds, trains and logs what its claims read."""
    logged = {'sampler T=1.3, uncorrected': 'sampler_kl', 'GSPO': 'seq_clip_frac', 'CISPO': 'capped_frac',
              'top 20% entropy': 'top_entropy_frac', 'entropy target 0.3': 'entropy_coef'}
    for spec in framework_claims.option_arms(steps=2):
        cfg = dataclasses.replace(spec.config(), eval_every=0, tasks_per_step=2, group_size=4)
        chosen = arl.chapter_plugins(cfg, kl_weighting=spec.kl_weighting)
        history = arl.train_rl(copy.deepcopy(base), arl.make_tasks('train'), tokenizer(), cfg, 2,
                               plugins=chosen + arl.framework_plugins(dict(spec.options)) + [ActsAlone()])
        if spec.name in logged:
            assert all(logged[spec.name] in step for step in history), spec.name


# ------------------------------------------------------------------------- what each refusal says, and boundaries

ALLOWED = ', '.join(arl.FRAMEWORK_OPTIONS)


@pytest.mark.parametrize('options,message', [
    (dict(top_k=3, x=1), f'unknown framework option top_k, x; allowed: {ALLOWED}'),
    (dict(surrogate='ppo2', surrogate_clip=(0.2, 0.2)), "surrogate must be one of 'gspo', 'cispo', got 'ppo2'"),
    (dict(surrogate='gspo'), 'surrogate and surrogate_clip go together: a surrogate needs its own clip (low, high)'),
    (dict(surrogate='gspo', surrogate_clip=[0.1, 0.2]), 'surrogate_clip must be a pair (low, high), got [0.1, 0.2]'),
    (dict(surrogate='gspo', surrogate_clip=(0.1,)), 'surrogate_clip must be a pair (low, high), got (0.1,)'),
    (dict(surrogate='cispo', surrogate_clip=(1.5, 0.2)), 'surrogate_clip[0] must be a finite number in (0, 1], got 1.5'),
    (dict(surrogate='cispo', surrogate_clip=(1.0, 0.0)), 'surrogate_clip[1] must be a finite number in (0, inf], got 0.0'),
    (dict(top_entropy=True), 'top_entropy must be a finite number in (0, 1], got True'),
    (dict(top_entropy=float('nan')), 'top_entropy must be a finite number in (0, 1], got nan'),
    (dict(entropy_target=0.3, entropy_max=1.0), 'entropy_target, entropy_step and entropy_max go together; got only '
                                                 'entropy_max, entropy_target'),
    (dict(entropy_target=0.3, entropy_step=0.1, entropy_max=float('inf')),
     'entropy_max must be a finite number in (0, inf], got inf'),
    (dict(entropy_target=0.3, entropy_step=0.0, entropy_max=1.0),
     'entropy_step must be a finite number in (0, inf], got 0.0'),
    (dict(sampler_correction='clip'), "sampler_correction must be one of token_truncate, token_mask, sequence_truncate, "
                                      "sequence_mask or 'measure', got 'clip'"),
    (dict(sampler_correction='measure', sampler_threshold=2.0),
     "sampler_threshold means nothing without a sampler_correction mode other than 'measure'"),
    (dict(sampler_correction='token_mask', sampler_threshold=0), 'sampler_threshold must be a finite number in (0, inf], '
                                                                  'got 0'),
])
def test_check_options_refuses_with_the_whole_message(options, message):
    with pytest.raises(ValueError) as refused:
        arl.check_options(options)  # RunSpec checks with this alone, before any plug-in is built
    assert str(refused.value) == message


def test_check_options_lets_through_what_is_allowed():
    for options in (dict(surrogate='cispo', surrogate_clip=(1.0, 0.2)), dict(top_entropy=1.0),
                    dict(sampler_correction='token_mask', sampler_threshold=0.5), dict(sampler_correction='measure'),
                    dict(entropy_target=0.3, entropy_step=0.01, entropy_max=0.5)):
        assert arl.check_options(options) == options


def test_the_surrogate_clip_reaches_its_plugin():
    gspo, = arl.framework_plugins(dict(surrogate='gspo', surrogate_clip=(3e-4, 4e-4)))
    cispo, = arl.framework_plugins(dict(surrogate='cispo', surrogate_clip=(1.0, 0.25)))
    assert (type(gspo), gspo.low, gspo.high) == (arl.SequenceRatioLoss, 3e-4, 4e-4)
    assert (type(cispo), cispo.low, cispo.high) == (arl.CappedWeightLoss, 1.0, 0.25)


def test_the_clip_statistics_count_exactly_the_silenced_and_capped():
    # one ratio per sequence, exactly 1 on the boundary of a zero-width clip, or clearly outside it
    log_ratio = torch.log(torch.tensor([1.5, 0.5, 1.5, 1.0, 1.0, 0.5, 0.5], dtype=torch.float64))
    advantages = torch.tensor([1.0, -1.0, 0.0, 1.0, -1.0, 1.0, 0.0], dtype=torch.float64)
    logp = log_ratio[:, None].expand(7, 2).clone()
    old = torch.zeros(7, 2, dtype=torch.float64)
    mask = torch.ones(7, 2, dtype=torch.float64)
    stats = {}
    arl.SequenceRatioLoss((0.0, 0.0)).reshape_surrogate(None, logp, old, advantages, mask, stats)
    # up past 1 with A > 0, down past 1 with A < 0; A = 0 either way, and a ratio of exactly 1, are not silenced
    assert stats['seq_clip_frac'] == pytest.approx(2 / 7)
    arl.SequenceRatioLoss((0.6, 0.6)).reshape_surrogate(None, logp, old, advantages, mask, stats)
    assert stats['seq_clip_frac'] == 0.0  # 1.5 and 0.5 are inside [0.4, 1.6]
    arl.CappedWeightLoss((0.0, 0.0)).reshape_surrogate(None, logp, old, advantages, mask, stats)
    assert stats['capped_frac'] == pytest.approx(5 / 7)  # above or below 1, whatever the advantage; exactly 1 is not
    # the engine's own clip statistics: a token with A = 0 is never counted as clipped
    cfg = arl.RLConfig()
    _, engine = arl.policy_loss(logp.float(), old.float(), advantages.float(), mask.float(), cfg)
    assert engine['clip_frac'] == pytest.approx(2 / 7)


def test_begin_minibatch_gets_the_minibatch_s_own_forward_pass(base):
    seen = []

    class Recorder(ActsAlone):
        def begin_minibatch(self, rows, logits, logp, old_logp, mask):
            seen.append((rows, logits, logp, old_logp, mask))

    trained([Recorder()], arl.RLConfig(seed=2, **SMALL), steps=1, base=base)
    assert len(seen) == 2  # two minibatches
    for rows, logits, logp, old_logp, mask in seen:
        assert logp.requires_grad and logp.shape == old_logp.shape == mask.shape == logits.shape[:2] == (len(rows),
                                                                                                         mask.shape[1])
    rows, logits, logp, old_logp, mask = seen[0]  # before any step of this update: the same policy as old_logp's
    on = mask > 0
    assert torch.allclose(logp.detach()[on], old_logp[on], atol=1e-4)


def test_the_sampler_settings_describe_one_policy_at_the_sampler_s_temperature():
    cfg = arl.RLConfig(sample_temperature=1.3)
    sampler = arl.sampler_config(cfg)
    assert (sampler.temperature, sampler.sample_temperature) == (1.3, None)
    assert arl.sampler_config(arl.RLConfig()) == arl.RLConfig()


def test_the_kl_term_uses_its_own_estimator_and_the_mode_prepare_reads():
    logits, tokens, mask, old_logp, _ = toy(8)
    ids = torch.cat([tokens[:, :1], tokens], dim=1)  # [3, 6]: position t + 1 of ids is token t
    reference_logits = torch.randn(3, 6, 7, generator=torch.Generator().manual_seed(9), dtype=torch.float64)
    cfg = arl.RLConfig(loss_agg='seq-mean-token-sum')
    term = arl.ReferenceKL(lambda ids, widths: reference_logits, 1.0, 'k1', estimator=lambda a, b, kind: (a - b) ** 2,
                           weighting='ratio-detached')
    term.prepare(ids, cfg)
    logp = arl.selected_log_probs(logits, tokens)
    term.begin_minibatch(torch.arange(3), logits, logp, old_logp, mask)
    stats = {}
    term.extend_loss(torch.tensor(0.0, dtype=torch.float64), torch.arange(3), logits, logp, mask, stats)
    ref_logp = arl.selected_log_probs(reference_logits[:, :-1], ids[:, 1:])
    expected = aggregate(torch.exp(logp - old_logp).detach() * (logp - ref_logp) ** 2, mask, 'seq-mean-token-sum')
    assert stats['kl_ref'] == pytest.approx(expected.item(), rel=1e-9)


def test_the_entropy_target_turns_the_bonus_on_at_the_target_itself():
    plugin = arl.EntropyTarget(target=0.5, step=0.1, highest=1.0)
    plugin.end_step(dict(entropy=0.5))
    assert plugin.on and plugin.coef == 0.1


def test_chapter_plugins_hands_the_kl_weighting_to_the_kl_term():
    with pytest.raises(ValueError, match='kl_weighting'):
        arl.chapter_plugins(arl.RLConfig(**SMALL), kl_weighting='ratio')  # no KL in the loss to weight
    kl_term, = arl.chapter_plugins(arl.RLConfig(kl_coef=0.3), kl_weighting='ratio-detached')
    assert kl_term.weighting == 'ratio-detached'


def test_bad_settings_of_the_engine_say_what_is_allowed():
    with pytest.raises(ValueError) as refused:
        arl.RLConfig(loss_agg='seq-mean-token-sum-norm')
    assert ("loss_agg_horizon=None with loss_agg='seq-mean-token-sum-norm': the horizon is required by "
            "'seq-mean-token-sum-norm' and means nothing to the other modes") in str(refused.value)
    with pytest.raises(ValueError) as refused:
        arl.ReferenceKL(None, 0.1, 'k3', weighting='both')
    assert str(refused.value) == "unknown KL weighting 'both'; allowed: 'none', 'ratio', 'ratio-detached'"
