"""Kernel module with one bug: scores clamped to [-16, 16] "to keep exp in range".

With the max subtracted, exp never overflows, so the clamp buys nothing; it silently flattens any
row whose scores leave the band, as a common shift of all keys does. Smallest input that shows
it: one query, two keys with scores 20 and 21 (clamped to equal weights instead of 1 : e).
"""

import torch

from tests.broken._float32 import scores, up

LIMIT = 16.0


def attention_with_lse(q, k, v, is_causal=False):
    s = scores(q, k, False).clamp(-LIMIT, LIMIT)  # the bug
    if is_causal:
        s = s.masked_fill(torch.ones(s.shape[-2:], dtype=torch.bool, device=s.device).triu(1), float("-inf"))
    m = s.amax(-1, keepdim=True)
    p = torch.exp(s - m)
    l_i = p.sum(-1, keepdim=True)
    o = torch.matmul(p, up(v)) / l_i
    return o.to(q.dtype), (m + torch.log(l_i)).squeeze(-1).detach()


def attention(q, k, v, is_causal=False):
    return attention_with_lse(q, k, v, is_causal)[0]
