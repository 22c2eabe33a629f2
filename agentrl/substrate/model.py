"""TinyAgent: a small decoder-only transformer (nanoGPT style) that reads and writes the gym's words.

B = batch, T = time (tokens), C = model width, H = heads, D = C // H, V = vocabulary.
`forward(ids)` scores whole sequences for training (optionally grouping rows by the width they need). For
sampling, `new_cache` holds every episode's keys and values, and `read` advances chosen episodes by a chunk of
tokens that starts at one position (a single token being a chunk of one).
"""
import math
from typing import Annotated

import pydantic
import torch
import torch.nn as nn
import torch.nn.functional as F
from pydantic import Field

from agentrl.substrate.config import CHECKED

AtLeastOne = Annotated[int, Field(ge=1)]


# Checked by pydantic like the substrate's configurations (agentrl.substrate.config.CHECKED): types and ranges in the
# annotations; only the check that ties two fields together is code.
@pydantic.dataclasses.dataclass(frozen=True, config=CHECKED)
class ModelConfig:
    """TinyAgent's shape. The defaults with the book's 316 words give its 157,244 parameters."""
    vocab_size: AtLeastOne
    context: AtLeastOne = 256  # longest sequence (prompt + calls + observations) the model can read
    width: AtLeastOne = 64  # C
    n_layer: AtLeastOne = 2
    n_head: AtLeastOne = 4  # H; width must be divisible by it
    mlp_ratio: AtLeastOne = 4  # hidden width of each MLP = mlp_ratio * width
    init_std: Annotated[float, Field(gt=0)] = 0.02  # std of the normal initialisation (GPT-2's; residual projections
    #   / sqrt(2 n_layer))
    logit_scale: Annotated[float, Field(gt=0)] = 1.0  # the head's output is multiplied by this (parameter-free: a
    #   softmax temperature)

    def __post_init__(self):
        if self.width % self.n_head:
            raise ValueError(f'ModelConfig.width ({self.width}) must be divisible by n_head ({self.n_head})')


