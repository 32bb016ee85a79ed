"""The correct blockwise attention the precision-bug modules start from: online softmax over key
tiles of 16 in float32, with a backward of its own from the saved lse, as a flash kernel does it.

Each step that a flash kernel keeps in float32 goes through ``hold(name, t, dtype)``, with the
input dtype: running max ``"m"``, running sum ``"l"``, accumulator ``"acc"``, the stored ``"lse"``,
and in the backward ``"D"`` (``rowsum(do * o)``) and ``"P"`` (the recomputed probabilities
``exp(S - lse)``, through their exponent: a flash kernel rounds ``P`` itself to the input dtype
before its products, so only the float32 exponent is a step it keeps). Here
:func:`exact` keeps every one in float32; a broken module passes a ``hold`` that keeps one of them
in the input dtype instead (:func:`in_input_dtype`), so that is its only difference from this file.
Everything else is float32 (:func:`tests.broken._float32.up`), as in ``tests/broken/_float32.py``.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from tests.broken._float32 import reject_float64, scores, up

BLOCK = 16
"""Keys per tile: 40 keys are three tiles, so the running statistics are rescaled twice."""

STEPS = ("m", "l", "acc", "lse", "D", "P")
"""The float32 intermediates, in the order the algorithm meets them."""

Hold = Callable[[str, torch.Tensor, torch.dtype], torch.Tensor]


def exact(name: str, t: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """The correct kernel: every intermediate stays in float32."""
    return t


def in_input_dtype(step: str) -> Hold:
    """A ``hold`` that rounds intermediate ``step`` through the input dtype (its one bug), and keeps
    the others in float32."""
    if step not in STEPS:
        raise ValueError(f"unknown step {step!r}; known: {STEPS}")

    def hold(name: str, t: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        return t.to(dtype).to(t.dtype) if name == step else t

    return hold


def forward(q, k, v, is_causal, hold: Hold = exact):
    """``(o, lse)`` by online softmax over key tiles of :data:`BLOCK` (the mock's recurrence)."""
    s = scores(q, k, is_causal)
    vf = up(v)
    m = torch.full(s.shape[:-1], float("-inf"), dtype=s.dtype, device=s.device)
    l_i = torch.zeros(s.shape[:-1], dtype=s.dtype, device=s.device)
    acc = torch.zeros((*s.shape[:-1], v.shape[-1]), dtype=s.dtype, device=s.device)
    for start in range(0, s.shape[-1], BLOCK):
        s_j = s[..., start : start + BLOCK]
        # -- online softmax: every row sees key 0 (top-left causal), so m is finite from tile 1 on --
        m_new = torch.maximum(m, s_j.amax(-1))
        alpha = torch.exp(m - m_new)
        p = torch.exp(s_j - m_new.unsqueeze(-1))
        l_i = hold("l", l_i * alpha + p.sum(-1), q.dtype)
        acc = hold("acc", acc * alpha.unsqueeze(-1) + torch.matmul(p, vf[..., start : start + BLOCK, :]),
                   q.dtype)
        m = hold("m", m_new, q.dtype)  # this tile's p used m_new; the next tile rescales from m
    o = acc / l_i.unsqueeze(-1)
    return o.to(q.dtype), hold("lse", m + torch.log(l_i), q.dtype)


def backward(q, k, v, o, lse, do, is_causal, hold: Hold = exact):
    """``dq, dk, dv`` from the saved lse (``tests/broken/_float32.py``'s backward, with ``D`` and
    ``P`` held by ``hold``)."""
    scale = 1 / math.sqrt(q.shape[-1])
    qf, kf, vf, of, dof = (up(t) for t in (q, k, v, o, do))
    delta = hold("D", (dof * of).sum(-1, keepdim=True), q.dtype)
    # P = exp(S - lse), its exponent in float32: a kernel that computes it in the input dtype
    # (exp2 of a half-precision argument) moves P by u |S - lse|, relative.
    p = torch.exp(hold("P", scores(qf, kf, is_causal) - lse.unsqueeze(-1), q.dtype))
    dv = torch.matmul(p.transpose(-2, -1), dof)
    ds = p * (torch.matmul(dof, vf.transpose(-2, -1)) - delta)
    dq = torch.matmul(ds, kf) * scale
    dk = torch.matmul(ds.transpose(-2, -1), qf) * scale
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def kernel(hold: Hold = exact):
    """``(attention, attention_with_lse)`` of a kernel module whose intermediates go through ``hold``."""

    class _Attention(torch.autograd.Function):
        @staticmethod
        def forward(ctx, q, k, v, is_causal):
            reject_float64(q)
            o, lse = forward(q, k, v, is_causal, hold)
            ctx.save_for_backward(q, k, v, o, lse)
            ctx.is_causal = is_causal
            return o

        @staticmethod
        def backward(ctx, do):
            return (*backward(*ctx.saved_tensors, do, ctx.is_causal, hold), None)

    def attention(q, k, v, is_causal=False):
        return _Attention.apply(q, k, v, is_causal)

    def attention_with_lse(q, k, v, is_causal=False):
        reject_float64(q)
        with torch.no_grad():
            return forward(q, k, v, is_causal, hold)

    return attention, attention_with_lse


attention, attention_with_lse = kernel()
"""This module is itself a correct kernel module (``tests/test_broken_kernels.py`` checks that it
passes), so a precision-bug module's failures are its bug's alone."""
