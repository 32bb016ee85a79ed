"""Kernel module with one bug: the denominator ``l`` is not reset between query tiles.

Query tiles of 16 rows; row ``r`` of tile ``t > 0`` starts from the final ``l`` of row ``r`` of tile
``t - 1`` instead of 0, so its weights sum to less than one, by an amount that depends on which
queries happen to share its tile slot. Smallest input that shows it: 17 queries (row 16 inherits
row 0's denominator).
"""

import torch

from tests.broken._float32 import scores, up

BLOCK = 16


def attention_with_lse(q, k, v, is_causal=False):
    s = scores(q, k, is_causal)
    m = s.amax(-1, keepdim=True)
    p = torch.exp(s - m)
    l_rows = p.sum(-1, keepdim=True)
    ls, carry = [], torch.zeros_like(l_rows[..., :BLOCK, :])
    for start in range(0, s.shape[-2], BLOCK):
        here = l_rows[..., start : start + BLOCK, :]
        l_i = carry[..., : here.shape[-2], :] + here  # the bug: carry should be 0
        ls.append(l_i)
        carry = torch.nn.functional.pad(l_i, (0, 0, 0, BLOCK - here.shape[-2]))
    l_i = torch.cat(ls, -2)
    o = torch.matmul(p, up(v)) / l_i
    return o.to(q.dtype), (m + torch.log(l_rows)).squeeze(-1).detach()


def attention(q, k, v, is_causal=False):
    return attention_with_lse(q, k, v, is_causal)[0]