class SelfAttention(nn.Module):
    """Causal multi-head self-attention."""

    def __init__(self, cfg):
        super().__init__()
        self.n_head = cfg.n_head
        self.qkv = nn.Linear(cfg.width, 3 * cfg.width)
        self.proj = nn.Linear(cfg.width, cfg.width)

    def split_heads(self, x):
        """[B, T, 3C] -> three [B, H, T, D]."""
        B, T, C3 = x.shape
        return [t.reshape(B, T, self.n_head, C3 // (3 * self.n_head)).transpose(1, 2) for t in x.chunk(3, dim=-1)]

    def forward(self, x):
        """x [B, T, C] -> [B, T, C], each position attending to itself and earlier ones."""
        B, T, C = x.shape
        q, k, v = self.split_heads(self.qkv(x))  # [B, H, T, D] each
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # [B, H, T, D]
        return self.proj(y.transpose(1, 2).reshape(B, T, C))

    def read(self, x, cache, start, slots):
        """x [n, W, C] at positions start..start+W-1 of cache rows `slots` [n] (None: all), earlier ones cached -> [n, W, C].

        cache [2, B, H, context, D] holds keys then values; the chunk's go into rows `slots`, and each position attends
        to itself and earlier ones.
        """
        n, W, C = x.shape
        qkv = self.qkv(x).view(n, W, 3, self.n_head, C // self.n_head).permute(2, 0, 3, 1, 4)  # [3, n, H, W, D]
        q, new = qkv[0], qkv[1:]  # [n, H, W, D], [2, n, H, W, D]
        end = start + W
        if slots is None:  # every row of the cache, in order
            cache[:, :, :, start:end] = new
            seen = cache[:, :, :, :end]  # [2, n, H, end, D]
        else:
            cache[:, :, :, start:end].index_copy_(1, slots, new)
            seen = cache[:, :, :, :end].index_select(1, slots)  # [2, n, H, end, D]
        visible = None  # a single new token sees every cached position
        if W > 1:
            visible = torch.arange(end, device=x.device)[None, :] <= torch.arange(start, end, device=x.device)[:, None]
        y = F.scaled_dot_product_attention(q, seen[0], seen[1], attn_mask=visible)  # [n, H, W, D]
        return self.proj(y.transpose(1, 2).reshape(n, W, C))


class Block(nn.Module):
    """Pre-norm transformer block: x + attention(norm(x)), then x + MLP(norm(x))."""

    def __init__(self, cfg):
        super().__init__()
        self.norm1 = nn.LayerNorm(cfg.width)
        self.attn = SelfAttention(cfg)
        self.norm2 = nn.LayerNorm(cfg.width)
        self.mlp = nn.Sequential(nn.Linear(cfg.width, cfg.mlp_ratio * cfg.width), nn.GELU(),
                                 nn.Linear(cfg.mlp_ratio * cfg.width, cfg.width))

    def forward(self, x):
        """[B, T, C] -> [B, T, C]."""
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))

    def read(self, x, cache, start, slots):
        """[n, W, C] at positions start..start+W-1 of cache rows `slots` -> [n, W, C], extending this block's cache."""
        x = x + self.attn.read(self.norm1(x), cache, start, slots)
        return x + self.mlp(self.norm2(x))


class TinyAgent(nn.Module):
    """Token and position embeddings, n_layer blocks, a final norm and a linear head to V logits; no dropout."""

    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.tok_emb = nn.Embedding(cfg.vocab_size, cfg.width)
        self.pos_emb = nn.Embedding(cfg.context, cfg.width)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        self.norm = nn.LayerNorm(cfg.width)
        self.head = nn.Linear(cfg.width, cfg.vocab_size)
        self.apply(self._init_weights)
        for block in self.blocks:  # GPT-2: scale the residual projections by depth
            nn.init.normal_(block.attn.proj.weight, std=cfg.init_std / math.sqrt(2 * cfg.n_layer))
            nn.init.normal_(block.mlp[2].weight, std=cfg.init_std / math.sqrt(2 * cfg.n_layer))

    def _init_weights(self, module):
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, std=self.cfg.init_std)
        if isinstance(module, nn.Linear):
            nn.init.zeros_(module.bias)

    def forward(self, ids, widths=None):
        """ids [B, T] (T <= context) -> logits [B, T, V]; logits[:, t] scores the token at t + 1.

        widths [B] (optional): how many leading positions of each row anyone reads; the rest is padding. The rows then
        run in a few groups of similar width, each cut to its widest row (the positions past it get logits 0, those
        between a row's width and its group's get the padding's scores: nobody may read either). Causal attention
        makes the positions read the same numbers, to float rounding, for less work on padding.
        """
        if widths is None:
            return self.logits(self.features(ids))  # [B, T, V]
        B, T = ids.shape
        widths = [min(max(int(w), 1), T) for w in widths]
        order = sorted(range(B), key=widths.__getitem__)  # rows by width; ties keep their order
        pieces, first = [], 0
        for last in width_groups([widths[b] for b in order]):
            rows, width = order[first:last], widths[order[last - 1]]
            logits = self.logits(self.features(ids[rows, :width]))  # [r, width, V]
            pieces.append(F.pad(logits, (0, 0, 0, T - width)))  # [r, T, V]
            first = last
        inverse = torch.empty(B, dtype=torch.long)
        inverse[torch.tensor(order)] = torch.arange(B)
        return torch.cat(pieces)[inverse]  # [B, T, V], rows in their own order again

    def logits(self, features):
        """Normalised hidden states [..., C] -> logits [..., V] (the head, times cfg.logit_scale)."""
        out = self.head(features)
        return out if self.cfg.logit_scale == 1.0 else out * self.cfg.logit_scale

    def features(self, ids):
        """ids [B, T] -> the normalised last hidden states [B, T, C] that the head turns into logits."""
        B, T = ids.shape
        if T > self.cfg.context:
            raise ValueError(f'sequence of {T} tokens is longer than the context of {self.cfg.context}')
        x = self.tok_emb(ids) + self.pos_emb(torch.arange(T, device=ids.device))  # [B, T, C]
        for block in self.blocks:
            x = block(x)  # [B, T, C]
        return self.norm(x)  # [B, T, C]

    def new_cache(self, batch_size):
        """Key/value caches for read: one tensor [2, B, H, context, D] (keys, then values) per block.

        Uninitialised: position t is written before anything reads it.
        """
        cfg = self.cfg
        shape = (2, batch_size, cfg.n_head, cfg.context, cfg.width // cfg.n_head)
        return [self.head.weight.new_empty(shape) for _ in self.blocks]

    def read(self, ids, cache, start, slots):
        """ids [n, W]: tokens at positions start..start+W-1 of the episodes in cache rows `slots` [n] (None: every
        row, in order), whose earlier positions are cached -> normalised hidden states [n, W, C], which model.logits
        turns into scores for the next positions. Those rows' caches get the chunk's keys and values; other rows are
        untouched.
        """
        n, W = ids.shape
        if start < 0 or start + W > self.cfg.context:
            raise ValueError(f'positions {start}..{start + W - 1} are outside the context of {self.cfg.context}')
        x = self.tok_emb(ids) + self.pos_emb.weight[start:start + W]  # [n, W, C]
        for block, block_cache in zip(self.blocks, cache):
            x = block.read(x, block_cache, start, slots)  # [n, W, C]
        return self.norm(x)  # [n, W, C]


GROUP_COST = 512  # what one more group of rows costs, in token positions: the fixed cost of a forward and backward


def width_groups(widths):
    """Where to cut sorted row widths into groups that each run cut to their widest row -> the groups' ends.

    Minimises the positions computed (rows x the group's widest) plus GROUP_COST per group, exactly (dynamic
    programming over the cut points).
    """
    n = len(widths)
    best, cut = [0] + [None] * n, [0] * (n + 1)  # best[j]: cheapest cost of the first j rows; cut[j]: its last cut
    for j in range(1, n + 1):
        best[j], cut[j] = min((best[i] + (j - i) * widths[j - 1] + GROUP_COST, i) for i in range(j))
    ends, j = [], n
    while j:
        ends.append(j)
        j = cut[j]
    return ends[::-1]


def count_parameters(model):
    """Number of trainable parameters."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)
