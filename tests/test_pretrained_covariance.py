"""Section 10.6's first-order entropy rule on SmolLM2 (agentrl.pretrained.covariance): the exact quantities on small
softmaxes against autograd and enumeration, the renderers on hand-made records, and a cheap run on the real model."""
import math

import pytest
import torch

from agentrl.pretrained import covariance as cv


def _z(seed, v=7, scale=2.0):
    return torch.randn(v, generator=torch.Generator().manual_seed(seed), dtype=torch.float64) * scale


def test_entropy_gradient_matches_autograd():
    z = _z(0).requires_grad_(True)
    h = cv.entropy64(z)
    (grad,) = torch.autograd.grad(h, z)
    assert torch.allclose(cv.entropy_gradient(z.detach()), grad, rtol=1e-12, atol=1e-14)


def test_entropy_matches_enumeration():
    z = _z(1)
    p = [math.exp(v) for v in z.tolist()]
    p = [x / sum(p) for x in p]
    assert cv.entropy64(z).item() == pytest.approx(-sum(x * math.log(x) for x in p), rel=1e-13)


def test_predicted_change_is_the_gradient_dotted_with_dz_and_minus_the_covariance():
    z, dz = _z(2), _z(3, scale=1e-3)
    p = torch.softmax(z, -1)
    logp = torch.log_softmax(z, -1)
    cov = (p * logp * dz).sum() - (p * logp).sum() * (p * dz).sum()  # E[XY] - E[X]E[Y], enumerated
    predicted = cv.predicted_entropy_change(z, dz)
    assert predicted.item() == pytest.approx(-cov.item(), rel=1e-10)
    assert predicted.item() == pytest.approx((cv.entropy_gradient(z) * dz).sum().item(), rel=1e-10)
    # first order: the exact change agrees up to O(|dz|^2)
    assert (cv.entropy64(z + dz) - cv.entropy64(z)).item() == pytest.approx(predicted.item(), rel=1e-2)


def test_the_books_toy_table():
    z = torch.tensor([3, 1.5, 1, .5, 0, -.5, -1, -2.])
    book = {(0, 1.0): (-0.01035, -0.01038), (0, -1.0): (0.01035, 0.01032),
            (7, 1.0): (0.01511, 0.01512), (7, -1.0): (-0.01511, -0.01510)}
    for (token, adv), (predicted, actual) in book.items():
        dz = cv.idealised_change(z, token, adv, 0.05)
        assert round(cv.predicted_entropy_change(z, dz).item(), 5) == predicted
        assert round((cv.entropy64(z + dz) - cv.entropy64(z)).item(), 5) == actual


def test_a_constant_shift_changes_nothing():
    z, dz = _z(4), _z(5, scale=0.1)
    assert cv.predicted_entropy_change(z, dz + 3.0).item() == pytest.approx(cv.predicted_entropy_change(z, dz).item(),
                                                                            abs=1e-14)
    assert cv.cosine(dz + 5.0, dz) == pytest.approx(1.0)
    assert cv.weighted_cosine(z, dz + 5.0, dz) == pytest.approx(1.0)


def test_cosines_and_shares_on_hand_made_vectors():
    a = torch.tensor([1.0, -1.0, 0.0, 0.0])
    b = torch.tensor([0.0, 0.0, 1.0, -1.0])
    assert cv.cosine(a, b) == pytest.approx(0.0)
    assert cv.cosine(a, -a) == pytest.approx(-1.0)
    assert cv.share_on_token(a, 0) == pytest.approx(0.5)  # mean 0: squared norm 2, token 0 holds 1
    z = torch.tensor([10.0, 10.0, -10.0, -10.0])  # pi on the first two only: b lives where pi is ~0
    assert abs(cv.weighted_cosine(z, a, a + b)) == pytest.approx(1.0, abs=1e-6)


def test_pick_positions():
    probs = torch.tensor([[0.95, 0.55, 0.3], [0.7, 0.001, 0.6], [0.0001, 0.9, 0.9]])
    mask = torch.tensor([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0], [0.0, 0.0, 0.0]])  # masked: past the end, never chosen
    assert cv.pick_positions(probs, mask) == ((0, 1), (1, 1))
    with pytest.raises(ValueError, match='no sampled token has pi >= 0.99'):
        cv.pick_positions(probs, mask, likely_at_least=0.99)
    with pytest.raises(ValueError, match='same|equal'):
        cv.pick_positions(probs, mask[:, :2])
    with pytest.raises(ValueError, match='no sampled token'):
        cv.pick_positions(probs, torch.zeros_like(mask))


def _record(kind, adv, predicted, actual, **extra):
    fields = dict(label=cv.label(kind, adv), kind=kind, advantage=adv, token=5, token_text='x', prob=0.6,
                  entropy=1.1, lr=1e-5, predicted=predicted, actual=actual, ideal_predicted=predicted * 1e-4,
                  ideal_actual=actual * 1e-4, cosine=0.03, cosine_pi=0.5, gain=9000.0, token_logit_change=0.03,
                  share_on_token=0.0008, ideal_share=0.7, max_abs_change=0.05, moved_tokens=1200)
    fields.update(extra)
    return cv.CaseRecord(**fields)


