"""Forward passes that compute a prefix shared by several rows once: the same logits, a fraction of the work.

In a GRPO batch every row starts with the chat template and the system prompt, and the rows of one group share their
whole prompt. A causal model's output at a position depends only on the tokens up to it, so a segment common to n rows
can be run once on one row and its keys and values handed on, expanded, to each row's own continuation. Autograd
sums the rows' gradients through the expansion, so the backward pass is the unshared one's too.

The rows are split like a trie: the longest prefix common to all of them runs once; the rows are then parted by
their first differing token and each part is treated the same way, up to MAX_SPLITS times; what is left of each part
runs as one batch.
"""
import torch

MAX_SPLITS = 1  # trie levels below the common prefix (the group's prompt); beyond them each part's rows run batched
WIDTH_SLACK = 8  # a batch of rows runs to its widest; rows more than this many columns wider start a batch of their own


def _cache_of(lm, past, rows):
    """A transformers DynamicCache holding `past` ([(keys, values)] per layer, batch 1) expanded to `rows` rows."""
    from transformers import DynamicCache

    cache = DynamicCache(config=lm.config)
    for layer, (keys, values) in enumerate(past):
        cache.update(keys.expand(rows, -1, -1, -1), values.expand(rows, -1, -1, -1), layer)
    return cache


def forward_after(lm, ids, past):
    """lm on ids [n, W] after `past` (None: from the start) -> (logits [n, W, V], the cache as [(keys, values)])."""
    cache = None if past is None else _cache_of(lm, past, ids.shape[0])
    out = lm(ids, cache=cache, use_cache=True)
    return out.logits, [(layer.keys, layer.values) for layer in out.cache.layers]


def common_length(ids):
    """How many leading columns of ids [n, W] are the same in every row."""
    differs = (ids != ids[:1]).any(0)  # [W]
    return int(differs.float().argmax()) if differs.any() else ids.shape[1]


def _run_cropped(lm, ids, past, widths):
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


def shared_forward(lm, ids, past=None, splits=MAX_SPLITS, widths=None):
    """Logits [n, W, V] of a transformers causal LM on ids [n, W] (continuing after `past`, batch 1), each prefix
    that several rows share computed once. widths [n] (optional): how many leading columns of each row are read; the
    logits of the columns after a part's widest row are left zero rather than computed."""
    n, width = ids.shape
    if n == 1 or splits < 0:
        return _run_cropped(lm, ids, past, widths)
    shared = common_length(ids)
    pieces = []
    if shared:
        logits, past = forward_after(lm, ids[:1, :shared], past)
        pieces.append(logits.expand(n, -1, -1))  # [n, shared, V]
        if shared == width:
            return pieces[0]
    rest = ids[:, shared:]  # [n, W - shared]; rows differ at its first column
    widths = None if widths is None else (widths - shared).clamp(min=0)
    parts = {}
    for row, token in enumerate(rest[:, 0].tolist()):
        parts.setdefault(token, []).append(row)
    order = [row for rows in parts.values() for row in rows]
    outputs = [shared_forward(lm, rest[rows], past, splits - 1, None if widths is None else widths[rows])
               for rows in parts.values()]
    inverse = torch.empty(n, dtype=torch.long)
    inverse[torch.tensor(order)] = torch.arange(n)
    pieces.append(torch.cat(outputs)[inverse])  # [n, W - shared, V], back in the rows' order
    return torch.cat(pieces, 1)
