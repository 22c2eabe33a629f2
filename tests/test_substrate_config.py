"""One description of a substrate: every field of SubstrateConfig reaches what it shapes, and caches are keyed by it."""
import dataclasses
import random
import re

import pytest
import torch

import agentrl as arl
from agentrl.ch10 import experiments
from agentrl.substrate import gym, sft
from agentrl.substrate.config import CANDIDATES, DEFAULT, Habits, SFTConfig, SubstrateConfig, active, use

LONG = SubstrateConfig(grammar='long')
C18 = CANDIDATES['c18']
MAIN = CANDIDATES['main']  # the substrate before the calibration: SubstrateConfig()'s defaults


def test_use_switches_the_active_configuration_and_restores_it():
    assert active() == DEFAULT
    with use(C18):
        assert active() == C18
        with use(LONG):
            assert active() == LONG
        assert active() == C18
    assert active() == DEFAULT
    with pytest.raises(TypeError, match='SubstrateConfig'):
        with use({'grammar': 'long'}):
            pass


@pytest.mark.parametrize('field, value, allowed', [
    ('families', 'huge', "'base' or 'extended'"), ('heldout', 'anywhere', "'any_line' or 'fresh_line'"),
    ('grammar', 'verbose', "'short' or 'long'"), ('max_offset', -1, 'greater than or equal to 0'),
    ('max_offset', True, 'a valid integer'), ('n_head', 3, '1, 2, 4, 8, 16, 32 or 64'),
    ('logit_scale', 0.0, 'greater than 0'), ('logit_scale', float('inf'), 'a finite number'),
    ('turn_cost', -0.1, 'greater than or equal to 0'), ('rl_lr', '1e-3', 'a valid number'),
])
def test_a_bad_field_is_refused_naming_it_and_what_is_allowed(field, value, allowed):
    with pytest.raises(ValueError, match=rf'for SubstrateConfig\n{field}\n  Input should be {re.escape(allowed)} '
                                         rf'\[type=\w+, input_value={re.escape(repr(value))},'):
        SubstrateConfig(**{field: value})
    with pytest.raises(ValueError, match=r"for Habits\nslips\n  Input should be 'mixed' or 'choice'"):
        Habits(slips='often')
    with pytest.raises(ValueError, match=r'for Habits\nmislabel\n  Input should be a probability in \[0, 1\] '
                                         r'\[type=allowed_values, input_value=1.5,'):
        Habits(mislabel=1.5)
    with pytest.raises(ValueError, match=r'for SFTConfig\nbatch_size\n  Input should be greater than or equal to 1'):
        SFTConfig(batch_size=0)
    with pytest.raises(ValueError, match=r'for SFTConfig\nhabits\n  Input should be an instance of Habits'):
        SFTConfig(habits=dict(read=1.0))


def test_configurations_are_hashable_and_round_trip_through_their_description():
    assert len({MAIN, C18, LONG, SubstrateConfig()}) == 3
    for config in CANDIDATES.values():
        assert SubstrateConfig.from_description(config.describe()) == config
    assert C18.key() != MAIN.key() and MAIN.key() == SubstrateConfig().key()


def test_rlconfig_defaults_follow_the_active_configuration():
    assert arl.RLConfig().lr == DEFAULT.rl_lr and arl.RLConfig().turn_cost == DEFAULT.turn_cost
    with use(dataclasses.replace(C18, turn_cost=0.25)):
        assert arl.RLConfig().lr == C18.rl_lr and arl.RLConfig().turn_cost == 0.25
        assert arl.RLConfig(lr=1e-3).lr == 1e-3  # a value given wins


def test_the_family_set_and_offset_cap_reach_the_tasks():
    base, extended = arl.make_tasks('all', substrate=MAIN), arl.make_tasks('all', substrate=C18)
    assert len({t.family for t in base}) == 36 and len({t.family for t in extended}) == 51
    assert max(t.max_offset for t in extended) == 2 and max(t.max_offset for t in base) > 2
    with use(C18):
        assert arl.make_tasks('train') == arl.make_tasks('train', substrate=C18)


@pytest.mark.parametrize('config', [SubstrateConfig(heldout='fresh_line'), C18])
def test_a_fresh_line_held_out_bug_sits_where_no_training_bug_of_its_family_does(config):
    train, heldout = arl.make_tasks('train', substrate=config), arl.make_tasks('heldout', substrate=config)
    assert len(heldout) == 10 and not {t.task_id for t in train} & {t.task_id for t in heldout}
    for task in heldout:
        assert all(u.bug_line != task.bug_line for u in train if u.family == task.family), task.task_id
        assert all(line != task.bug_line for line, _, _ in task.sites)  # a blind guess never lands on it


