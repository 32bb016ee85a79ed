"""Kernel module: ``flash`` with 16x16 tiles, the deliberately slowed kernel that shows the gate works.

The same Triton kernels as :mod:`flash`, launched with the smallest tiles they take: the forward
with ``block_q = block_k = 16`` (instead of 64x64) and the backward with every tile 16 wide
(instead of 32 to 128), warps and pipeline stages as ``flash`` chooses them. Its results are as
right as ``flash``'s (the tiles change only the order of float32 sums; it passes
``tests/test_oracle_agreement.py`` and ``tests/test_backward.py`` with ``--kernel
benchmarks.slowed``); it is several times slower, because each program does a sixteenth of a
64x64 tile's work against the same fixed costs, and k and v are re-read for every 16 query rows.

Its benchmarks have the same names as ``flash``'s (the kernel module is not part of a name), so

    benchmarks/speed_gate.sh check --bench-kernel benchmarks.slowed

compares them with a baseline of ``flash``, and both gates must fail (see ``benchmarks/README.md``).
"""

from __future__ import annotations

import torch

from flash.backward_triton import BackwardConfig, backward_config, flash_attention_backward
from flash.forward import flash_attention_forward

TILE = 16

BATCH_INVARIANT = True
"""Each leading-dim slice is computed by its own programs, as in ``flash``."""


def slowed_backward_config(head_dim: int, dtype: torch.dtype) -> BackwardConfig:
    """``flash``'s backward launch options with every tile :data:`TILE` wide."""
    config = backward_config(head_dim, dtype)
    return config._replace(block_q_dkdv=TILE, block_k_dkdv=TILE, block_q_dq=TILE, block_k_dq=TILE)


def _forward(ctx, q, k, v, is_causal):
    o, lse = flash_attention_forward(q, k, v, is_causal, block_q=TILE, block_k=TILE)
    ctx.save_for_backward(q, k, v, o, lse)
    ctx.is_causal = is_causal
    return o, lse


def _backward(ctx, do):
    q, k, v, o, lse = ctx.saved_tensors
    config = slowed_backward_config(q.shape[-1], q.dtype)
    dq, dk, dv = flash_attention_backward(q, k, v, o, lse, do, ctx.is_causal, config=config)
    return dq, dk, dv, None


class SlowedAttention(torch.autograd.Function):
    """As :class:`flash.FlashAttention` (Triton backward), with 16-wide tiles everywhere."""

    @staticmethod
    def forward(ctx, q, k, v, is_causal=False):
        return _forward(ctx, q, k, v, is_causal)[0]

    @staticmethod
    def backward(ctx, do):
        return _backward(ctx, do)


class _SlowedAttentionWithLse(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, is_causal=False):
        o, lse = _forward(ctx, q, k, v, is_causal)
        ctx.mark_non_differentiable(lse)
        return o, lse

    @staticmethod
    def backward(ctx, do, _dlse):
        return _backward(ctx, do)


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, is_causal: bool = False) -> torch.Tensor:
    """:func:`flash.attention` with 16x16 tiles."""
    return SlowedAttention.apply(q, k, v, is_causal)


def attention_with_lse(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, is_causal: bool = False
) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`flash.attention_with_lse` with 16x16 tiles."""
    return _SlowedAttentionWithLse.apply(q, k, v, is_causal)
