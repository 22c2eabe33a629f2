"""Batched sampling, reproducibility, collate's action mask, truncation, behaviour statistics."""
import dataclasses

import pytest
import torch

import agentrl as arl
from agentrl.substrate.gym import draw_offset
from substrate_fixtures import on_main, quick_base, tokenizer  # noqa: F401 (on_main: autouse)


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


class NeverRewarded(arl.Env):
    """An environment whose episodes all score 0, whatever the agent does."""

    @property
    def reward(self):
        return 0.0


def env_factory(cfg, unrewarded):
    """Fresh environments with cfg's limits; the first `unrewarded` of them never reward."""
    created = iter(range(10 ** 9))
    return lambda: (NeverRewarded if next(created) < unrewarded else arl.Env)(cfg.max_turns, cfg.max_call_words)


def spread_groups(trajs, size):
    """The trajectories of the groups (contiguous, `size` each) whose rewards differ."""
    groups = [trajs[start:start + size] for start in range(0, len(trajs), size)]
    return [t for group in groups if len({t.reward for t in group}) > 1 for t in group]


@pytest.mark.parametrize('unrewarded', [0, 64], ids=['kept-from-the-first-draw', 'kept-from-a-redraw'])
def test_sample_step_keeps_the_spread_groups_of_the_first_draw_that_has_one(base, unrewarded):
    # with unrewarded=64 no group of the first draw (8 tasks x 8) can have a reward spread, so tasks must be redrawn
    cfg, tasks, tok = arl.RLConfig(), arl.make_tasks('train'), tokenizer()
    kept, sampled = arl.sample_step(base, env_factory(cfg, unrewarded), tasks, tok, cfg, torch.Generator().manual_seed(0))
    # the same draws by hand: tasks from the generator, then their groups, until one draw has a spread group
    generator, envs, draws = torch.Generator().manual_seed(0), env_factory(cfg, unrewarded), []
    for _ in range(1 + cfg.max_redraws):
        picks = torch.randperm(len(tasks), generator=generator)[:cfg.tasks_per_step].tolist()
        draws.append(arl.sample_groups(base, envs, [tasks[i] for i in picks], tok, cfg, generator))
        if spread_groups(draws[-1], cfg.group_size):
            break
    seen = lambda trajs: [(t.task_id, t.ids, t.reward) for t in trajs]  # noqa: E731
    assert seen(sampled) == seen(draws[0])  # sampled is the first draw, unfiltered
    assert seen(kept) == seen(spread_groups(draws[-1], cfg.group_size)) and kept
    assert len(draws) == (1 if unrewarded == 0 else 2)  # both branches really ran
    stats = arl.behavior_stats(sampled)
    for key in ('reward', 'reads', 'invalid', 'turns', 'policy_tokens', 'submitted', 'truncated', 'zero_var'):
        assert key in stats
    assert stats['zero_var'] == 1 - len(spread_groups(sampled, cfg.group_size)) / 64


def test_empty_batch_collates():
    batch = arl.collate([], 0)
    assert batch['ids'].shape == (0, 1) and batch['action_mask'].shape == (0, 0)


@torch.inference_mode()
def one_token_per_call(model, envs, tasks, tok, temperature, generator):
    """A reference sampler: every episode reads or writes exactly one token per model call, in lockstep (finished
    episodes are fed padding). Written independently of rollout's reader; it defines the draws."""
    B, context = len(envs), model.cfg.context
    uniforms = torch.rand(B, generator=generator).tolist()
    queues = [tok.encode(env.reset(task, draw_offset(task, u))) for env, task, u in zip(envs, tasks, uniforms)]
    seqs, policy, calls = [[] for _ in range(B)], [[] for _ in range(B)], [[] for _ in range(B)]
    for b in range(B):  # the first token of every prompt
        seqs[b].append(queues[b].pop(0))
        policy[b].append(False)
    cache, playing, t = model.new_cache(B), set(range(B)), 0
    while playing:
        current = torch.tensor([seqs[b][t] if b in playing else tok.pad_id for b in range(B)])
        logits = model.logits(model.read(current[:, None], cache, t, None))[:, 0]  # [B, V]: scores for t + 1
        due = [b for b in range(B) if b in playing and not queues[b]]
        if due:
            logp = torch.log_softmax(logits[due] / temperature, dim=-1)
            picks = torch.multinomial(logp.exp(), 1, generator=generator)[:, 0].tolist()
        for b in sorted(playing):
            if queues[b]:
                seqs[b].append(queues[b].pop(0))
                policy[b].append(False)
            else:
                token = picks[due.index(b)]
                seqs[b].append(token)
                policy[b].append(True)
                calls[b].append(tok.words[token])
                if envs[b].call_is_complete(calls[b]):
                    answer, _ = envs[b].step(calls[b])
                    calls[b] = []
                    queues[b] = tok.encode(answer)
            if not queues[b] and envs[b].done:
                playing.discard(b)
            elif len(seqs[b]) >= context:
                envs[b].info['truncated'] = True
                playing.discard(b)
        t += 1
    return [(seq, pol, env.reward, env.info['truncated']) for seq, pol, env in zip(seqs, policy, envs)]