def test_the_long_grammar_parses_its_calls_and_refuses_the_short_ones():
    task = arl.make_tasks('train', substrate=LONG)[0]
    env = arl.Env()
    env.reset(task, 0)
    assert env.max_call_words == 8 and not env.call_is_complete('edit L4 replace < with >'.split())
    shown, _ = env.step('read L1 to L2')
    assert shown[:3] == ['<obs>', 'L1', 'def'] and env.info['reads'] == 1
    assert env.step('read L1 L2')[0] == ['<obs>', 'error', 'bad', 'arguments', '</obs>']
    assert env.step(f'edit L{task.bug_line} replace {task.wrong}')[0][2:4] == ['bad', 'arguments']
    assert env.step(task.fix(0))[0] == ['<obs>', 'ok', f'L{task.bug_line}', '</obs>']
    env.step('submit')
    assert env.reward == 1.0 and env.info['n_invalid'] == 2
    short = arl.make_tasks('train')[0]
    assert short.fix(1).split()[0:2] == ['edit', f'L{short.bug_line + 1}'] and 'replace' not in short.fix()
    assert {'to', 'replace', 'with'} <= set(arl.build_tokenizer(arl.make_tasks('all', substrate=LONG)).words)
    assert 'replace' not in arl.build_tokenizer(arl.make_tasks('all')).words


def _slip_calls(config, kind, n=400):
    """The bad calls a scripted agent that always slips makes on the first tasks of config (calls before each real one)."""
    tasks, rng = arl.make_tasks('train', substrate=config), random.Random(1)
    out = []
    for i in range(n):
        task = tasks[i % 20]
        offset = gym.draw_offset(task, rng.random())
        calls = sft.demonstration_calls(task, offset, rng, Habits(read=1.0, slip=1.0, slips=kind))
        out += [(task, calls[j]) for j in range(0, len(calls), 2)]  # every call is preceded by its slip
    return out


@pytest.mark.parametrize('config', [DEFAULT, LONG])
def test_choice_slips_only_change_words_the_grammar_leaves_open(config):
    for task, call in _slip_calls(config, 'choice'):
        tool, *args = call.split()
        assert tool in ('read', 'edit') and task.calls.parse(tool, args) is not None, call
    mixed = _slip_calls(config, 'mixed')
    assert any(c.split()[0] not in ('read', 'edit') or task.calls.parse(c.split()[0], c.split()[1:]) is None
               for task, c in mixed)


def test_a_mislabelled_fix_names_a_neighbouring_line_and_fails():
    tok, rng = arl.build_tokenizer(arl.make_tasks('all')), random.Random(0)
    habits = Habits(read=1.0, full_read=1.0, slip=0.0, mislabel=1.0)
    for task in arl.make_tasks('train')[:30]:
        calls = sft.demonstration_calls(task, 0, rng, habits)
        edit_line = int(calls[1].split()[1][1:])
        assert abs(edit_line - task.bug_line) == 1 and calls[1] != task.fix(0)
        env = arl.Env()
        env.reset(task, 0)
        for call in calls:
            env.step(call)
        assert env.reward == 0.0


def test_a_turn_cost_shifts_advantages_only_in_groups_with_a_reward_spread():
    # the groups' mean turns differ (3 and 4.5): each episode is measured against its own group's mean
    batch = dict(rewards=torch.tensor([1., 0., 0., 0., 1., 1., 1., 1.]), n_turns=torch.tensor([3, 2, 2, 5, 2, 5, 6, 5]))
    plain = arl.compute_advantages(batch, arl.RLConfig(group_size=4, turn_cost=0.0))
    costly = arl.compute_advantages(batch, arl.RLConfig(group_size=4, turn_cost=0.1))
    assert torch.allclose(costly[:4] - plain[:4], -0.1 * torch.tensor([0., -1., -1., 2.]))
    assert torch.equal(costly[4:], torch.zeros(4))  # equal rewards: no signal, whatever the turns
    with pytest.raises(ValueError, match=r"^cfg\.turn_cost > 0 needs batch\['n_turns'\] \(turns per episode \[B\]; "
                                         r"collate sets it\)$"):
        arl.compute_advantages(dict(rewards=batch['rewards']), arl.RLConfig(group_size=4, turn_cost=0.1))
    with use(MAIN):  # its default cost per turn is 0
        assert torch.equal(arl.compute_advantages(dict(rewards=batch['rewards']), arl.RLConfig(group_size=4)), plain)


def test_collate_carries_each_episodes_turns():
    tok = arl.build_tokenizer(arl.make_tasks('all'))
    model = arl.TinyAgent(arl.ModelConfig(vocab_size=len(tok)))
    cfg = arl.RLConfig(group_size=2)
    trajs = arl.sample_groups(model, lambda: arl.make_env(cfg), arl.make_tasks('train')[:2], tok, cfg,
                              torch.Generator().manual_seed(0))
    assert arl.collate(trajs, tok.pad_id)['n_turns'].tolist() == [t.info['n_turns'] for t in trajs]


