"""Shared-prefix forward passes and batched reply sampling against plain forward passes, on a tiny random Llama."""
import pytest
import torch

from agentrl.realrl.prefix import common_length, shared_forward
from agentrl.realrl.sampling import sample_replies

END = 11


def tiny_lm(seed=0, layers=2):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=12, hidden_size=16, intermediate_size=32, num_hidden_layers=layers,
                         num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=64)
    return LlamaForCausalLM(config).double()


def batch_like_grpo(generator, reply=5):
    """12 rows: a common start, 3 prompts, 4 replies each, shuffled as a minibatch is."""
    common = torch.randint(0, END, (6,), generator=generator)
    rows = [torch.cat([common, prompt, torch.randint(0, 12, (reply,), generator=generator)])
            for prompt in (torch.randint(0, END, (n,), generator=generator) for n in (3, 3, 3)) for _ in range(4)]
    return torch.stack(rows)[torch.randperm(12, generator=generator)]


def test_common_length_counts_the_leading_columns_every_row_shares():
    assert common_length(torch.tensor([[1, 2, 3], [1, 2, 4]])) == 2
    assert common_length(torch.tensor([[1, 2], [1, 2]])) == 2
    assert common_length(torch.tensor([[5, 2], [1, 2]])) == 0


@pytest.mark.parametrize('splits', [0, 1, 3])
def test_the_shared_forward_gives_the_plain_logits_and_gradients(splits):
    lm = tiny_lm()
    ids = batch_like_grpo(torch.Generator().manual_seed(1))
    plain, shared = lm(ids).logits, shared_forward(lm, ids, splits=splits)
    assert torch.allclose(plain, shared, atol=1e-12)
    weights = torch.randn_like(plain, generator=None)
    expected = torch.autograd.grad((plain * weights).sum(), list(lm.parameters()))
    found = torch.autograd.grad((shared * weights).sum(), list(lm.parameters()))
    for a, b in zip(expected, found):
        # transformers' attention takes its softmax in float32 even in a float64 model: float32's rounding is the floor
        assert torch.allclose(a, b, rtol=1e-5, atol=1e-6 * a.abs().max())


def test_the_batched_sampler_keeps_each_rows_own_positions_and_distribution():
    lm = tiny_lm()
    common = torch.tensor([1, 2, 3, 4])
    prompts = [torch.cat([common, torch.tensor(tail)]) for tail in ([5, 6], [7, 8, 9, 10, 5], [9, 9, 9])]
    drawn = sample_replies(lm, prompts, 3, 6, torch.Generator().manual_seed(0), end_id=END, keep_logp=True)
    for samples, prompt in zip(drawn, prompts):
        assert torch.equal(samples.prompt, prompt) and samples.tokens.shape == (3, 6)
        for row in range(3):
            ids = torch.cat([prompt, samples.tokens[row]])[None]
            with torch.no_grad():
                logp = torch.log_softmax(lm(ids).logits[0, len(prompt) - 1:-1].float(), -1)  # [6, V]
            on = samples.mask[row].bool()
            assert torch.allclose(logp[on], samples.logp[row][on], atol=1e-6)
            ended = (samples.tokens[row] == END).nonzero()
            if len(ended):  # the end of turn is the last position the mask keeps
                assert int(samples.mask[row].sum()) == int(ended[0]) + 1


def test_the_batched_sampler_follows_its_generator_and_refuses_nonsense():
    lm = tiny_lm()
    prompts = [torch.tensor([1, 2, 3]), torch.tensor([1, 2, 4])]
    first = sample_replies(lm, prompts, 4, 5, torch.Generator().manual_seed(3), end_id=END)
    again = sample_replies(lm, prompts, 4, 5, torch.Generator().manual_seed(3), end_id=END)
    assert all(torch.equal(a.tokens, b.tokens) for a, b in zip(first, again))
    with pytest.raises(ValueError, match='temperature must be > 0'):
        sample_replies(lm, prompts, 4, 5, torch.Generator(), temperature=0)
    with pytest.raises(ValueError, match='per_prompt >= 1'):
        sample_replies(lm, prompts, 0, 5, torch.Generator())


def test_a_stop_test_ends_a_row_after_the_token_that_met_it():
    lm = tiny_lm()
    prompts = [torch.tensor([1, 2, 3]), torch.tensor([1, 2, 4, 4])]
    drawn = sample_replies(lm, prompts, 6, 8, torch.Generator().manual_seed(5), end_id=END,
                           finished=lambda g, tokens: g == 0 and int(tokens[-1]) == 5)
    stops = 0
    for g, samples in enumerate(drawn):
        for tokens, mask in zip(samples.tokens, samples.mask):
            kept = tokens[:int(mask.sum())].tolist()
            ended = kept[-1] == END or len(kept) == 8
            if g == 0:  # a 5 ends the row at once, so it can only be the last token kept
                assert 5 not in kept[:-1] and (kept[-1] == 5 or ended)
                stops += kept[-1] == 5
            else:  # the stop test is not theirs: only the end of turn or the length ends them
                assert ended and END not in kept[:-1]
    assert stops  # the test saw the rule act


def test_with_widths_each_row_gets_its_read_columns_and_zeros_after():
    lm = tiny_lm()
    ids = batch_like_grpo(torch.Generator().manual_seed(2), reply=30)  # [12, 39]
    widths = torch.tensor([39, 3, 10, 9, 1, 12, 30, 5, 7, 39, 2, 20])  # columns each row's reader needs
    plain = lm(ids).logits
    for splits in (0, 1):
        shared = shared_forward(lm, ids, splits=splits, widths=widths)
        skipped = 0
        for row, width in enumerate(widths.tolist()):
            assert torch.allclose(shared[row, :width], plain[row, :width], atol=1e-12)
            # an unread column is the plain logits (a shared prefix computed once for several rows) or not computed
            for column in range(width, ids.shape[1]):
                zero = not shared[row, column].any()
                assert zero or torch.allclose(shared[row, column], plain[row, column], atol=1e-12)
                skipped += zero
        assert skipped > ids.shape[1]  # the widths saved work
