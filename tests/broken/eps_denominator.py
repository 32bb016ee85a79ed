"""Kernel module with one bug: ``o = acc / (l + 1e-3)``, an "eps for safety" in the denominator.

``l >= 1`` always (the max term contributes exp(0) = 1), so the eps protects nothing and scales
every row by ``l / (l + eps)``: probabilities sum to ``1 - eps / l``. Smallest input that shows
it: one key (``l = 1``), where the row sum is 0.999 (float32).
"""

import torch

from tests.broken._float32 import scores, up

EPS = 1e-3


def attention_with_lse(q, k, v, is_causal=False):
    s = scores(q, k, is_causal)
    m = s.amax(-1, keepdim=True)
    p = torch.exp(s - m)
    l_i = p.sum(-1, keepdim=True)
    o = torch.matmul(p, up(v)) / (l_i + EPS)  # the bug
    return o.to(q.dtype), (m + torch.log(l_i)).squeeze(-1).detach()


def attention(q, k, v, is_causal=False):
    return attention_with_lse(q, k, v, is_causal)[0]
