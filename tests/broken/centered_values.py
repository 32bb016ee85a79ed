"""Kernel module with one bug: values are centered on the mean of key 0's value row "for precision",
and shifted back.

``P (v - c) + c = P v`` in exact arithmetic (rows of P sum to 1), so the output is accurate, but
a row that should copy one value exactly gets ``c + (v_j - c)``, which rounds. Smallest input
that shows it: float32, one key, a head dim of 16.
"""

import torch

from tests.broken._float32 import scores, up


def attention_with_lse(q, k, v, is_causal=False):
    s = scores(q, k, is_causal)
    m = s.amax(-1, keepdim=True)
    p = torch.exp(s - m)
    l_i = p.sum(-1, keepdim=True)
    c = up(v)[..., :1, :].mean(-1, keepdim=True)  # the bug: a detour through v - c
    o = torch.matmul(p, up(v) - c) / l_i + c
    return o.to(q.dtype), (m + torch.log(l_i)).squeeze(-1).detach()


def attention(q, k, v, is_causal=False):
    return attention_with_lse(q, k, v, is_causal)[0]
