"""The autograd wrapper and the public functions of the kernel-module contract.

``FlashAttention.apply(q, k, v, is_causal=False)`` runs the Triton forward, saves q, k, v, o and
the row log-sum-exp, and backpropagates with :func:`flash.backward.flash_attention_backward`.
"""

from __future__ import annotations

import torch

from flash.backward import flash_attention_backward
from flash.forward import flash_attention_forward


def _forward(ctx, q, k, v, is_causal):
    o, lse = flash_attention_forward(q, k, v, is_causal)
    ctx.save_for_backward(q, k, v, o, lse)
    ctx.is_causal = is_causal
    return o, lse


def _backward(ctx, do):
    q, k, v, o, lse = ctx.saved_tensors
    dq, dk, dv = flash_attention_backward(q, k, v, o, lse, do, ctx.is_causal)
    return dq, dk, dv, None


class FlashAttention(torch.autograd.Function):
    """Flash Attention: Triton forward, dense PyTorch backward from the saved lse. Returns ``o``."""

    @staticmethod
    def forward(ctx, q, k, v, is_causal=False):
        o, _ = _forward(ctx, q, k, v, is_causal)
        return o

    @staticmethod
    def backward(ctx, do):
        return _backward(ctx, do)


class _FlashAttentionWithLse(torch.autograd.Function):
    """As :class:`FlashAttention`, also returning the lse (not differentiable)."""

    @staticmethod
    def forward(ctx, q, k, v, is_causal=False):
        o, lse = _forward(ctx, q, k, v, is_causal)
        ctx.mark_non_differentiable(lse)
        return o, lse

    @staticmethod
    def backward(ctx, do, _dlse):
        return _backward(ctx, do)


def attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, is_causal: bool = False
) -> torch.Tensor:
    """``softmax(q k^T / sqrt(d)) v`` over ``[..., n, d]`` inputs; differentiable in q, k, v.

    Causal masking is top-left aligned: query ``i`` sees key ``j`` iff ``j <= i``, as
    ``scaled_dot_product_attention(is_causal=True)``. See :mod:`flash.forward` for what is
    supported. Bad arguments raise ``TypeError``/``ValueError`` naming the argument.
    """
    return FlashAttention.apply(q, k, v, is_causal)


def attention_with_lse(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, is_causal: bool = False
) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`attention`, plus the row log-sum-exp of the scaled scores (float32, ``q.shape[:-1]``).

    The lse is returned for inspection and is not differentiable; gradients flow through ``o``.
    """
    return _FlashAttentionWithLse.apply(q, k, v, is_causal)
