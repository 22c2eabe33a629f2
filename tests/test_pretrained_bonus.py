"""The entropy bonus on SmolLM2's vocabulary (agentrl.pretrained.bonus): the reward, the sets and masses on hand-made
distributions, the losses' gradients against the formulas, the tie rules, the renderers on hand-made records, and a
tiny run on the real model."""
import math

import pytest
import torch

from agentrl.pretrained import bonus as b

P = torch.tensor([0.5, 0.25, 0.15, 0.06, 0.04])  # a hand-made distribution, sorted already
LOGP = P.log()


def test_parses_needs_a_closed_block_that_parses():
    assert b.parses('Here:\n```python\ndef f(x):\n    return sum(x)\n```\nDone.') == 1.0
    assert b.parses('```\nx = 1\n```') == 1.0  # a bare fence counts
    assert b.parses('```python\ndef f(x):\n    return sum(x)\n') == 0.0  # cut off: not closed
    assert b.parses('```python\ndef f(x)\n    return x\n```') == 0.0  # a syntax error
    assert b.parses('def f(x):\n    return x') == 0.0  # no block
    assert b.parses('```python\n\n```') == 0.0  # empty
    assert b.parses('```python\nx = (\n```\n```python\ny = 1\n```') == 0.0  # the first block decides


def test_group_advantages():
    adv = b.group_advantages([1.0, 0.0, 1.0, 0.0])
    s = math.sqrt(1 / 3)  # the sample standard deviation of 1, 0, 1, 0
    assert adv.tolist() == pytest.approx([0.5 / s, -0.5 / s] * 2, rel=1e-5)
    assert b.group_advantages([1.0, 1.0, 1.0]).tolist() == [0.0, 0.0, 0.0]
    with pytest.raises(ValueError, match='one group of at least 2'):
        b.group_advantages([1.0])


def test_sets_on_a_hand_made_distribution():
    assert b.top_k_set(LOGP, 2).tolist() == [True, True, False, False, False]
    # mass before each token: 0, .5, .75, .9, .96 -> a token is in while the mass above it is below p
    assert b.nucleus_set(LOGP, 0.89).tolist() == [True, True, True, False, False]
    assert b.nucleus_set(LOGP, 0.91).tolist() == [True, True, True, True, False]
    assert b.nucleus_set(LOGP, 0.49).tolist() == [True, False, False, False, False]
    assert b.nucleus_set(LOGP, 0.51).tolist() == [True, True, False, False, False]
    assert b.nucleus_set(LOGP, 1.0).all()
    shuffled = torch.tensor([3, 0, 4, 1, 2])
    assert b.nucleus_set(LOGP[shuffled], 0.89).tolist() == b.nucleus_set(LOGP, 0.89)[shuffled].tolist()
    with pytest.raises(ValueError, match=r'p must be in \(0, 1\]'):
        b.nucleus_set(LOGP, 0.0)
    with pytest.raises(ValueError, match='k must be between 1 and the vocabulary size 5'):
        b.top_k_set(LOGP, 6)


def test_masses_entropies_and_kl_on_a_hand_made_distribution():
    keep = torch.tensor([True, True, True, False, False])
    assert b.mass_outside(LOGP, keep).item() == pytest.approx(0.10, rel=1e-6)
    q = P[:3] / P[:3].sum()
    assert b.restricted_entropy(LOGP, keep).item() == pytest.approx(-(q * q.log()).sum().item(), rel=1e-6)
    ref = torch.tensor([0.2] * 5).log()
    assert b.exact_kl(LOGP, ref).item() == pytest.approx(sum(p * math.log(p / 0.2) for p in P.tolist()), rel=1e-6)
    assert b.exact_kl(LOGP, LOGP).item() == 0.0
    h = -(P * LOGP).sum().item()  # -H = -1.2753: the tokens with log p below it are those with p < 0.279
    assert h == pytest.approx(1.2753, abs=1e-4)
    assert b.raised_by_bonus(LOGP).item() == 4
    seen = b.emitted_set(torch.tensor([[0, 2, 4]]), torch.tensor([[1.0, 1.0, 0.0]]), 5)
    assert seen.tolist() == [True, False, True, False, False]  # the 4 sits past the end of turn
    with pytest.raises(ValueError, match='must be equal'):
        b.mass_outside(LOGP, keep[:3])


