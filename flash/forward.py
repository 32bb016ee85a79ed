"""The Triton forward kernel of Flash Attention and its launcher.

Caution, what this kernel does and does not do:

- inputs ``[..., n, d]`` with any leading dims (batch, heads, ...), each slice ``[n, d]`` handled
  by its own programs; q, k, v may have any strides, including stride 0 on a leading dim
  (``.expand()``-broadcast k/v) and a non-unit stride on the head dim; nothing is copied;
- any ``n_q >= 1`` and ``n_k >= 1``, equal or not, multiples of the tile sizes or not;
- float16, bfloat16 and float32; float32 products use IEEE fp32 (``input_precision="ieee"``),
  not TF32, so a float32 result is a float32 result;
- head dims 1..256; a head dim that is not a power of two is padded to the next one (at least 16,
  the smallest ``tl.dot``) and the padding is masked on every load and store;
- causal attention is **top-left aligned**: query ``i`` sees key ``j`` iff ``j <= i``, the same
  convention as ``torch.nn.functional.scaled_dot_product_attention(is_causal=True)``. With
  ``n_q > n_k`` the last rows see every key; no row ever sees none, since key 0 is always visible;
- it stores the output (in the input dtype) and the row log-sum-exp ``lse`` (float32, natural log)
  of the scaled scores, ``lse_i = log sum_j exp(scale * q_i . k_j)``, which the backward needs;
- with ``VARLEN`` set (:mod:`flash.varlen`), a slice is one head of packed sequences and each
  program computes a window of it read from ``cu_seqlens``: the same arithmetic on fewer rows;
- it does not support dropout, attention bias, sliding windows or float64.
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import torch
import triton
import triton.language as tl

import flash._runtime  # noqa: F401  (sets TRITON_INTERPRET before the kernel is decorated)
from flash.checks import check_inputs

LOG2E = 1.4426950408889634  # log2(e): exp(x) = exp2(x * LOG2E)


@triton.jit
def _attend_key_tiles(
    acc, l_i, m_i, q, k_base, v_base, stride_kn, stride_kd, stride_vn, stride_vd,
    offs_q, offs_d, mask_d, n_k, qk_scale, lo, hi,
    MASKED: tl.constexpr,
    IS_CAUSAL: tl.constexpr,
    BLOCK_K: tl.constexpr,
    INPUT_PRECISION: tl.constexpr,
):
    """The online softmax over key tiles ``[lo, hi)``; returns the updated ``acc, l_i, m_i``.

    ``MASKED=False`` is for tiles that every row sees whole (no key past ``n_k``, none in a
    row's future): no mask is built, loaded or applied. ``MASKED=True`` hides keys past ``n_k``
    and, if causal, keys after the row.
    """
    offs_k = tl.arange(0, BLOCK_K)
    for start_k in range(lo, hi, BLOCK_K):
        cols = start_k + offs_k
        mask_k = cols < n_k
        # -- load k transposed, [D, BK], so that q @ kt is [BQ, BK] --
        kt_ptrs = k_base + cols[None, :].to(tl.int64) * stride_kn + offs_d[:, None] * stride_kd
        v_ptrs = v_base + cols[:, None].to(tl.int64) * stride_vn + offs_d[None, :] * stride_vd
        if MASKED:
            kt = tl.load(kt_ptrs, mask=mask_d[:, None] & mask_k[None, :], other=0.0)
            v = tl.load(v_ptrs, mask=mask_k[:, None] & mask_d[None, :], other=0.0)
        else:
            kt = tl.load(kt_ptrs, mask=mask_d[:, None], other=0.0)
            v = tl.load(v_ptrs, mask=mask_d[None, :], other=0.0)
        # -- scores; if masked, keys past the end (and, if causal, in the future) at -inf --
        s = tl.dot(q, kt, input_precision=INPUT_PRECISION) * qk_scale
        if MASKED:
            visible = mask_k[None, :]
            if IS_CAUSAL:
                visible = visible & (offs_q[:, None] >= cols[None, :])
            s = tl.where(visible, s, float("-inf"))
        # -- online softmax: rescale what was accumulated to the new row max --
        # Every row sees at least one key of the first tile visited (key 0, or a key before the
        # tile's first row), so after it m_new is finite and neither exp2 sees -inf - (-inf).
        m_new = tl.maximum(m_i, tl.max(s, 1))
        alpha = tl.exp2(m_i - m_new)
        p = tl.exp2(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        # -- accumulate p @ v --
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision=INPUT_PRECISION)
        m_i = m_new
    return acc, l_i, m_i


@triton.jit
def _flash_forward_kernel(
    Q, K, V, Out, LSE,
    Q_OFFSETS, K_OFFSETS, V_OFFSETS,  # int64 [S]: where each slice's [n, d] matrix starts
    CU_Q, CU_K,  # VARLEN: int32 [B + 1] sequence starts (rows of every slice); else unused
    stride_qn, stride_qd, stride_kn, stride_kd, stride_vn, stride_vd,
    stride_os, stride_on,  # o: element stride between slices and between rows
    stride_ls, stride_ln,  # lse: element stride between slices and between rows
    N_Q, N_K, HEAD_DIM, num_q_tiles, num_slices,
    qk_scale,  # softmax scale times log2(e): scores live in base 2 inside the kernel
    IS_CAUSAL: tl.constexpr,
    VARLEN: tl.constexpr,
    BLOCK_Q: tl.constexpr,
    BLOCK_K: tl.constexpr,
    BLOCK_D: tl.constexpr,
    INPUT_PRECISION: tl.constexpr,
    OFFSET_ALIGN: tl.constexpr,  # a power of two that divides every slice offset (in elements)
):
    # One program per (query tile, slice[, sequence]). The query tile varies fastest, so programs
    # that run side by side read the same K/V slice and share it in L2.
    pid = tl.program_id(0)
    pid_q = pid % num_q_tiles
    pid_b = pid // num_q_tiles
    if IS_CAUSAL:
        # Causal work grows with the query tile: launch the longest tiles first, so the short
        # ones fill the gaps at the end instead of a long one running alone.
        pid_q = num_q_tiles - 1 - pid_q
    # A program attends rows [row_q, row_q + n_q) of its slice to rows [row_k, row_k + n_k):
    # the whole slice for a dense batch, one sequence of it for packed (varlen) input.
    if VARLEN:
        seq = pid_b // num_slices
        pid_b = pid_b % num_slices
        start_q = tl.load(CU_Q + seq)
        start_k = tl.load(CU_K + seq)
        n_q = tl.load(CU_Q + seq + 1) - start_q
        n_k = tl.load(CU_K + seq + 1) - start_k
        row_q = start_q.to(tl.int64)
        row_k = start_k.to(tl.int64)
    else:
        row_q = 0
        row_k = 0
        n_q = N_Q
        n_k = N_K

    # The slice offsets are loaded, so the compiler knows nothing of their alignment; without
    # OFFSET_ALIGN it must assume 2-byte alignment and load one element at a time.
    q_base = Q + tl.multiple_of(tl.load(Q_OFFSETS + pid_b), OFFSET_ALIGN) + row_q * stride_qn
    k_base = K + tl.multiple_of(tl.load(K_OFFSETS + pid_b), OFFSET_ALIGN) + row_k * stride_kn
    v_base = V + tl.multiple_of(tl.load(V_OFFSETS + pid_b), OFFSET_ALIGN) + row_k * stride_vn
    o_base = Out + pid_b.to(tl.int64) * stride_os + row_q * stride_on
    lse_base = LSE + pid_b.to(tl.int64) * stride_ls + row_q * stride_ln

    offs_q = pid_q * BLOCK_Q + tl.arange(0, BLOCK_Q)
    offs_d = tl.arange(0, BLOCK_D)
    mask_q = offs_q < n_q
    mask_d = offs_d < HEAD_DIM  # masks the padding of a head dim that is not a power of two

    # Row offsets in int64: a transposed [n, B, d] layout has row strides of B*d, and
    # n * B * d can pass 2**31 where no single slice does.
    q_ptrs = q_base + offs_q[:, None].to(tl.int64) * stride_qn + offs_d[None, :] * stride_qd
    q = tl.load(q_ptrs, mask=mask_q[:, None] & mask_d[None, :], other=0.0)

    m_i = tl.full([BLOCK_Q], float("-inf"), dtype=tl.float32)  # running row max (base 2)
    l_i = tl.zeros([BLOCK_Q], dtype=tl.float32)  # running denominator, relative to m_i
    acc = tl.zeros([BLOCK_Q, BLOCK_D], dtype=tl.float32)  # running unnormalized output

    # Key tiles are visited in two runs. First the tiles that every row of this query tile sees
    # whole: they lie before n_k and, if causal, before the tile's first row, so they need no
    # mask at all. Then the rest, masked: the partial last tile (keys past n_k) and, if causal,
    # the tiles on the diagonal. Causal tiles wholly in the future are never visited.
    full_hi = (n_k // BLOCK_K) * BLOCK_K  # end of the key tiles that lie wholly before n_k
    hi = n_k
    if IS_CAUSAL:
        hi = tl.minimum(n_k, (pid_q + 1) * BLOCK_Q)
        full_hi = tl.minimum(full_hi, (pid_q * BLOCK_Q // BLOCK_K) * BLOCK_K)
    if VARLEN:
        # The grid is sized for the longest sequence; a tile past the end of a shorter one has
        # no row to compute, so it skips both runs and stores nothing (every row is masked).
        hi = tl.where(pid_q * BLOCK_Q < n_q, hi, 0)
        full_hi = tl.minimum(full_hi, hi)

    acc, l_i, m_i = _attend_key_tiles(
        acc, l_i, m_i, q, k_base, v_base, stride_kn, stride_kd, stride_vn, stride_vd,
        offs_q, offs_d, mask_d, n_k, qk_scale, 0, full_hi,
        MASKED=False, IS_CAUSAL=IS_CAUSAL, BLOCK_K=BLOCK_K, INPUT_PRECISION=INPUT_PRECISION,
    )
    acc, l_i, m_i = _attend_key_tiles(
        acc, l_i, m_i, q, k_base, v_base, stride_kn, stride_kd, stride_vn, stride_vd,
        offs_q, offs_d, mask_d, n_k, qk_scale, full_hi, hi,
        MASKED=True, IS_CAUSAL=IS_CAUSAL, BLOCK_K=BLOCK_K, INPUT_PRECISION=INPUT_PRECISION,
    )

    # l_i >= 1 (the max element contributes exp2(0) = 1), so neither division nor log needs
    # the spec's eps.
    if VARLEN:
        l_i = tl.maximum(l_i, 1.0)  # only a skipped tile has l_i = 0; it stores nothing
    acc = acc / l_i[:, None]
    lse = (m_i + tl.log2(l_i)) / 1.4426950408889634  # back to natural log

    o_ptrs = o_base + offs_q[:, None].to(tl.int64) * stride_on + offs_d[None, :]
    tl.store(o_ptrs, acc.to(Out.dtype.element_ty), mask=mask_q[:, None] & mask_d[None, :])
    tl.store(lse_base + offs_q.to(tl.int64) * stride_ln, lse, mask=mask_q)


class ForwardConfig(NamedTuple):
    """Launch parameters of the forward kernel (tile sizes, warps, pipeline stages)."""

    block_q: int
    block_k: int
    num_warps: int
    num_stages: int


def forward_config(head_dim: int, dtype: torch.dtype) -> ForwardConfig:
    """Default launch parameters, keyed on the padded head dim and the dtype.

    16-bit inputs up to d = 128: 128 query rows per program (8 warps) and 64-wide key tiles in a
    3-stage pipeline, chosen with ``python -m benchmarks.tune`` on an H200 (2026-11-30, Triton
    3.6): over the quick grid's d = 64 shapes it beat the spec's 64x64 tiles by 10-23% and every
    other candidate, and at d = 128 it was within 5% of the best at n = 1024 (the README has the
    numbers). A float32 tile takes twice the shared memory of a 16-bit one, and with d = 256 the q
    tile and two pipelined k/v tiles would not fit in an H100's 228 KB: those keep the untuned
    64-row tiles, with one stage and 32-wide key tiles where memory is short.
    """
    block_d = padded_head_dim(head_dim)
    if dtype == torch.float32:
        if block_d >= 128:
            return ForwardConfig(64, 32, 8 if block_d == 256 else 4, 1)
        return ForwardConfig(64, 64, 4, 2)
    if block_d == 256:
        return ForwardConfig(64, 64, 8, 1)
    return ForwardConfig(128, 64, 8, 3)


def padded_head_dim(head_dim: int) -> int:
    """The head dim the kernel computes with: the next power of two, at least 16 (``tl.dot``'s minimum)."""
    return max(16, triton.next_power_of_2(head_dim))


def offset_alignment(*tensors: torch.Tensor) -> int:
    """The largest power of two, at most 16, that divides every slice offset of every tensor.

    A slice offset (:func:`slice_offsets`) is a sum of leading-dim strides times indices, so a
    power of two divides them all iff it divides every leading stride of a dim longer than one.
    The kernels pass it to ``tl.multiple_of``: that lets the compiler use 16-byte vector loads
    (and asynchronous copies) from a slice start it reads from memory. Claiming more than is true
    would make those loads misaligned, so it is computed, never assumed.
    """
    align = 16
    for t in tensors:
        for size, stride in zip(t.shape[:-2], t.stride()[:-2]):
            if size > 1 and stride:
                align = min(align, stride & -stride)  # the lowest set bit: largest power of two dividing it
    return align


def slice_offsets(t: torch.Tensor) -> torch.Tensor:
    """Element offset of each ``[n, d]`` slice of ``t``, in the row-major order of its leading dims.

    This is what lets the kernel take any leading layout (batch and heads in either order, a
    stride-0 broadcast dim, a sliced batch) without a ``.contiguous()`` copy. The table depends
    only on the leading sizes and strides, so it is built once per layout and device and cached.
    """
    return _slice_offsets(tuple(t.shape[:-2]), tuple(t.stride()[:-2]), t.device)


@functools.lru_cache(maxsize=256)
def _slice_offsets(sizes: tuple[int, ...], strides: tuple[int, ...], device: torch.device) -> torch.Tensor:
    # Built on the CPU and copied once: building it on the GPU took a dozen tiny kernel launches
    # per tensor per call, a measurable share of a short attention call. The copy from pageable
    # memory is synchronous, so the cached tensor is complete before any stream reads it.
    offsets = torch.zeros((), dtype=torch.int64)
    for size, stride in zip(sizes, strides):
        offsets = offsets.unsqueeze(-1) + torch.arange(size, dtype=torch.int64) * stride
    return offsets.reshape(-1).to(device)


def flash_attention_forward(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    is_causal: bool = False,
    *,
    block_q: int | None = None,
    block_k: int | None = None,
    num_warps: int | None = None,
    num_stages: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Run the forward kernel: ``o = softmax(q k^T / sqrt(d)) v`` and its row log-sum-exp.

    Args:
        q: ``[..., n_q, d]`` queries.
        k: ``[..., n_k, d]`` keys, same leading dims and dtype as ``q``.
        v: ``[..., n_k, d]`` values.
        is_causal: mask key ``j`` from query ``i`` when ``j > i`` (top-left aligned).
        block_q, block_k: tile sizes (powers of two, at least 16); default from
            :func:`forward_config` (128x64 for 16-bit inputs up to d = 128; the spec's 64x64
            for float32).
        num_warps, num_stages: Triton launch options; default from :func:`forward_config`.

    Returns:
        ``o`` of shape ``[..., n_q, d]`` in the input dtype (contiguous), and ``lse`` of shape
        ``[..., n_q]`` in float32.
    """
    check_inputs(q, k, v, is_causal)
    *lead, n_q, d = q.shape
    n_k = k.shape[-2]
    batch = math.prod(lead)
    o = torch.empty((*lead, n_q, d), dtype=q.dtype, device=q.device)
    lse = torch.empty((*lead, n_q), dtype=torch.float32, device=q.device)
    q_off = slice_offsets(q)
    launch_forward(
        q, k, v, o, lse, q_off, slice_offsets(k), slice_offsets(v), None, None,
        o_strides=(n_q * d, d), lse_strides=(n_q, 1), n_q=n_q, n_k=n_k, slices=batch,
        sequences=1, is_causal=is_causal, block_q=block_q, block_k=block_k,
        num_warps=num_warps, num_stages=num_stages,
    )
    return o, lse


def launch_forward(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, o: torch.Tensor, lse: torch.Tensor,
    q_offsets: torch.Tensor, k_offsets: torch.Tensor, v_offsets: torch.Tensor,
    cu_seqlens_q: torch.Tensor | None, cu_seqlens_k: torch.Tensor | None,
    *, o_strides: tuple[int, int], lse_strides: tuple[int, int], n_q: int, n_k: int,
    slices: int, sequences: int, is_causal: bool, block_q: int | None = None,
    block_k: int | None = None, num_warps: int | None = None, num_stages: int | None = None,
) -> None:
    """Launch the forward kernel over ``slices`` slices (times ``sequences`` packed sequences).

    Dense input: one ``[n_q, d]`` matrix per slice, starting at ``q_offsets[s]``; ``n_q``, ``n_k``
    are its lengths. Packed (varlen) input, ``cu_seqlens_*`` given: a slice is a head, sequence
    ``b`` holds its rows ``cu_seqlens_q[b]:cu_seqlens_q[b + 1]``, and ``n_q``, ``n_k`` are the
    longest lengths (the grid's size). ``o_strides``, ``lse_strides``: element strides of o and
    lse between slices and between rows. The caller has checked every argument.
    """
    d = q.shape[-1]
    config = forward_config(d, q.dtype)
    block_q = config.block_q if block_q is None else block_q
    block_k = config.block_k if block_k is None else block_k
    for name, block in (("block_q", block_q), ("block_k", block_k)):
        if block < 16 or block & (block - 1):
            raise ValueError(f"{name} must be a power of two >= 16, got {block}")
    num_q_tiles = triton.cdiv(n_q, block_q)
    if num_q_tiles * slices * sequences == 0:
        return  # packed input whose every query sequence is empty: nothing to compute
    varlen = cu_seqlens_q is not None
    _flash_forward_kernel[(num_q_tiles * slices * sequences,)](
        q, k, v, o, lse,
        q_offsets, k_offsets, v_offsets,
        cu_seqlens_q if varlen else q_offsets, cu_seqlens_k if varlen else q_offsets,
        q.stride(-2), q.stride(-1), k.stride(-2), k.stride(-1), v.stride(-2), v.stride(-1),
        *o_strides, *lse_strides,
        n_q, n_k, d, num_q_tiles, slices,
        LOG2E / math.sqrt(d),
        IS_CAUSAL=is_causal,
        VARLEN=varlen,
        BLOCK_Q=block_q,
        BLOCK_K=block_k,
        BLOCK_D=padded_head_dim(d),
        INPUT_PRECISION="ieee" if q.dtype == torch.float32 else "tf32",
        OFFSET_ALIGN=offset_alignment(q, k, v),
        num_warps=config.num_warps if num_warps is None else num_warps,
        num_stages=config.num_stages if num_stages is None else num_stages,
    )