def _run(cases):
    return cv.CovarianceRun(cases, cv.PROMPT, 0, 4, 48, {}, {}, [c.predicted for c in cases], 1.0)


def test_the_table_and_sentences_from_hand_made_records():
    run = _run([_record('likely', 1.0, -0.0200, -0.0202), _record('likely', -1.0, 0.0200, 0.0196),
                _record('rare', 1.0, 0.0100, 0.0104), _record('rare', -1.0, -0.0100, -0.0098)])
    lines = cv.table_lines(run)
    assert lines[1].startswith('likely, A > 0  | predicted dH -0.02000 | actual dH -0.02020 | error  1.0%')
    assert 'gain 9000' in lines[1] and 'cos +0.030' in lines[1] and 'lr 1e-05' in lines[0]
    text = ' '.join(cv.sentences(run))
    assert 'within 3.8% of the actual entropy change in each case (worst: rare, A > 0)' in text
    assert 'signs follow the covariance rule in all four cases' in text
    assert 'likely, A > 0 lowers the entropy' in text and 'rare, A > 0 raises the entropy' in text
    assert 'is not the idealised eta A (e_a - pi)' in text
    assert 'cosine between the two is +0.030' in text and '1,200 other tokens' in text
    assert 'eta ~ 0.09' in text


def test_the_sentences_say_when_the_step_is_too_large_or_a_sign_flips():
    run = _run([_record('likely', 1.0, -0.0200, -0.0300), _record('likely', -1.0, 0.0200, -0.0010),
                _record('rare', 1.0, 0.0100, 0.0104), _record('rare', -1.0, -0.0100, -0.0098)])
    text = ' '.join(cv.sentences(run))
    assert 'more than 5% in 2 of 4 cases (likely, A > 0, likely, A < 0' in text
    assert 'likely, A < 0 goes the other way' in text


def test_bad_inputs():
    with pytest.raises(ValueError, match='lr must be a positive'):
        cv.run_cases(None, lr=0.0)
    with pytest.raises(ValueError, match='no cases'):
        cv.sentences(_run([]))


@pytest.mark.slow
def test_on_the_real_model_float32_vs_float64_and_a_small_run(smollm2):
    run = cv.run_cases(smollm2, seed=0, n_samples=2, length=24)
    assert [c.label for c in run.cases] == ['likely, A > 0', 'likely, A < 0', 'rare, A > 0', 'rare, A < 0']
    likely, rare = run.cases[0], run.cases[2]
    assert likely.prob >= cv.LIKELY_AT_LEAST and rare.prob < likely.prob
    for case, f32 in zip(run.cases, run.float32_predicted):
        # the first-order rule holds at lr 1e-5 and the step is a real one (not a no-op)
        assert abs(case.actual) > 1e-4
        assert case.relative_error < 0.1
        assert (case.predicted > 0) == (case.actual > 0)
        # float32 agrees with float64 to a small fraction of the change it predicts
        assert f32 == pytest.approx(case.predicted, rel=1e-2)
    # the same step with the opposite advantage moves the logits the opposite way
    assert run.cases[0].token_logit_change * run.cases[1].token_logit_change < 0
    assert len(cv.table_lines(run)) == 5 and len(cv.sentences(run)) == 4


@pytest.mark.slow
def test_restore_puts_back_every_parameter_bit_for_bit(smollm2):
    from agentrl.pretrained.loader import trainable_copy
    from agentrl.pretrained.sampling import chat_ids

    copy = trainable_copy(smollm2.model)
    ids = chat_ids(smollm2.tokenizer, cv.PROMPT)[:20]
    z, z_after = cv.one_step_change(copy, ids, 42, 1.0, 1e-5)
    assert not torch.equal(z, z_after)
    cv.restore(copy, smollm2.model)
    assert all(torch.equal(a, b) for a, b in zip(copy.parameters(), smollm2.model.parameters()))
    with torch.no_grad():
        assert torch.equal(cv.last_logits(copy, ids), z)


@pytest.mark.slow
def test_entropy_in_float32_and_float64_on_real_logits(smollm2):
    from agentrl.core.logprobs import entropy_from_logits
    from agentrl.pretrained.sampling import chat_ids

    with torch.no_grad():
        z = cv.last_logits(smollm2.model, chat_ids(smollm2.tokenizer, cv.PROMPT))  # [V]
    assert entropy_from_logits(z).item() == pytest.approx(cv.entropy64(z).item(), rel=1e-4, abs=1e-5)
    dz = torch.randn(z.shape, generator=torch.Generator().manual_seed(0)) * 1e-3
    assert cv.predicted_float32(z, dz).item() == pytest.approx(cv.predicted_entropy_change(z, dz).item(), rel=1e-3,
                                                               abs=1e-7)
