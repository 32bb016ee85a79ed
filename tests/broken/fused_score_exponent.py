"""Kernel module with one bug: the exponent ``s * scale - m`` computed with the product not rounded.

In base 2, as the kernels compute it: scores ``s = x * c`` with ``c = scale * log2(e)``. The row
max ``m`` is taken over the rounded scores, but each weight is ``exp2(x * c - m)`` with ``x * c``
exact, as one FMA computes it (a GPU compiler contracts the multiply and the subtraction into one
unless told not to; docs/findings.md, finding 20). The row's largest key then gets ``exp2`` of its
score's rounding error, not ``exp2(0) = 1``: a weight off by half an ulp of the score, harmless at
ordinary scores, and NaN once that half ulp passes ``exp2``'s float32 range (128), from scaled
scores of about 1.5e9. Smallest input that shows it: one query and one key whose scaled score is
1e10.
"""

import math

import torch

from tests.broken._float32 import up

LOG2E = math.log2(math.e)


def attention_with_lse(q, k, v, is_causal=False):
    x = torch.matmul(up(q), up(k).transpose(-2, -1))
    c = torch.tensor(LOG2E / math.sqrt(q.shape[-1]), dtype=x.dtype)
    exact = x.double() * c.double()  # a float32 product is exact in float64, as inside an FMA
    s = exact.to(x.dtype)  # the rounded scores
    if is_causal:
        hidden = torch.ones(s.shape[-2:], dtype=torch.bool, device=s.device).triu(1)
        s = s.masked_fill(hidden, float("-inf"))
        exact = exact.masked_fill(hidden, float("-inf"))
    m = s.amax(-1, keepdim=True)
    p = torch.exp2((exact - m.double()).to(x.dtype))  # the bug: the unrounded product minus m
    l_i = p.sum(-1, keepdim=True)
    o = torch.matmul(p, up(v)) / l_i
    return o.to(q.dtype), ((m + torch.log2(l_i)) / LOG2E).squeeze(-1).detach()


def attention(q, k, v, is_causal=False):
    return attention_with_lse(q, k, v, is_causal)[0]
