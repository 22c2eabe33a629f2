"""The real model's GRPO step, on a tiny randomly initialised Llama built from a transformers config (no file)."""
import copy

import pytest
import torch

from agentrl.ch10.regularizers import ReferenceKL, chapter_plugins
from agentrl.core.kl import kl_estimate
from agentrl.realrl.loop import ResetReference, train_real
from agentrl.realrl.policy import CausalLMPolicy
from agentrl.realrl.rollout import TaskRollout
from agentrl.realrl.tasks import make_tasks
from agentrl.substrate.grpo import RLConfig

VOCAB, END, OPEN = 12, 10, 11  # ids 0-9 are digits, 10 ends the reply, 11 opens and closes a prompt


class DigitCodec:
    """A prompt is its digits between two OPEN tokens; a reply is its digits."""
    end_id = pad_id = END

    def prompt(self, task):
        return torch.tensor([OPEN] + [int(c) for c in task.user if c.isdigit()] + [OPEN])

    def text(self, tokens, mask):
        return ''.join(str(int(t)) for t, m in zip(tokens, mask) if m and t < 10)

    def finished(self, task):
        return None  # a reply ends only at END or the length limit


def tiny_policy(rollout, seed=0):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=VOCAB, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=64)
    return CausalLMPolicy(LlamaForCausalLM(config), rollout.contexts).eval().requires_grad_(False)


def add1_rollout(reply_tokens):
    return TaskRollout(make_tasks('add1', 'train'), DigitCodec(), reply_tokens)


def config(**fields):
    return RLConfig(**dict(dict(seed=0, lr=1e-2, group_size=8, tasks_per_step=4, turn_cost=0.0, epochs=2), **fields))


SETTINGS = {
    'no regularisation': (dict(), dict()),
    'KL k3 in the loss': (dict(kl_coef=0.1, kl_kind='k3'), dict()),
    'KL in the reward': (dict(kl_coef=0.1), dict(kl_in_reward=True)),
    'entropy bonus': (dict(), dict(entropy_coef=0.01)),
    'clip-higher': (dict(clip_high=0.28), dict()),
    'Clip-Cov': (dict(), dict(policy_loss=dict(variant='clip_cov', fraction=0.2, bounds=(-10.0, 10.0)))),
    'KL-Cov': (dict(), dict(policy_loss=dict(variant='kl_cov', fraction=0.2))),
}


def run(setting, steps=2, reply_tokens=2, seed=0):
    fields, options = SETTINGS[setting]
    rollout = add1_rollout(reply_tokens)
    base = rollout.reference = tiny_policy(rollout)
    policy = copy.deepcopy(base).requires_grad_(True)
    cfg = config(seed=seed, **fields)
    history = train_real(policy, rollout, cfg, steps, chapter_plugins(cfg, **options))
    return history, policy, base


@pytest.mark.parametrize('setting', list(SETTINGS))
def test_every_setting_steps_with_finite_stats_and_moves_the_weights(setting):
    history, policy, base = run(setting)
    assert [r['step'] for r in history] == [0, 1]
    assert history[0]['kl_exact'] == pytest.approx(0, abs=1e-6)  # the policy starts as the reference
    for record in history:
        numbers = [v for v in record.values() if isinstance(v, float)]
        assert all(torch.isfinite(torch.tensor(numbers))), record
    moved = any(not torch.equal(a, b) for a, b in zip(policy.parameters(), base.parameters()))
    assert moved == any(r['signal'] or r['grad_norm'] for r in history)


def test_a_run_is_a_function_of_its_seed():
    first, policy_a, _ = run('KL k3 in the loss', steps=3)
    again, policy_b, _ = run('KL k3 in the loss', steps=3)
    other, _, _ = run('KL k3 in the loss', steps=3, seed=1)
    assert first == again
    assert all(torch.equal(a, b) for a, b in zip(policy_a.parameters(), policy_b.parameters()))
    assert first != other


def _enumerated_kl(policy, reference, group):
    """KL(policy || reference) at every reply position of a group, from full forward passes -> [G, L]."""
    ids = torch.cat([group.prompt.expand(len(group.tokens), -1), group.tokens], 1)
    P = len(group.prompt)
    with torch.no_grad():
        logp = torch.log_softmax(policy.lm(ids).logits[:, P - 1:-1].double(), -1)
        ref = torch.log_softmax(reference.lm(ids).logits[:, P - 1:-1].double(), -1)
    return (logp.exp() * (logp - ref)).sum(-1)


def _chosen_logp(policy, group):
    """The policy's log-prob of each drawn reply token of a group, from a full forward pass -> [G, L]."""
    ids = torch.cat([group.prompt.expand(len(group.tokens), -1), group.tokens], 1)
    with torch.no_grad():
        logp = torch.log_softmax(policy.lm(ids).logits[:, len(group.prompt) - 1:-1], -1)
    return logp.gather(-1, group.tokens[..., None])[..., 0]


