"""Kernel module with one bug: ``dq`` sums its key tiles in an order that changes from call to call.

Like a backward that adds partial tiles with atomics in whatever order programs finish: every call
is accurate, and no two need agree bit-for-bit. The forward is deterministic. Smallest input that
shows it: float32, a row with a few dozen keys, backward run twice.
"""

import itertools
import math

import torch

from tests.broken import _float32

_calls = itertools.count()


class _Attention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, is_causal):
        _float32.reject_float64(q)
        o, lse = _float32.attention_with_lse(q, k, v, is_causal)
        ctx.save_for_backward(q, k, v, o, lse)
        ctx.is_causal = is_causal
        return o

    @staticmethod
    def backward(ctx, do):
        q, k, v, o, lse = ctx.saved_tensors
        _, dk, dv = _float32.backward(q, k, v, o, lse, do, ctx.is_causal)
        qf, kf, vf, of, dof = (_float32.up(t) for t in (q, k, v, o, do))
        p = torch.exp(_float32.scores(qf, kf, ctx.is_causal) - lse.unsqueeze(-1))
        ds = p * (torch.matmul(dof, vf.transpose(-2, -1)) - (dof * of).sum(-1, keepdim=True))
        split = 1 + next(_calls) % max(1, k.shape[-2] - 1)  # the bug: order differs per call
        dq = torch.matmul(ds[..., split:], kf[..., split:, :])
        dq = dq + torch.matmul(ds[..., :split], kf[..., :split, :])
        return (dq / math.sqrt(q.shape[-1])).to(q.dtype), dk, dv, None


def attention(q, k, v, is_causal=False):
    return _Attention.apply(q, k, v, is_causal)


def attention_with_lse(q, k, v, is_causal=False):
    return attention(q, k, v, is_causal), _float32.attention_with_lse(q, k, v, is_causal)[1]