def test_the_logit_scale_multiplies_every_path_to_the_logits():
    torch.manual_seed(0)
    plain = arl.TinyAgent(arl.ModelConfig(vocab_size=30, context=16))
    scaled = arl.TinyAgent(arl.ModelConfig(vocab_size=30, context=16, logit_scale=0.35))
    scaled.load_state_dict(plain.state_dict())
    ids = torch.randint(0, 30, (2, 6))
    assert torch.allclose(scaled(ids), 0.35 * plain(ids))
    cache = scaled.new_cache(2)
    first = scaled.logits(scaled.read(ids[:, :5], cache, 0, None))[:, -1]
    assert torch.allclose(first, scaled(ids[:, :5])[:, -1], atol=1e-6)
    following = scaled.logits(scaled.read(ids[:, 5:6], cache, 5, None))[:, 0]
    assert torch.allclose(following, scaled(ids)[:, -1], atol=1e-6)


def test_the_initialisation_scale_is_the_configured_std():
    torch.manual_seed(0)
    wide = arl.TinyAgent(arl.ModelConfig(vocab_size=300, init_std=0.08))
    assert wide.tok_emb.weight.std().item() == pytest.approx(0.08, rel=0.05)
    assert wide.blocks[0].mlp[2].weight.std().item() == pytest.approx(0.04, rel=0.05)  # / sqrt(2 layers)


def test_the_rl_base_description_and_the_run_key_name_the_configuration(monkeypatch):
    tasks = arl.make_tasks('train')
    long_tasks = arl.make_tasks('train', substrate=SubstrateConfig(grammar='long'))
    tok = arl.build_tokenizer(arl.make_tasks('all'))
    model_cfg, sft_cfg = arl.ModelConfig(vocab_size=len(tok)), SFTConfig()
    assert sft.cache_key(tok, tasks, model_cfg, sft_cfg) != sft.cache_key(tok, long_tasks, model_cfg, sft_cfg)
    capped = arl.make_tasks('train', substrate=SubstrateConfig(max_offset=1))
    assert sft.cache_key(tok, tasks, model_cfg, sft_cfg) != sft.cache_key(tok, capped, model_cfg, sft_cfg)
    monkeypatch.setattr(experiments, 'rl_base_fingerprint', lambda: 'same weights')
    spec = experiments.RunSpec('none')
    default_key = experiments.run_path(spec)
    with use(SubstrateConfig(rl_lr=3e-4)):  # same RL base, another default learning rate: another run
        assert experiments.run_path(spec) != default_key


def test_a_substrate_reaches_rlconfig_explicitly_whatever_configuration_is_in_use():
    costly = dataclasses.replace(C18, turn_cost=0.25)
    for active_one in (DEFAULT, MAIN):
        with use(active_one):
            cfg = arl.RLConfig.for_substrate(costly, seed=3)
            assert (cfg.lr, cfg.turn_cost, cfg.seed) == (C18.rl_lr, 0.25, 3)
    assert arl.RLConfig.for_substrate(costly, lr=1e-3, turn_cost=0.0).lr == 1e-3  # a value given wins
    assert arl.RLConfig.for_substrate(costly, turn_cost=0.0).turn_cost == 0.0


def test_a_runs_settings_come_from_its_substrate_explicitly():
    with use(dataclasses.replace(MAIN, rl_lr=3e-4, turn_cost=0.125)):
        cfg = experiments.RunSpec('none', fields=(('kl_coef', 0.3), ('kl_kind', 'k3+'))).config()
    assert (cfg.lr, cfg.turn_cost, cfg.kl_coef) == (3e-4, 0.125, 0.3)


def test_the_engine_adds_chapter_9s_kl_term_only_where_no_plug_in_is_the_runs_kl():
    from agentrl.substrate.grpo import engine_plugins

    chosen = engine_plugins(arl.RLConfig(kl_coef=0.1, kl_kind='k2'))
    assert [(type(p).__name__, p.kind, p.coef, p.estimator) for p in chosen] == [('ReferenceKL', 'k2', 0.1,
                                                                                   arl.kl_penalty)]
    own = arl.ReferenceKL(None, 0.3, 'k3+', estimator=arl.kl_estimate)
    assert engine_plugins(arl.RLConfig(kl_coef=0.3, kl_kind='k3+'), [own]) == [own]
    assert engine_plugins(arl.RLConfig()) == []
    with pytest.raises(ValueError, match=r"chapter 9's KL term uses kl_penalty"):
        engine_plugins(arl.RLConfig(kl_coef=0.1, kl_kind='k3+'))
