"""Forward passes over reply windows that compute each prompt once: the same logits, a fraction of the work.

A GRPO batch holds, for each prompt, a group of replies; every prompt starts with the same chat template and system
turn. A causal model's output at a position depends only on the tokens before it, so the engine's rows carry only the
replies: a row is [context key, reply tokens], the key naming its prompt (agentrl.realrl.policy). The system turn
common to the prompts runs once, each prompt's own part once after it, and their keys and values are handed on,
expanded, to each reply row. Autograd sums the rows' gradients through the expansion, so the backward pass is that
of the full rows too. Nothing reads the logits inside a prompt, so they are never computed.
"""
import torch

WIDTH_SLACK = 8  # a batch of rows runs to its widest; rows more than this many columns wider start a batch of their own


def _cache_of(lm, past, rows):
    """A transformers DynamicCache holding `past` ([(keys, values)] per layer, batch 1) expanded to `rows` rows."""
    from transformers import DynamicCache

    cache = DynamicCache(config=lm.config)
    for layer, (keys, values) in enumerate(past):
        cache.update(keys.expand(rows, -1, -1, -1), values.expand(rows, -1, -1, -1), layer)
    return cache


def forward_after(lm, ids, past, keep=0):
    """lm on ids [n, W] after `past` (None: from the start) -> (logits [n, W, V], the cache as [(keys, values)]);
    keep > 0: only the logits of the last `keep` columns are computed ([n, keep, V])."""
    cache = None if past is None else _cache_of(lm, past, ids.shape[0])
    out = lm(ids, cache=cache, use_cache=True, logits_to_keep=keep)
    return out.logits, [(layer.keys, layer.values) for layer in out.cache.layers]


def common_length(ids):
    """How many leading columns of ids [n, W] are the same in every row."""
    differs = (ids != ids[:1]).any(0)  # [W]
    return int(differs.float().argmax()) if differs.any() else ids.shape[1]


def run_cropped(lm, ids, past, widths):
    """forward_after's logits for each row's first `widths` columns, the columns after them zero (no row reads them) -> [n, W,
    V]. Rows of similar width run together, each batch cut to its widest row: a reply that runs to the length limit
    does not make the short ones beside it compute its padding."""
    if widths is None:
        return forward_after(lm, ids, past)[0]
    need = widths.clamp(min=1)
    order = torch.argsort(need, stable=True).tolist()
    batches, start = [], 0
    for end in range(1, len(order) + 1):
        if end == len(order) or need[order[end]] > need[order[start]] + WIDTH_SLACK:
            batches.append(order[start:end])
            start = end
    outputs = []
    for rows in batches:
        width = int(need[rows].max())
        logits = forward_after(lm, ids[rows, :width], past)[0]  # [r, width, V]
        outputs.append(torch.nn.functional.pad(logits, (0, 0, 0, ids.shape[1] - width)))
    inverse = torch.empty(len(order), dtype=torch.long)
    inverse[torch.tensor(order)] = torch.arange(len(order))
    return torch.cat(outputs)[inverse]


def context_forward(lm, contexts, keys, window, widths=None):
    """Logits [n, W, V] of a transformers causal LM on rows that each continue a prompt.

    contexts: [P_k] prompts; keys [n]: which prompt each row continues; window [n, W]: each row's tokens after its
    prompt's last one, which is column 0 (so column 0's logits score the reply's first token); widths [n] (optional):
    how many leading columns of each row are read, the rest left zero rather than computed.
    """
    used = sorted(set(keys.tolist()))
    prompts = [contexts[k] for k in used]
    # the part every prompt shares (the chat template, the system turn) once; each prompt keeps its last token
    shared = min(common_length(torch.nn.utils.rnn.pad_sequence(prompts, batch_first=True, padding_value=-1)),
                 min(len(p) for p in prompts) - 1)
    common = forward_after(lm, prompts[0][None, :shared], None, keep=1)[1] if shared else None
    outputs, order = [], []
    for k, prompt in zip(used, prompts):
        rows = (keys == k).nonzero()[:, 0]  # [r]
        own = prompt[shared:-1]
        past = forward_after(lm, own[None], common, keep=1)[1] if len(own) else common
        rows_ids = window[rows].clone()
        rows_ids[:, 0] = prompt[-1]
        outputs.append(run_cropped(lm, rows_ids, past, None if widths is None else widths[rows]))
        order += rows.tolist()
    inverse = torch.empty(len(order), dtype=torch.long)
    inverse[torch.tensor(order)] = torch.arange(len(order))
    return torch.cat(outputs)[inverse]