def test_the_bonus_gradient_raises_exactly_the_tokens_below_minus_h():
    z = torch.randn(40, generator=torch.Generator().manual_seed(0), dtype=torch.float64).mul(3).requires_grad_(True)
    logp = torch.log_softmax(z, -1)
    loss = -0.1 * b.entropy_from_logits(logp)
    (grad,) = torch.autograd.grad(loss, z)
    p, h = logp.detach().exp(), -(logp.detach().exp() * logp.detach()).sum()
    assert torch.allclose(grad, 0.1 * p * (logp.detach() + h))  # the chapter's formula
    assert ((-grad) > 0).sum().item() == b.raised_by_bonus(logp.detach()).item()  # descent raises those tokens


def _batch(seed=0, n=3, t=4, v=6):
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(n, t, v, generator=g, dtype=torch.float64)
    ref = torch.log_softmax(torch.randn(n, t, v, generator=g, dtype=torch.float64), -1)
    tokens = torch.randint(v, (n, t), generator=g)
    mask = torch.ones(n, t)
    mask[0, -1] = 0.0
    return logits, ref, tokens, mask


def test_variant_losses_are_their_formulas():
    logits, ref, tokens, mask = _batch()
    logp = torch.log_softmax(logits, -1)
    adv = torch.tensor([1.0, -0.5, 0.0], dtype=torch.float64)
    nucleus = b.nucleus_set(ref, 0.9)
    keep = mask > 0
    ent = -(logp.exp() * logp).sum(-1)
    kl = (logp.exp() * (logp - ref)).sum(-1)
    q = torch.log_softmax(logp.masked_fill(~nucleus, float('-inf')), -1)
    h_s = -(q.exp() * q.masked_fill(~nucleus, 0.0)).sum(-1)
    ratio = torch.exp(logp.gather(-1, tokens[..., None])[..., 0] - ref.gather(-1, tokens[..., None])[..., 0])
    surrogate = torch.minimum(ratio * adv[:, None], ratio.clamp(0.8, 1.2) * adv[:, None])
    want = {'bonus': -0.1 * ent[keep].mean(), 'reward': -surrogate[keep].mean(),
            'reward + bonus': -surrogate[keep].mean() - 0.1 * ent[keep].mean(),
            'reward + KL': -surrogate[keep].mean() + 0.1 * kl[keep].mean(),
            'reward + nucleus': -surrogate[keep].mean() - 0.1 * h_s[keep].mean()}
    for name, value in want.items():
        got = b.variant_loss(name, logp, tokens, mask, ref, adv, nucleus, 0.1)
        assert got.item() == pytest.approx(value.item(), rel=1e-9), name
    with pytest.raises(ValueError, match="unknown variant 'entropy'"):
        b.variant_loss('entropy', logp, tokens, mask, ref, adv, nucleus, 0.1)


def test_the_kl_penalty_has_no_gradient_at_the_reference_and_the_nucleus_bonus_none_outside_the_set():
    logits, ref, tokens, mask = _batch(1)
    z = ref.clone().requires_grad_(True)  # the policy is the reference
    adv = torch.zeros(3, dtype=torch.float64)
    nucleus = b.nucleus_set(ref, 0.5)
    (g_kl,) = torch.autograd.grad(b.variant_loss('reward + KL', torch.log_softmax(z, -1), tokens, mask, ref, adv,
                                                 nucleus, 1.0), z)
    assert g_kl.abs().max().item() < 1e-12
    (g_n,) = torch.autograd.grad(b.variant_loss('reward + nucleus', torch.log_softmax(z, -1), tokens, mask, ref, adv,
                                                nucleus, 1.0), z)
    assert g_n[~nucleus].abs().max().item() < 1e-12  # no push on tokens outside the reference's nucleus
    (g_b,) = torch.autograd.grad(b.variant_loss('bonus', torch.log_softmax(z, -1), tokens, mask, ref, adv,
                                                nucleus, 1.0), z)
    assert g_b[~nucleus].abs().max().item() > 1e-3  # the full bonus pushes them


