"""The correct attention the broken modules start from: dense, float32 (float64 for float64 inputs),
differentiable, in steps.

Each broken module copies the step it breaks (or wraps a correct kernel), so its one bug is the
only difference from this file.
"""

import math

import torch


def up(t):
    """``t`` in its accumulator dtype: float32, or float64 for float64 inputs (as the mock)."""
    return t.to(torch.promote_types(t.dtype, torch.float32))


def scores(q, k, is_causal):
    """Scaled scores in the accumulator dtype, hidden keys at -inf (top-left causal)."""
    s = torch.matmul(up(q), up(k).transpose(-2, -1)) / math.sqrt(q.shape[-1])
    if is_causal:
        hidden = torch.ones(s.shape[-2:], dtype=torch.bool, device=s.device).triu(1)
        s = s.masked_fill(hidden, float("-inf"))
    return s


def attention_with_lse(q, k, v, is_causal=False):
    s = scores(q, k, is_causal)
    m = s.amax(-1, keepdim=True)
    p = torch.exp(s - m)
    l_i = p.sum(-1, keepdim=True)
    o = torch.matmul(p, up(v)) / l_i
    return o.to(q.dtype), (m + torch.log(l_i)).squeeze(-1).detach()


def attention(q, k, v, is_causal=False):
    return attention_with_lse(q, k, v, is_causal)[0]


def delta(o, do):
    """``D = rowsum(do * o)``, the backward's per-row term, in the accumulator dtype."""
    return (up(do) * up(o)).sum(-1, keepdim=True)


def backward(q, k, v, o, lse, do, is_causal, d=None):
    """Gradients from the saved lse, as the spec's backward: ``P = exp(S - lse)``, ``dS = P (dP - D)``
    (``D`` is :func:`delta` unless given)."""
    scale = 1 / math.sqrt(q.shape[-1])
    qf, kf, vf, dof = (up(t) for t in (q, k, v, do))
    d = delta(o, do) if d is None else d
    p = torch.exp(scores(qf, kf, is_causal) - lse.unsqueeze(-1))
    dv = torch.matmul(p.transpose(-2, -1), dof)
    ds = p * (torch.matmul(dof, vf.transpose(-2, -1)) - d)
    dq = torch.matmul(ds, kf) * scale
    dk = torch.matmul(ds.transpose(-2, -1), qf) * scale
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def reject_float64(q):
    """Like ``flash``: float64 is not a supported dtype (so gradcheck does not apply)."""
    if q.dtype == torch.float64:
        raise TypeError("q has dtype torch.float64; supported dtypes are float16, bfloat16 and float32")


class SavedForward(torch.autograd.Function):
    """The correct forward, saving ``q, k, v, o, lse`` and ``is_causal`` for a backward: a broken
    module whose bug is in its backward subclasses this and writes only ``backward(ctx, do)``."""

    @staticmethod
    def forward(ctx, q, k, v, is_causal):
        o, lse = attention_with_lse(q, k, v, is_causal)
        ctx.save_for_backward(q, k, v, o, lse)
        ctx.is_causal = is_causal
        return o