def test_the_logged_kl_is_the_exact_kl_and_k3_its_estimate_on_the_drawn_tokens():
    rollout = add1_rollout(3)
    reference = rollout.reference = tiny_policy(rollout, 0)
    policy = tiny_policy(rollout, 1)  # another draw of weights: far from the reference
    groups = rollout.groups(policy, make_tasks('add1', 'train')[:2], 8, 1.0, torch.Generator().manual_seed(0))
    stats = rollout.stats(groups)
    mask = torch.cat([g.mask for g in groups])
    exact = torch.cat([_enumerated_kl(policy, reference, g) for g in groups])
    assert stats['kl_exact'] == pytest.approx(((exact * mask).sum() / mask.sum()).item(), rel=1e-4)
    assert stats['kl_exact'] > 1e-3  # not the trivial zero of two equal policies
    logp = torch.cat([g.chosen_logp() for g in groups])
    ref = torch.cat([_chosen_logp(reference, g) for g in groups])
    k3 = kl_estimate(logp, ref, 'k3')
    assert stats['kl_k3'] == pytest.approx(((k3 * mask).sum() / mask.sum()).item(), rel=1e-4)


def test_the_batch_marks_exactly_the_reply_tokens_with_their_sampling_log_probs():
    rollout = add1_rollout(4)
    policy = tiny_policy(rollout)
    groups = rollout.groups(policy, make_tasks('add1', 'train')[:3], 8, 1.0, torch.Generator().manual_seed(2))
    batch = rollout.collate(groups)
    with torch.no_grad():
        logp = torch.log_softmax(policy(batch['ids'])[:, :-1], -1).gather(-1, batch['ids'][:, 1:, None])[..., 0]
    mask = batch['action_mask']
    assert torch.allclose(batch['sample_logp'], logp * mask, atol=1e-5)
    assert torch.equal(batch['sample_logp'].bool(), mask.bool())  # every reply token, and nothing else, is scored
    rows = [(g, i) for g in groups for i in range(len(g.tokens))]
    for b, (g, i) in enumerate(rows):
        assert torch.equal(rollout.contexts[-1 - batch['ids'][b, 0]], g.prompt)  # the key names the row's prompt
        assert mask[b].sum() == g.mask[i].sum()
        assert torch.equal(batch['ids'][b, 1:][mask[b].bool()], g.tokens[i][g.mask[i].bool()])
    assert batch['rewards'].tolist() == [r for g in groups for r in g.rewards]


def test_flat_groups_are_dropped_and_a_step_with_none_left_changes_nothing():
    rollout = add1_rollout(2)
    policy = tiny_policy(rollout)
    kept, sampled = rollout.sample_step(policy, config(max_redraws=0), torch.Generator().manual_seed(0))
    assert kept == [g for g in sampled if not g.flat]
    wrong = [t.__class__(**{**t.__dict__, 'answer': -1}) for t in make_tasks('add1', 'train')]  # no reply is right
    never = TaskRollout(wrong, DigitCodec(), 2)
    before = copy.deepcopy(policy).requires_grad_(True)
    trained = copy.deepcopy(before)
    history = train_real(trained, never, config(max_redraws=1), 2)
    assert [r['signal'] for r in history] == [0.0, 0.0]
    assert all(torch.equal(a, b) for a, b in zip(trained.parameters(), before.parameters()))


def test_resetting_the_reference_makes_the_current_policy_the_anchor():
    rollout = add1_rollout(2)
    base = tiny_policy(rollout)
    policy = copy.deepcopy(base).requires_grad_(True)
    cfg = config(kl_coef=0.1, kl_kind='k3')
    kl_term = ReferenceKL(None, cfg.kl_coef, cfg.kl_kind, estimator=kl_estimate)
    history = train_real(policy, rollout, cfg, 3, [kl_term, ResetReference(kl_term, 2)])
    assert [r.get('reference_reset', False) for r in history] == [False, True, False]
    # the anchor is the policy as it stood after step 1, not the base and not the final policy
    assert any(not torch.equal(a, b) for a, b in zip(kl_term.reference.parameters(), base.parameters()))
    assert any(not torch.equal(a, b) for a, b in zip(kl_term.reference.parameters(), policy.parameters()))


@pytest.mark.slow
def test_one_step_of_smollm2_on_code_tasks_logs_finite_numbers_and_moves_the_weights():
    from agentrl.pretrained.loader import load_smollm2, trainable_copy
    from agentrl.realrl.policy import ChatCodec
    from agentrl.substrate.sandbox import Sandbox

    pretrained = load_smollm2()
    cfg = RLConfig(seed=0, lr=1e-5, group_size=4, tasks_per_step=2, turn_cost=0.0, epochs=1, minibatches=2,
                   kl_coef=0.1, kl_kind='k3', max_redraws=1)
    sandbox = Sandbox()
    try:
        rollout = TaskRollout(make_tasks('code-mixed', 'train'), ChatCodec(pretrained.tokenizer), 32, sandbox)
        base = rollout.reference = CausalLMPolicy(pretrained.model, rollout.contexts)
        policy = CausalLMPolicy(trainable_copy(pretrained.model), rollout.contexts)
        history = train_real(policy, rollout, cfg, 1, chapter_plugins(cfg))
    finally:
        sandbox.close()
    record = history[0]
    assert record['kl_exact'] == pytest.approx(0, abs=1e-5) and record['kl_k3'] == pytest.approx(0, abs=1e-5)
    assert 0 < record['entropy_sampled'] < 11 and 0 <= record['reward'] <= 1 and 0 <= record['format'] <= 1
    numbers = [v for v in record.values() if isinstance(v, float)]
    assert all(torch.isfinite(torch.tensor(numbers)))
    # the KL term acts even on a step without a reward spread, so the update always steps
    assert any(not torch.equal(a, b) for a, b in zip(policy.parameters(), base.parameters()))
