"""Replies to several prompts drawn as one batch: each prompt read once, every reply decoded in the same steps.

A decode step of a 135M-parameter model costs about the same for 8 rows as for 32 (it is bound by reading the
weights), and reading a prompt once instead of once per reply saves most of the prefill. So the prompts are read
each on one row (their common start once), their keys and values are placed left-padded in one cache, expanded to
`per_prompt` rows each, and every reply is drawn in the same steps, position ids and an attention mask keeping each row
at its own positions. A row that has ended leaves the batch (its cache rows dropped), and decoding stops once every
row has ended.
"""
import torch

from agentrl.cpu import fixed_threads
from agentrl.pretrained.loader import MODEL_THREADS
from agentrl.pretrained.sampling import Samples
from agentrl.progress import beat
from agentrl.realrl.prefix import forward_after, common_length


def _read_prompts(lm, prompts):
    """Each prompt read on one row, their common start once -> ([(keys, values)] per layer per prompt, last logits
    [G, V])."""
    shortest = min(len(p) for p in prompts)
    stacked = torch.stack([p[:shortest] for p in prompts])  # [G, shortest]
    shared = min(common_length(stacked), shortest - 1)  # each prompt keeps one token of its own: its last logits
    past = forward_after(lm, prompts[0][None, :shared], None)[1] if shared else None
    caches, last = [], []
    for prompt in prompts:
        logits, cache = forward_after(lm, prompt[None, shared:], past)
        caches.append(cache)
        last.append(logits[0, -1])
    return caches, torch.stack(last)


def _batch_cache(lm, caches, lengths, per_prompt):
    """One DynamicCache for G * per_prompt rows: prompt g's keys and values right-aligned in [rows, H, Pmax, D]."""
    from transformers import DynamicCache

    widest = max(lengths)
    cache = DynamicCache(config=lm.config)
    for layer in range(len(caches[0])):
        keys, values = [], []
        for past, length in zip(caches, lengths):
            k, v = past[layer]  # [1, H, length, D]
            pad = widest - length
            keys.append(torch.nn.functional.pad(k, (0, 0, pad, 0)).expand(per_prompt, -1, -1, -1))
            values.append(torch.nn.functional.pad(v, (0, 0, pad, 0)).expand(per_prompt, -1, -1, -1))
        cache.update(torch.cat(keys), torch.cat(values), layer)
    return cache


def sample_replies(lm, prompts, per_prompt, length, generator, temperature=1.0, end_id=None, keep_logp=False,
                   finished=None):
    """per_prompt replies of at most `length` tokens to each prompt [P_g], drawn from softmax(logits / temperature)
    with `generator`, all rows in one multinomial call per step -> list of Samples, one per prompt (tokens [n, length];
    after a row's end of turn its tokens are end_id and its mask 0; keep_logp: each position's log-distribution).
    finished(g, tokens) -> bool, when given, also ends a row of prompt g after the token that made it true (a stop
    sequence: e.g. the fence that closes a code block), that token kept."""
    if temperature <= 0:
        raise ValueError(f'temperature must be > 0, got {temperature}')
    if not prompts or per_prompt < 1 or length < 1:
        raise ValueError(f'sample_replies needs prompts, per_prompt >= 1 and length >= 1, got {len(prompts)} prompts, '
                         f'per_prompt={per_prompt}, length={length}')
    lengths = [len(p) for p in prompts]
    rows = len(prompts) * per_prompt
    tokens = torch.full((rows, length), end_id if end_id is not None else 0, dtype=torch.long)
    mask = torch.zeros(rows, length)
    kept = None
    with fixed_threads(MODEL_THREADS), torch.no_grad():
        caches, last = _read_prompts(lm, prompts)
        cache = _batch_cache(lm, caches, lengths, per_prompt)
        logits = last.repeat_interleave(per_prompt, 0)  # [rows, V]
        widest = max(lengths)
        pads = torch.tensor([widest - n for n in lengths]).repeat_interleave(per_prompt)  # [rows]
        positions = torch.tensor(lengths).repeat_interleave(per_prompt)  # [rows]: each row's next position
        attention = (torch.arange(widest)[None] >= pads[:, None]).long()  # [rows, widest]
        open_rows = torch.ones(rows, dtype=torch.bool)
        live = torch.arange(rows)  # the rows the cache and `logits` hold, in order: finished rows are dropped
        distributions = []
        for t in range(length):
            logp = torch.log_softmax(logits.float() / temperature, -1)  # [live, V]
            drawn = torch.multinomial(logp.exp(), 1, generator=generator)[:, 0]  # [live]
            tokens[live, t] = drawn
            mask[live, t] = 1.0
            if keep_logp:
                step = logp.new_zeros(rows, logp.shape[-1])
                step[live] = logp
                distributions.append(step)
            if end_id is not None:
                open_rows[live] &= drawn != end_id
            if finished is not None:
                for row in live[open_rows[live]].tolist():
                    if finished(row // per_prompt, tokens[row, :t + 1]):
                        open_rows[row] = False
            beat()  # a long decode on a busy machine is work, not a hang
            if t + 1 == length or not open_rows.any():
                break
            keep = open_rows[live]  # [live]: which of the cache's rows go on
            if not keep.all():  # fewer rows from here on: a decode step costs less
                cache.batch_select_indices(keep.nonzero()[:, 0])
                live, attention, positions = live[keep], attention[keep], positions[keep]
            attention = torch.cat([attention, torch.ones(len(live), 1, dtype=torch.long)], 1)
            out = lm(tokens[live, t:t + 1], cache=cache, attention_mask=attention, position_ids=positions[:, None],
                     use_cache=True)
            cache, logits, positions = out.cache, out.logits[:, -1], positions + 1
        if keep_logp:
            kept = torch.stack(distributions, 1)  # [rows, steps, V]
            kept = torch.nn.functional.pad(kept, (0, 0, 0, length - kept.shape[1]))
    return [Samples(prompt, tokens[g * per_prompt:(g + 1) * per_prompt], mask[g * per_prompt:(g + 1) * per_prompt],
                    None if kept is None else kept[g * per_prompt:(g + 1) * per_prompt])
            for g, prompt in enumerate(prompts)]