@pytest.mark.parametrize('model_kind, context, temperature', [('base', 256, 1.0), ('base', 60, 1.3),
                                                              ('untrained', 256, 1.0)])
def test_chunked_reading_draws_what_one_token_per_call_draws(base, model_kind, context, temperature):
    """Reading forced tokens in chunks must not change a single draw: the same tokens, the same truncations, the
    generator left in the same state."""
    torch.manual_seed(1)
    tok = tokenizer()
    model = base if model_kind == 'base' else arl.TinyAgent(base.cfg).eval()
    if context != model.cfg.context:
        short = arl.TinyAgent(dataclasses.replace(model.cfg, context=context)).eval()
        short.load_state_dict({k: (v[:context] if k == 'pos_emb.weight' else v) for k, v in model.state_dict().items()})
        model = short
    tasks = [task for task in arl.make_tasks('train')[:6] for _ in range(4)]
    cfg = arl.RLConfig()
    chunked_gen, reference_gen = torch.Generator().manual_seed(3), torch.Generator().manual_seed(3)
    chunked = arl.run_episodes(model, [arl.make_env(cfg) for _ in tasks], tasks, tok, temperature, chunked_gen)
    reference = one_token_per_call(model, [arl.make_env(cfg) for _ in tasks], tasks, tok, temperature, reference_gen)
    assert [(t.ids, t.policy, t.reward, t.info['truncated']) for t in chunked] == reference
    assert torch.equal(chunked_gen.get_state(), reference_gen.get_state())
    assert sum(t.n_policy_tokens for t in chunked) > len(tasks)  # the episodes really sampled
    assert (context < 256) == any(t.info['truncated'] for t in chunked)


@pytest.mark.parametrize('answer, truncated', [([3, 4, 5, 6], False), ([3, 4, 5, 6, 7], True)])
def test_a_last_answer_that_exactly_fills_the_context_ends_the_episode_untruncated(answer, truncated):
    from types import SimpleNamespace

    from agentrl.substrate.rollout import _Batch
    env = SimpleNamespace(done=False, info=dict(truncated=False))
    model = SimpleNamespace(cfg=SimpleNamespace(context=6), new_cache=lambda n: None)
    batch = _Batch(model, [env], None, [[1, 2]])
    env.done = True  # the call just written ended the episode; its answer is forced
    batch.force(0, answer)
    assert batch.seqs[0] == [1, 2, 3, 4, 5, 6] and env.info['truncated'] is truncated and not batch.playing


def test_a_one_layer_model_draws_what_one_token_per_call_draws():
    # one block, so one cache tensor: nothing may read a second block's cache
    tok, cfg = tokenizer(), arl.RLConfig()
    torch.manual_seed(2)
    model = arl.TinyAgent(arl.ModelConfig(vocab_size=len(tok.words), n_layer=1)).eval()
    tasks = [task for task in arl.make_tasks('train')[:2] for _ in range(4)]
    chunked_gen, reference_gen = torch.Generator().manual_seed(3), torch.Generator().manual_seed(3)
    chunked = arl.run_episodes(model, [arl.make_env(cfg) for _ in tasks], tasks, tok, 1.0, chunked_gen)
    reference = one_token_per_call(model, [arl.make_env(cfg) for _ in tasks], tasks, tok, 1.0, reference_gen)
    assert [(t.ids, t.policy, t.reward, t.info['truncated']) for t in chunked] == reference


@pytest.mark.parametrize('playing, rows_after', [
    ({0, 1, 2, 4, 5, 7}, 6),  # a quarter of the 8 rows finished: only the playing rows are kept
    ({0, 1, 2, 3, 4, 5, 7}, 8)])  # fewer finished: the cache is left as it is
def test_the_cache_keeps_only_the_playing_rows_once_a_quarter_of_its_rows_finished(playing, rows_after):
    from types import SimpleNamespace

    from agentrl.substrate.rollout import _Batch
    rows, heads, context = 8, 3, 6  # heads != rows, and one block: the rows are counted on the cache's axis 1
    cache = torch.arange(2 * rows * heads * context * 2, dtype=torch.float).reshape(2, rows, heads, context, 2)
    model = SimpleNamespace(cfg=SimpleNamespace(context=context), new_cache=lambda n: [cache.clone()])
    envs = [SimpleNamespace(done=False, info=dict(truncated=False)) for _ in range(rows)]
    batch = _Batch(model, envs, None, [[1, 2]] * rows)
    batch.playing, batch.fed = set(playing), [3, 2, 4, 1, 2, 3, 1, 2]
    batch.compact()
    [kept] = batch.cache
    assert kept.shape == (2, rows_after) + cache.shape[2:]
    longest = max(batch.fed[b] for b in playing)
    for b in playing:  # each playing episode's row holds what it held, at every position it has read
        assert torch.equal(kept[:, batch.slot[b], :, :longest], cache[:, b, :, :longest])
    slots = list(range(rows_after)) if rows_after < rows else sorted(playing)  # renumbered only when compacted
    assert [batch.slot[b] for b in sorted(playing)] == slots
