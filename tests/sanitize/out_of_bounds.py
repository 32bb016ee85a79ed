"""Kernel module with one memory bug that no numerical check can see: the key tail is read unmasked.

A copy of :mod:`flash`'s forward kernel whose k and v loads drop the key-tail mask (``cols < N_K``):
the last key tile is always loaded whole, so when ``n_k % BLOCK_K != 0`` each program reads up to
``BLOCK_K - n_k % BLOCK_K`` rows past the end of the last ``[n_k, d]`` slice of k and of v. The score
mask is kept (those keys still get ``-inf``) and the stray v rows are zeroed after the load, so the
output and lse are those of the correct kernel even when the bytes past the end are NaN: only a
memory checker can tell. The backward is :mod:`flash`'s Triton backward, unchanged.

The smallest input that shows it: any ``n_k`` that is not a multiple of 64, e.g.
``Case(n_q=65, n_k=65, head_dim=16, leading=(), dtype='float32', layout='contiguous')`` (the first
entry of the regression corpus), where k and v are exactly-sized buffers of 65 rows and the tail
tile reads rows 65..127. ``python -m tests.sanitize --kernel tests.sanitize.out_of_bounds`` must
report it; a case whose k and v are views into a larger buffer (the ``strided`` and ``offset``
layouts) reads inside that buffer, and no tool sees it there.
"""

from __future__ import annotations

import math

# isort: off
# flash before triton: importing flash sets TRITON_INTERPRET=1 on a machine without CUDA, and Triton
# reads it when triton.language is first imported (its own helpers are @triton.jit functions).
from flash.backward_triton import flash_attention_backward
from flash.checks import check_inputs
from flash.forward import LOG2E, forward_config, padded_head_dim, slice_offsets
# isort: on
import torch
import triton
import triton.language as tl


