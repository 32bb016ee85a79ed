"""Kernel module with one bug: every leading slice is normalized by the first slice's denominator.

The row sums ``l`` are written and read back at ``row`` instead of ``batch * n_q + row`` (a
missing batch offset), so slice 0 is right and every other slice is scaled by ``l_0 / l_b``.
Smallest input that shows it: two slices of one query and two keys, with different scores.
"""

import torch

from tests.broken._float32 import scores, up


def attention_with_lse(q, k, v, is_causal=False):
    s = scores(q, k, is_causal)
    m = s.amax(-1, keepdim=True)
    p = torch.exp(s - m)
    l_i = p.sum(-1, keepdim=True)
    flat = l_i.reshape(-1, *l_i.shape[-2:])
    l_read = flat[:1].expand_as(flat).reshape(l_i.shape)  # the bug: no batch offset
    o = torch.matmul(p, up(v)) / l_read
    return o.to(q.dtype), (m + torch.log(l_i)).squeeze(-1).detach()


def attention(q, k, v, is_causal=False):
    return attention_with_lse(q, k, v, is_causal)[0]
