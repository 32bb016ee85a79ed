"""Kernel module with one bug: the backward's causal mask is off by one (``j <= i + 1`` visible).

The forward is correct; the backward rebuilds ``P = exp(S - lse)`` from the saved lse with the
mask shifted, so row ``i`` sends gradient to key ``i + 1``, which it never saw. Smallest input
that shows it: causal, two queries and two keys, upstream gradient on row 0 only: ``dv[1] != 0``.
"""

import math

import torch

from tests.broken import _float32


class _Attention(_float32.SavedForward):
    @staticmethod
    def backward(ctx, do):
        q, k, v, o, lse = ctx.saved_tensors
        qf, kf, vf, of, dof = (_float32.up(t) for t in (q, k, v, o, do))
        s = torch.matmul(qf, kf.transpose(-2, -1)) / math.sqrt(q.shape[-1])
        if ctx.is_causal:
            hidden = torch.ones(s.shape[-2:], dtype=torch.bool, device=s.device).triu(2)  # the bug
            s = s.masked_fill(hidden, float("-inf"))
        p = torch.exp(s - lse.unsqueeze(-1))
        dv = torch.matmul(p.transpose(-2, -1), dof)
        ds = p * (torch.matmul(dof, vf.transpose(-2, -1)) - (dof * of).sum(-1, keepdim=True))
        dq = torch.matmul(ds, kf) / math.sqrt(q.shape[-1])
        dk = torch.matmul(ds.transpose(-2, -1), qf) / math.sqrt(q.shape[-1])
        return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype), None


def attention(q, k, v, is_causal=False):
    return _Attention.apply(q, k, v, is_causal)


def attention_with_lse(q, k, v, is_causal=False):
    return attention(q, k, v, is_causal), _float32.attention_with_lse(q, k, v, is_causal)[1]