@triton.jit
def _out_of_bounds_forward_kernel(
    Q, K, V, Out, LSE,
    Q_OFFSETS, K_OFFSETS, V_OFFSETS,
    stride_qn, stride_qd, stride_kn, stride_kd, stride_vn, stride_vd,
    N_Q, N_K, HEAD_DIM, num_q_tiles,
    qk_scale,
    IS_CAUSAL: tl.constexpr,
    BLOCK_Q: tl.constexpr,
    BLOCK_K: tl.constexpr,
    BLOCK_D: tl.constexpr,
    INPUT_PRECISION: tl.constexpr,
):
    pid = tl.program_id(0)
    pid_q = pid % num_q_tiles
    pid_b = pid // num_q_tiles

    q_base = Q + tl.load(Q_OFFSETS + pid_b)
    k_base = K + tl.load(K_OFFSETS + pid_b)
    v_base = V + tl.load(V_OFFSETS + pid_b)

    offs_q = pid_q * BLOCK_Q + tl.arange(0, BLOCK_Q)
    offs_k = tl.arange(0, BLOCK_K)
    offs_d = tl.arange(0, BLOCK_D)
    mask_q = offs_q < N_Q
    mask_d = offs_d < HEAD_DIM

    q_ptrs = q_base + offs_q[:, None].to(tl.int64) * stride_qn + offs_d[None, :] * stride_qd
    q = tl.load(q_ptrs, mask=mask_q[:, None] & mask_d[None, :], other=0.0)

    m_i = tl.full([BLOCK_Q], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_Q], dtype=tl.float32)
    acc = tl.zeros([BLOCK_Q, BLOCK_D], dtype=tl.float32)

    hi = N_K
    if IS_CAUSAL:
        hi = tl.minimum(N_K, (pid_q + 1) * BLOCK_Q)

    for start_k in range(0, hi, BLOCK_K):
        cols = start_k + offs_k
        mask_k = cols < N_K
        # THE BUG: the key-tail mask is missing from this load (only the head-dim padding is
        # masked), so the tail tile reads rows cols >= N_K, past the end of k.
        kt_ptrs = k_base + cols[None, :].to(tl.int64) * stride_kn + offs_d[:, None] * stride_kd
        kt = tl.load(kt_ptrs, mask=mask_d[:, None], other=0.0)
        s = tl.dot(q, kt, input_precision=INPUT_PRECISION) * qk_scale
        # The score mask is intact: whatever was read past the end gets -inf, so p = 0 there.
        visible = mask_k[None, :]
        if IS_CAUSAL:
            visible = visible & (offs_q[:, None] >= cols[None, :])
        s = tl.where(visible, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        alpha = tl.exp2(m_i - m_new)
        p = tl.exp2(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        # THE BUG again, for v; the rows read past the end are zeroed after the load (0 * NaN
        # would be NaN), which keeps the numbers right and the read out of bounds.
        v_ptrs = v_base + cols[:, None].to(tl.int64) * stride_vn + offs_d[None, :] * stride_vd
        v = tl.load(v_ptrs, mask=mask_d[None, :], other=0.0)
        v = tl.where(mask_k[:, None], v, 0.0)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision=INPUT_PRECISION)
        m_i = m_new

    acc = acc / l_i[:, None]
    lse = (m_i + tl.log2(l_i)) / 1.4426950408889634

    o_ptrs = Out + pid_b.to(tl.int64) * N_Q * HEAD_DIM + offs_q[:, None] * HEAD_DIM + offs_d[None, :]
    tl.store(o_ptrs, acc.to(Out.dtype.element_ty), mask=mask_q[:, None] & mask_d[None, :])
    tl.store(LSE + pid_b.to(tl.int64) * N_Q + offs_q, lse, mask=mask_q)


def out_of_bounds_forward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                          is_causal: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """As :func:`flash.flash_attention_forward` with its default tiles, through the buggy kernel."""
    check_inputs(q, k, v, is_causal)
    config = forward_config(q.shape[-1], q.dtype)
    *lead, n_q, d = q.shape
    n_k = k.shape[-2]
    o = torch.empty((*lead, n_q, d), dtype=q.dtype, device=q.device)
    lse = torch.empty((*lead, n_q), dtype=torch.float32, device=q.device)
    num_q_tiles = triton.cdiv(n_q, config.block_q)
    _out_of_bounds_forward_kernel[(num_q_tiles * math.prod(lead),)](
        q, k, v, o, lse,
        slice_offsets(q), slice_offsets(k), slice_offsets(v),
        q.stride(-2), q.stride(-1), k.stride(-2), k.stride(-1), v.stride(-2), v.stride(-1),
        n_q, n_k, d, num_q_tiles,
        LOG2E / math.sqrt(d),
        IS_CAUSAL=is_causal,
        BLOCK_Q=config.block_q,
        BLOCK_K=config.block_k,
        BLOCK_D=padded_head_dim(d),
        INPUT_PRECISION="ieee" if q.dtype == torch.float32 else "tf32",
        num_warps=config.num_warps,
        num_stages=config.num_stages,
    )
    return o, lse


class _OutOfBoundsAttention(torch.autograd.Function):
    """The buggy forward, :mod:`flash`'s Triton backward; returns ``(o, lse)``, lse not differentiable."""

    @staticmethod
    def forward(ctx, q, k, v, is_causal=False):
        o, lse = out_of_bounds_forward(q, k, v, is_causal)
        ctx.save_for_backward(q, k, v, o, lse)
        ctx.is_causal = is_causal
        ctx.mark_non_differentiable(lse)
        return o, lse

    @staticmethod
    def backward(ctx, do, _dlse):
        q, k, v, o, lse = ctx.saved_tensors
        dq, dk, dv = flash_attention_backward(q, k, v, o, lse, do, ctx.is_causal)
        return dq, dk, dv, None


def attention_with_lse(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                       is_causal: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    return _OutOfBoundsAttention.apply(q, k, v, is_causal)


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, is_causal: bool = False) -> torch.Tensor:
    return _OutOfBoundsAttention.apply(q, k, v, is_causal)[0]
