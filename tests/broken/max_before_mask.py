"""Kernel module with one bug: the row max is taken over all keys, before the causal mask.

Softmax does not care which constant is subtracted, so on ordinary inputs the output is right to
within rounding; but a hidden key now decides the rounding of every visible row (and at large
scores a hidden key far above the visible ones underflows the whole row). Smallest input that
shows it: causal, two queries and two keys, changing key 1 changes row 0's bits.
"""

import torch

from tests.broken._float32 import scores, up


def attention_with_lse(q, k, v, is_causal=False):
    m = scores(q, k, False).amax(-1, keepdim=True)  # the bug: unmasked scores
    s = scores(q, k, is_causal)
    p = torch.exp(s - m)
    l_i = p.sum(-1, keepdim=True)
    o = torch.matmul(p, up(v)) / l_i
    return o.to(q.dtype), (m + torch.log(l_i)).squeeze(-1).detach()


def attention(q, k, v, is_causal=False):
    return attention_with_lse(q, k, v, is_causal)[0]
