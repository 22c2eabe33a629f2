"""Forward passes that compute each prompt once and batched reply sampling against plain forward passes, on a tiny random Llama."""
import pytest
import torch

from agentrl.realrl.prefix import common_length, context_forward
from agentrl.realrl.sampling import sample_replies

END = 11


def tiny_lm(seed=0, layers=2):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=12, hidden_size=16, intermediate_size=32, num_hidden_layers=layers,
                         num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=64)
    return LlamaForCausalLM(config).double()


def batch_like_grpo(generator, reply=5, lengths=(3, 4, 2)):
    """A GRPO batch of 12 rows: 3 prompts with a common start, 4 replies to each, shuffled as a minibatch is ->
    (contexts, keys [12], window [12, 1 + reply] with column 0 a placeholder, full rows [12, P_k + reply])."""
    common = torch.randint(0, END, (6,), generator=generator)
    contexts = [torch.cat([common, torch.randint(0, END, (n,), generator=generator)]) for n in lengths]
    keys = torch.arange(3).repeat_interleave(4)[torch.randperm(12, generator=generator)]
    replies = torch.randint(0, 12, (12, reply), generator=generator)
    window = torch.cat([torch.full((12, 1), -1), replies], 1)
    full = [torch.cat([contexts[k], r]) for k, r in zip(keys.tolist(), replies)]
    return contexts, keys, window, full


def plain_window_logits(lm, contexts, keys, full):
    """Each full row's logits from its prompt's last position on, by a plain forward pass -> [12, 1 + reply, V]."""
    return torch.stack([lm(row[None]).logits[0, len(contexts[k]) - 1:] for k, row in zip(keys.tolist(), full)])


def test_common_length_counts_the_leading_columns_every_row_shares():
    assert common_length(torch.tensor([[1, 2, 3], [1, 2, 4]])) == 2
    assert common_length(torch.tensor([[1, 2], [1, 2]])) == 2
    assert common_length(torch.tensor([[5, 2], [1, 2]])) == 0


def test_the_context_forward_gives_the_plain_logits_and_gradients():
    lm = tiny_lm()
    contexts, keys, window, full = batch_like_grpo(torch.Generator().manual_seed(1))
    plain, shared = plain_window_logits(lm, contexts, keys, full), context_forward(lm, contexts, keys, window)
    assert torch.allclose(plain, shared, atol=1e-12)
    weights = torch.randn_like(plain, generator=None)
    expected = torch.autograd.grad((plain * weights).sum(), list(lm.parameters()))
    found = torch.autograd.grad((shared * weights).sum(), list(lm.parameters()))
    for a, b in zip(expected, found):
        # transformers' attention takes its softmax in float32 even in a float64 model: float32's rounding is the floor
        assert torch.allclose(a, b, rtol=1e-5, atol=1e-6 * a.abs().max())


def test_prompts_with_no_common_start_or_one_inside_another_still_give_the_plain_logits():
    lm = tiny_lm()
    for contexts in ([torch.tensor([1, 2, 3]), torch.tensor([4, 5])], [torch.tensor([1, 2]), torch.tensor([1, 2, 3])]):
        keys = torch.tensor([1, 0, 1])
        replies = torch.tensor([[6, 7], [8, 9], [5, 5]])
        window = torch.cat([torch.full((3, 1), -1), replies], 1)
        full = [torch.cat([contexts[k], r]) for k, r in zip(keys.tolist(), replies)]
        expected = plain_window_logits(lm, contexts, keys, full)
        assert torch.allclose(context_forward(lm, contexts, keys, window), expected, atol=1e-12)


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
    contexts, keys, window, full = batch_like_grpo(torch.Generator().manual_seed(2), reply=30)  # window [12, 31]
    widths = torch.tensor([31, 3, 10, 9, 1, 12, 30, 5, 7, 31, 2, 20])  # columns each row's reader needs
    plain = plain_window_logits(lm, contexts, keys, full)
    cropped = context_forward(lm, contexts, keys, window, widths)
    skipped = 0
    for row, width in enumerate(widths.tolist()):
        assert torch.allclose(cropped[row, :width], plain[row, :width], atol=1e-12)
        # an unread column is computed only when a row beside it in its batch reads that far
        for column in range(width, window.shape[1]):
            zero = not cropped[row, column].any()
            assert zero or torch.allclose(cropped[row, column], plain[row, column], atol=1e-12)
            skipped += zero
    assert skipped > window.shape[1]  # the widths saved work