def test_tie_rules():
    assert not b.rates_differ(3, 8, 5, 8)  # 2/8 apart: within 2 binomial standard errors
    assert not b.rates_differ(0, 8, 3, 8)
    assert b.rates_differ(0, 16, 8, 16)
    assert not b.rates_differ(4, 8, 4, 8)
    assert not b.rates_differ(0, 8, 0, 8)
    with pytest.raises(ValueError, match='0 <= k <= n'):
        b.rates_differ(9, 8, 1, 8)
    assert b.paired_compare([1.0, 1.1, 0.9, 1.0], [0.0, 0.1, -0.1, 0.0]) == 'higher'
    assert b.paired_compare([0.0, 0.1, -0.1, 0.0], [1.0, 1.1, 0.9, 1.0]) == 'lower'
    assert b.paired_compare([0.1, -0.1, 0.2, -0.2], [0.0, 0.0, 0.0, 0.0]) == 'tied'
    with pytest.raises(ValueError, match='at least 2'):
        b.paired_compare([1.0], [0.0])


def _record(name, shift, parsed, losses=()):
    base = {'outside_top_k': [0.01, 0.02, 0.016, 0.012], 'outside_nucleus': [0.05, 0.04, 0.06, 0.05],
            'never_emitted': [0.07, 0.08, 0.075, 0.07], 'entropy': [0.8, 0.7, 0.9, 0.8], 'kl': [0.0, 0.0, 0.0, 0.0]}
    per = {m: [x + shift.get(m, 0.0) + 0.001 * i for i, x in enumerate(v)] for m, v in base.items()}
    return b.VariantRecord(name, per, [f'{name} says\nhi'] * len(parsed), parsed, list(losses))


def _run():
    ref = _record('reference', {'outside_top_k': 0, 'kl': -0.0}, [1.0, 0.0, 1.0, 0.0])
    ref.per_position['kl'] = [0.0] * 4
    variants = [_record('bonus', {'outside_top_k': 0.06, 'never_emitted': 0.12, 'entropy': 1.0, 'kl': 0.5},
                        [0.0] * 4, [-0.1, -0.2]),
                _record('reward', {'kl': 0.02}, [1.0, 1.0, 1.0, 0.0], [0.0, -0.05]),
                _record('reward + bonus', {'outside_top_k': 0.005, 'never_emitted': 0.015, 'entropy': 0.15,
                                           'kl': 0.03}, [1.0, 1.0, 1.0, 1.0], [-0.1, -0.15]),
                _record('reward + KL', {'kl': 0.019}, [1.0, 1.0, 0.0, 0.0], [0.0, -0.04]),
                _record('reward + nucleus', {'entropy': 0.04, 'kl': 0.02}, [1.0, 1.0, 1.0, 0.0], [-0.07, -0.1])]
    return b.BonusRun(ref, variants, 0.1, 2e-5, 2, 50, 0.9, b.PROMPT, 4, 48, 0, 1, [1.0, 0.0, 1.0, 1.0], 192, 4,
                      49152, {'entropy': 0.436, 'raised': 49151, 'top_k_mass': 0.9992, 'nucleus_size': 1}, {})


def test_the_table_from_hand_made_records():
    lines = b.table_lines(_run())
    assert lines[0].startswith('Adam lr 2e-05, 2 steps on one batch of 4 replies x 48 tokens (3/4 parse), alpha 0.1')
    assert 'outside the 192 tokens the reference emitted in its 8 replies' in lines[0]
    assert lines[1].split(' | ') == ['model           ', 'outside top-50', 'outside top-p 0.9', 'never emitted',
                                     'entropy', 'KL to ref', 'parses']
    assert lines[2].split(' | ')[1].strip() == '0.0160' and lines[2].endswith('2/4')
    assert lines[3].startswith('bonus            |         0.0760') and lines[3].endswith('0/4')
    shown = b.example_markdown(_run())
    assert shown.startswith('**reference** (') and '~~~text\nreference says\nhi\n~~~' in shown
    assert shown.count('~~~text') == 1 + len(_run().variants)


