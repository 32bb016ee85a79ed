"""Kernel module with one bug: key tiles whose values are all zero are skipped, denominator included.

Skipping ``p @ v`` for a zero tile is a fair shortcut, since it adds nothing to the output; but
this kernel also skips the tile's ``sum(p)``, so the weights of every other key are too large.
Random values are never zero, so the output is right on every ordinary input. Smallest input that
shows it: 17 keys, values zero in the first 16 (tile 0) and one elsewhere: the output is 1 / P_16
times too large... simply, any ``v`` with a zero tile of 16 keys.
"""

import torch

from tests.broken._float32 import scores, up

BLOCK = 16


def attention_with_lse(q, k, v, is_causal=False):
    s = scores(q, k, is_causal)
    m = s.amax(-1, keepdim=True)
    p = torch.exp(s - m)
    n_k = k.shape[-2]
    tile = torch.arange(n_k, device=v.device) // BLOCK
    # For each leading slice and key tile: is every value in the tile zero?
    zero_key = (v == 0).all(-1)  # [..., n_k]
    zero_tile = torch.stack([zero_key[..., tile == t].all(-1) for t in range(int(tile.max()) + 1)], -1)
    skipped = zero_tile[..., tile]  # [..., n_k]
    l_i = p.masked_fill(skipped.unsqueeze(-2), 0).sum(-1, keepdim=True)  # the bug: skipped in l too
    o = torch.matmul(p, up(v)) / l_i
    lse = (m + torch.log(p.sum(-1, keepdim=True))).squeeze(-1).detach()
    return o.to(q.dtype), lse


def attention(q, k, v, is_causal=False):
    return attention_with_lse(q, k, v, is_causal)[0]
