"""Kernel module with one bug: the first key is counted twice (once to initialize, once in the loop).

``m, l, acc`` start from key 0 and the loop then starts at key 0 again, so key 0 gets double
weight. Smallest input that shows it: two identical keys with different values (weights 2/3 and
1/3 instead of 1/2 each).
"""

import torch

from tests.broken._float32 import scores, up


def attention_with_lse(q, k, v, is_causal=False):
    s = scores(q, k, is_causal)
    m = s.amax(-1, keepdim=True)
    p = torch.exp(s - m)
    vf = up(v)
    l_i = p.sum(-1, keepdim=True) + p[..., :1]  # the bug: key 0 again
    o = (torch.matmul(p, vf) + p[..., :1] * vf[..., :1, :]) / l_i
    return o.to(q.dtype), (m + torch.log(l_i)).squeeze(-1).detach()


def attention(q, k, v, is_causal=False):
    return attention_with_lse(q, k, v, is_causal)[0]