def test_the_sentences_from_hand_made_records():
    text = ' '.join(b.sentences(_run()))
    assert "the reference's entropy is 0.436 nats, its top 50 tokens hold 99.92%" in text
    assert 'pushes up 49,151 of the 49,152 tokens' in text
    assert 'bonus alone move probability into the tail: outside the reference\'s top 50 from 1.60% to 7.60% ' \
           '(higher by 6.00 pp)' in text
    assert 'KL to the reference reaches 0.501' in text
    assert 'leaves 2.10% outside the top 50 against 1.60% for the reward alone (higher by 0.50 pp)' in text
    assert 'KL 0.0205 against 0.0215 for the reward alone (lower by 0.001 nats)' in text
    assert "its first step is the reward's own" in text
    assert 'entropy 0.842 against 0.801 for the reward alone (higher by 0.040 nats)' in text
    assert '(reference 5.15%, tied, +0.00 pp)' in text
    assert 'No variant differs from the reference' in text and 'bonus 0/4' in text
    run = _run()
    run.variant('reward + KL').losses[0] = 0.5  # a KL step that differs from the start: no such remark
    assert "reward's own" not in ' '.join(b.sentences(run))
    run.variant('bonus').per_position['outside_top_k'] = [0.0] * 4
    assert 'bonus alone do not move probability into the tail' in ' '.join(b.sentences(run))


def test_a_clear_parse_gap_is_called_one():
    run = _run()
    run.reference.parsed = [1.0] * 16
    for v in run.variants:
        v.parsed = [1.0] * 16
    run.variant('bonus').parsed = [0.0] * 16
    text = ' '.join(b.sentences(run))
    assert 'only bonus differs by more than 2 binomial standard errors' in text


def test_bad_inputs():
    with pytest.raises(ValueError, match='need alpha >= 0, lr > 0'):
        b.run_variants(None, lr=0.0)
    with pytest.raises(ValueError, match='group >= 2'):
        b.run_variants(None, group=1)
    with pytest.raises(ValueError, match=r"unknown variants \['entropy'\]"):
        b.run_variants(None, variants=('entropy',))
    with pytest.raises(ValueError, match="no variant 'x'"):
        _run().variant('x')


@pytest.mark.slow
def test_a_tiny_run_on_the_real_model(smollm2):
    run = b.run_variants(smollm2, steps=1, group=2, length=8, n_eval=2, variants=('bonus', 'reward + KL'))
    assert [v.name for v in run.variants] == ['bonus', 'reward + KL']
    ref, bonus = run.reference, run.variant('bonus')
    assert len(ref.per_position['entropy']) == run.n_positions > 0
    assert max(ref.per_position['kl']) == 0.0
    assert bonus.mean('entropy') > ref.mean('entropy')  # one step of the bonus alone raises the entropy
    assert bonus.mean('kl') > 0
    assert 0 <= run.typical['raised'] < run.vocab_size == 49152
    assert len(b.table_lines(run)) == 5 and b.sentences(run)


@pytest.mark.slow
def test_masses_and_entropy_in_float32_against_float64_on_real_logits(smollm2):
    from agentrl.pretrained.sampling import chat_ids

    ids = chat_ids(smollm2.tokenizer, b.PROMPT)
    with torch.no_grad():
        logp = b._forward_logp(smollm2.model, ids[:-3], ids[None, -3:])  # [1, 3, V] float32
    top, nucleus = b.top_k_set(logp, 50), b.nucleus_set(logp, 0.9)
    for keep in (top, nucleus):
        f32 = torch.where(keep, 0.0, logp.exp()).sum(-1)
        assert torch.allclose(f32.double(), b.mass_outside(logp, keep), rtol=1e-3, atol=1e-6)
    assert torch.allclose(b.entropy_from_logits(logp).double(), b.entropy_from_logits(logp.double()), rtol=1e-4,
                          atol=1e-5)
    assert torch.equal(b.raised_by_bonus(logp), b.raised_by_bonus(logp.double()))
