"""Batched sampling, reproducibility, collate's action mask, truncation, behaviour statistics."""
import pytest
import torch

import agentrl as arl
from substrate_fixtures import quick_base, tokenizer


@pytest.fixture(scope='module')
def base():
    return quick_base()


def sample(model, tasks, seed, **fields):
    cfg = arl.RLConfig(**fields)
    return arl.sample_groups(model, lambda: arl.make_env(cfg), tasks, tokenizer(), cfg, torch.Generator().manual_seed(seed))


def test_groups_are_contiguous_and_sampling_is_reproducible(base):
    tasks = arl.make_tasks('train')[:4]
    trajs = sample(base, tasks, 0, group_size=3)
    assert [t.task_id for t in trajs] == [t.task_id for t in tasks for _ in range(3)]
    assert [t.group for t in trajs] == [0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3]
    again = sample(base, tasks, 0, group_size=3)
    assert [(t.ids, t.logps, t.info) for t in trajs] == [(t.ids, t.logps, t.info) for t in again]
    other = sample(base, tasks, 1, group_size=3)
    assert [t.ids for t in trajs] != [t.ids for t in other]


def test_action_mask_covers_exactly_the_policy_tokens(base):
    tok = tokenizer()
    trajs = sample(base, arl.make_tasks('train')[:8], 0, group_size=4)
    batch = arl.collate(trajs, tok.pad_id)
    ids, mask, sample_logp = batch['ids'], batch['action_mask'], batch['sample_logp']
    assert ids.shape[0] == len(trajs) and mask.shape == sample_logp.shape == (len(trajs), ids.shape[1] - 1)
    for b, traj in enumerate(trajs):
        # the masked tokens must be exactly the calls the environment received, in order
        written = [tok.words[i] for i, m in zip(ids[b, 1:].tolist(), mask[b].tolist()) if m]
        calls = []
        for action in traj.info['actions']:
            words = action.split()
            calls += words if len(words) >= 6 else words + [';']  # a call cut at 6 words has no ';'
        assert written[:len(calls)] == calls and len(written) == traj.n_policy_tokens
        # and every unmasked stretch is the prompt or an observation
        runs, current = [], []
        for position in range(len(traj.ids)):
            policy = position > 0 and mask[b, position - 1] == 1
            if not policy:
                current.append(tok.words[traj.ids[position]])
            elif current:
                runs.append(current)
                current = []
        runs += [current] if current else []
        assert runs[0][0] == '<task>' and runs[0][-1] == '</task>'
        for run in runs[1:]:
            assert run[0] == '<obs>' and (run[-1] == '</obs>' or traj.info['truncated'])
        assert (ids[b, len(traj.ids):] == tok.pad_id).all() and mask[b, len(traj.ids) - 1:].sum() == 0
    assert (sample_logp * (1 - mask)).abs().sum() == 0
    with torch.no_grad():
        logp = arl.selected_log_probs(base(ids)[:, :-1], ids[:, 1:])
    assert ((logp - sample_logp) * mask).abs().max() < 1e-4  # the sampler's log-probs are the model's
    assert batch['rewards'].tolist() == [t.reward for t in trajs]


def test_sampler_log_probs_use_the_temperature(base):
    tok = tokenizer()
    trajs = sample(base, arl.make_tasks('train')[:2], 0, group_size=4, temperature=1.7)
    batch = arl.collate(trajs, tok.pad_id)
    with torch.no_grad():
        logp = arl.selected_log_probs(base(batch['ids'])[:, :-1] / 1.7, batch['ids'][:, 1:])
    assert ((logp - batch['sample_logp']) * batch['action_mask']).abs().max() < 1e-4


def test_too_long_episodes_are_truncated_cleanly(base):
    short = arl.TinyAgent(arl.ModelConfig(vocab_size=len(tokenizer()), context=40))
    short.load_state_dict({k: (v[:40] if k == 'pos_emb.weight' else v) for k, v in base.state_dict().items()})
    trajs = sample(short, arl.make_tasks('train')[:4], 0, group_size=4)
    assert all(len(t.ids) <= 40 for t in trajs)
    assert any(t.info['truncated'] for t in trajs)
    assert all(t.reward == 0.0 for t in trajs if t.info['truncated'])
    assert arl.behavior_stats(trajs)['truncated'] > 0
    arl.collate(trajs, tokenizer().pad_id)


def test_sample_step_keeps_only_groups_with_a_reward_spread(base):
    cfg = arl.RLConfig()
    kept, sampled = arl.sample_step(base, lambda: arl.make_env(cfg), arl.make_tasks('train'), tokenizer(), cfg,
                                    torch.Generator().manual_seed(0))
    assert len(sampled) == 64 and len(kept) % 8 == 0
    for start in range(0, len(kept), 8):
        assert len({t.reward for t in kept[start:start + 8]}) > 1
    stats = arl.behavior_stats(sampled)
    for key in ('reward', 'reads', 'invalid', 'turns', 'policy_tokens', 'submitted', 'truncated', 'zero_var'):
        assert key in stats
    if stats['zero_var'] < 1:  # kept comes from the first draw
        assert stats['zero_var'] == 1 - len(kept) / 64
    else:  # no group of the first draw had a reward spread: kept comes from a new draw of tasks
        assert kept and {t.task_id for t in kept}.isdisjoint({t.task_id for t in sampled}) or kept


def test_empty_batch_collates():
    batch = arl.collate([], 0)
    assert batch['ids'].shape == (0, 1) and batch['action_mask'].shape == (0, 0)
