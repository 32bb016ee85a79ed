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
- the contract's features (:mod:`flash.scores`): a softmax ``scale``; grouped-query heads (k, v
  with ``h_kv`` heads, ``h_q % h_kv == 0``: query head ``h`` reads kv head ``h // (h_q // h_kv)``
  in place, through the slice-offset table, never a copy); causal masking **top-left aligned** by
  default (query ``i`` sees key ``j`` iff ``j <= i``, as ``scaled_dot_product_attention``) or
  ``causal_alignment="bottom_right"`` (``j <= i + n_k - n_q``, FlashAttention-2's); sliding
  windows ``(left, right)``; a ``softcap``. A window or bottom-right mask is a band of keys per
  row: a program visits only the key tiles its band reaches, unmasked where every row sees the
  tile whole and masked on the band's edges;
- a row that sees no key (a window past the keys, bottom-right with ``n_q > n_k``) stores ``o = 0``
  and ``lse = -inf``, never NaN;
- it stores the output (in the input dtype) and the row log-sum-exp ``lse`` (float32, natural log)
  of the (capped) scaled scores, ``lse_i = log sum_j exp(s_ij)``, which the backward needs;
- with ``VARLEN`` set (:mod:`flash.varlen`), a slice is one head of packed sequences and each
  program computes a window of it read from ``cu_seqlens``: the same arithmetic on fewer rows;
- it does not support dropout, attention bias or float64.
"""

from __future__ import annotations

import functools
import math
import os
from typing import NamedTuple

import torch
import triton
import triton.language as tl

import flash._runtime  # noqa: F401  (sets TRITON_INTERPRET before the kernel is decorated)
from flash import replay
from flash._runtime import ensure_scratch_allocator
from flash.checks import check_features, check_inputs, check_split_keys
from flash.scores import (
    LOG2E,
    PLAN_FIELDS,
    Features,
    as_vector,
    diagonal,
    key_range,
    resolve,
    scores,
    unmasked_key_range,
    visible,
)

__all__ = ["LOG2E", "ForwardConfig", "flash_attention_forward", "forward_config", "launch_forward"]


@triton.jit
def _attend_key_tiles(
    acc, l_i, m_i, q, k_base, v_base, stride_kn, stride_kd, stride_vn, stride_vd,
    offs_q, offs_d, mask_d, n_k, qk_scale, cap_log2, lo_diag, hi_diag, lo, hi,
    MASKED: tl.constexpr,
    HAS_LEFT: tl.constexpr,
    HAS_RIGHT: tl.constexpr,
    SOFTCAP: tl.constexpr,
    EMPTY_ROWS: tl.constexpr,
    BLOCK_K: tl.constexpr,
    INPUT_PRECISION: tl.constexpr,
    TMA: tl.constexpr = False,
):
    """The online softmax over key tiles ``[lo, hi)``; returns the updated ``acc, l_i, m_i``.

    ``MASKED=False`` is for tiles that every row sees whole (no key past ``n_k``, none outside a
    row's band): no mask is built, loaded or applied. ``MASKED=True`` hides keys past ``n_k`` and
    outside the band (:func:`flash.scores.visible`). With ``TMA``, ``k_base`` and ``v_base`` are
    tensor descriptors of the slice's ``[n_k, d]`` k and v (built in :func:`_flash_forward_kernel`,
    where :func:`tma_eligible` allowed them), whose loads
    fill the rows past ``n_k`` and the columns past ``d`` with zeros, as the masked loads do.
    """
    offs_k = tl.arange(0, BLOCK_K)
    for start_k in range(lo, hi, BLOCK_K):
        cols = start_k + offs_k
        mask_k = cols < n_k
        # -- load k transposed, [D, BK], so that q @ kt is [BQ, BK] --
        if TMA:
            kt = k_base.load([start_k, 0]).T
            v = v_base.load([start_k, 0])
        else:
            kt_ptrs = k_base + cols[None, :].to(tl.int64) * stride_kn + offs_d[:, None] * stride_kd
            v_ptrs = v_base + cols[:, None].to(tl.int64) * stride_vn + offs_d[None, :] * stride_vd
            if MASKED:
                kt = tl.load(kt_ptrs, mask=mask_d[:, None] & mask_k[None, :], other=0.0)
                v = tl.load(v_ptrs, mask=mask_k[:, None] & mask_d[None, :], other=0.0)
            else:
                kt = tl.load(kt_ptrs, mask=mask_d[:, None], other=0.0)
                v = tl.load(v_ptrs, mask=mask_d[None, :], other=0.0)
        # -- scores (base 2, softcapped if asked); if masked, hidden keys at -inf --
        s, _ = scores(q, kt, qk_scale, cap_log2, SOFTCAP, INPUT_PRECISION)
        if MASKED:
            seen = visible(mask_k[None, :], offs_q[:, None], cols[None, :], lo_diag, hi_diag,
                           HAS_LEFT, HAS_RIGHT)
            s = tl.where(seen, s, float("-inf"))
        # -- online softmax: rescale what was accumulated to the new row max --
        m_new = tl.maximum(m_i, tl.max(s, 1))
        if EMPTY_ROWS:
            # A row that has seen no key yet has m_new = -inf: subtract 0 instead, so that
            # exp2(-inf - 0) = 0 and not exp2(-inf - (-inf)) = NaN. Without EMPTY_ROWS every row
            # sees a key of the first tile visited (key 0, or the first key of its band).
            m_use = tl.where(m_new == float("-inf"), 0.0, m_new)
        else:
            m_use = m_new
        alpha = tl.exp2(m_i - m_use)
        p = tl.exp2(s - m_use[:, None])
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
    PLAN,  # SPLIT_KV: int32 [B, 5] split plans (flash.decode); the split-KV path's sequences
    stride_qn, stride_qd, stride_kn, stride_kd, stride_vn, stride_vd,
    stride_os, stride_on,  # o: element stride between slices and between rows
    stride_ls, stride_ln,  # lse: element stride between slices and between rows
    N_Q, N_K, HEAD_DIM, num_q_tiles, num_slices,
    qk_scale,  # scale * log2(e): scores live in base 2 inside the kernel (scale / c with SOFTCAP)
    cap_log2,  # SOFTCAP: c * log2(e)
    win_left, win_right,  # the band (flash.scores): keys c_i - left ..= c_i + right, if flagged
    SOFTCAP: tl.constexpr,
    HAS_LEFT: tl.constexpr,
    HAS_RIGHT: tl.constexpr,
    BOTTOM_RIGHT: tl.constexpr,
    EMPTY_ROWS: tl.constexpr,
    VARLEN: tl.constexpr,
    SPLIT_KV: tl.constexpr,  # VARLEN: skip the sequences that PLAN splits (flash.decode does them)
    BLOCK_Q: tl.constexpr,
    BLOCK_K: tl.constexpr,
    BLOCK_D: tl.constexpr,
    INPUT_PRECISION: tl.constexpr,
    OFFSET_ALIGN: tl.constexpr,  # a power of two that divides every slice offset (in elements)
    TMA: tl.constexpr = False,  # read k and v through tensor descriptors (tma_eligible)
):
    # One program per (query tile, slice[, sequence]). The query tile varies fastest, so programs
    # that run side by side read the same K/V slice and share it in L2. (A grouped-query slice
    # reads its kv head's slice: K_OFFSETS and V_OFFSETS are indexed by query slice.)
    pid = tl.program_id(0)
    pid_q = pid % num_q_tiles
    pid_b = pid // num_q_tiles
    if HAS_RIGHT:
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

    # Row i sees keys i + lo_diag ..= i + hi_diag (flash.scores). Key tiles are visited in three
    # runs: [lo, full_lo) masked, [full_lo, full_hi) unmasked, [full_hi, hi) masked. The unmasked
    # run holds the tiles every row of this query tile sees whole: before n_k, after the last
    # row's lower bound and before the first row's upper bound, so they need no mask at all. The
    # masked runs hold the rest: the band's edges (the causal diagonal) and the partial last key
    # tile. Tiles no row sees are never visited.
    diag = diagonal(n_q, n_k, BOTTOM_RIGHT)
    lo_diag = diag - win_left
    hi_diag = diag + win_right
    first_row = pid_q * BLOCK_Q
    last_row = first_row + BLOCK_Q - 1
    lo, hi = key_range(first_row, last_row, n_k, lo_diag, hi_diag, BLOCK_K, HAS_LEFT, HAS_RIGHT)
    if VARLEN:
        # The grid is sized for the longest sequence; a tile past the end of a shorter one has
        # no row to compute, so it skips every run and stores nothing (every row is masked).
        hi = tl.where(first_row < n_q, hi, lo)
        if SPLIT_KV:
            # The split-KV path computes and stores this sequence: nothing to do, nothing to store.
            split = tl.load(PLAN + seq * PLAN_FIELDS) > 0
            hi = tl.where(split, lo, hi)
            mask_q = mask_q & ~as_vector(split, offs_q)
    full_lo, full_hi = unmasked_key_range(first_row, last_row, n_k, lo_diag, hi_diag, lo, hi,
                                          BLOCK_K, HAS_LEFT, HAS_RIGHT)
    if TMA:
        # The slice's [n_k, d] k and v as tensor descriptors: the copy engine fetches whole tiles,
        # zero past n_k and d (the host checked the alignments TMA needs: tma_eligible).
        k_base = tl.make_tensor_descriptor(k_base, shape=[n_k, HEAD_DIM], strides=[stride_kn, 1],
                                           block_shape=[BLOCK_K, BLOCK_D])
        v_base = tl.make_tensor_descriptor(v_base, shape=[n_k, HEAD_DIM], strides=[stride_vn, 1],
                                           block_shape=[BLOCK_K, BLOCK_D])

    acc, l_i, m_i = _attend_key_tiles(
        acc, l_i, m_i, q, k_base, v_base, stride_kn, stride_kd, stride_vn, stride_vd,
        offs_q, offs_d, mask_d, n_k, qk_scale, cap_log2, lo_diag, hi_diag, lo, full_lo,
        MASKED=True, HAS_LEFT=HAS_LEFT, HAS_RIGHT=HAS_RIGHT, SOFTCAP=SOFTCAP,
        EMPTY_ROWS=EMPTY_ROWS, BLOCK_K=BLOCK_K, INPUT_PRECISION=INPUT_PRECISION, TMA=TMA,
    )
    acc, l_i, m_i = _attend_key_tiles(
        acc, l_i, m_i, q, k_base, v_base, stride_kn, stride_kd, stride_vn, stride_vd,
        offs_q, offs_d, mask_d, n_k, qk_scale, cap_log2, lo_diag, hi_diag, full_lo, full_hi,
        MASKED=False, HAS_LEFT=HAS_LEFT, HAS_RIGHT=HAS_RIGHT, SOFTCAP=SOFTCAP,
        EMPTY_ROWS=EMPTY_ROWS, BLOCK_K=BLOCK_K, INPUT_PRECISION=INPUT_PRECISION, TMA=TMA,
    )
    acc, l_i, m_i = _attend_key_tiles(
        acc, l_i, m_i, q, k_base, v_base, stride_kn, stride_kd, stride_vn, stride_vd,
        offs_q, offs_d, mask_d, n_k, qk_scale, cap_log2, lo_diag, hi_diag, full_hi, hi,
        MASKED=True, HAS_LEFT=HAS_LEFT, HAS_RIGHT=HAS_RIGHT, SOFTCAP=SOFTCAP,
        EMPTY_ROWS=EMPTY_ROWS, BLOCK_K=BLOCK_K, INPUT_PRECISION=INPUT_PRECISION, TMA=TMA,
    )

    # A row that saw a key has l_i >= 1 (its max contributes exp2(0) = 1), so neither the
    # division nor the log needs the spec's eps. A row that saw none (EMPTY_ROWS) has l_i = 0
    # and acc = 0: it stores o = 0 and lse = -inf. (A varlen tile past its sequence's end has
    # l_i = 0 too, and stores nothing.)
    if EMPTY_ROWS or VARLEN:
        empty = l_i == 0.0
        l_i = tl.where(empty, 1.0, l_i)
    acc = acc / l_i[:, None]
    lse = (m_i + tl.log2(l_i)) / 1.4426950408889634  # back to natural log
    if EMPTY_ROWS:
        lse = tl.where(empty, float("-inf"), lse)

    o_ptrs = o_base + offs_q[:, None].to(tl.int64) * stride_on + offs_d[None, :]
    tl.store(o_ptrs, acc.to(Out.dtype.element_ty), mask=mask_q[:, None] & mask_d[None, :])
    tl.store(lse_base + offs_q.to(tl.int64) * stride_ln, lse, mask=mask_q)


class ForwardConfig(NamedTuple):
    """Launch parameters of the forward kernel (tile sizes, warps, pipeline stages)."""

    block_q: int
    block_k: int
    num_warps: int
    num_stages: int


NARROW_WINDOW = 4096
"""A lower window bound below this many keys takes the smaller tiles of :func:`forward_config`."""


def forward_config(head_dim: int, dtype: torch.dtype, features: Features | None = None) -> ForwardConfig:
    """Default launch parameters, keyed on the padded head dim, the dtype and the features (a
    softcap, a window), never on the layout of the inputs or the read path it allows.

    Why not the read path: ``flash`` declares ``BATCH_INVARIANT`` (a slice alone is bit for bit its
    part of a batched call, a GQA call its call with k and v repeated), and whether the descriptors
    can read an input depends on its layout: a slice of a ``gapped`` batch alone is eligible where
    the batch is not (the slice offsets are not 16-byte aligned), k and v repeated per group are
    where a ``strided`` k is not. Tiles of another width sum the online softmax in another order,
    so the two calls differed in the last bits: the H200's ``pytest -m gpu`` of 2026-12-05 found it
    (``check_batch_independent``, float16, d = 96, ``gapped``: 4276 of 24672 elements) and so did its
    fuzz report (``check_gqa_matches_repeated_kv``, ``strided``). With the same tiles both read paths
    compute the same products in the same order.

    16-bit inputs up to d = 64 (and d = 128 before the descriptors, below): 128 query rows per
    program (8 warps) and 64-wide key tiles in a 3-stage pipeline, chosen with ``python -m
    benchmarks.tune`` on an H200 (2026-11-30, Triton 3.6): over the quick grid's d = 64 shapes it
    beat the spec's 64x64 tiles by 10-23% and every other candidate, and at d = 128 it was within
    5% of the best at n = 1024 (the README has the numbers). A float32 tile takes twice the shared
    memory of a 16-bit one, and with d = 256 the q tile and two pipelined k/v tiles would not fit
    in an H100's 228 KB: those keep the untuned 64-row tiles, with one stage and 32-wide key
    tiles where memory is short.

    16-bit inputs with a padded d of 128 (read through tensor descriptors where
    :func:`tma_eligible` allows, else by pointers): 128x128 tiles, 8 warps, 3 stages. Measured on the H200
    (2026-12-03, bf16, one run, docs/speed.md): 505 TFLOP/s at B=4 H=16 n=4096 non-causal against
    460 for the descriptors with 128x64 tiles and 427 for the pointer path with 128x64 tiles;
    448 / 409 / 376 causal; 532-540 against 438-440 at n=16384. (With 2 stages ptxas crashed; at
    d = 64 the descriptors gained 3% non-causal and lost 25-39% causal, so d = 64 keeps the
    pointer path.) The pointer path, for layouts the descriptors cannot read, ran 128x128 tiles
    at -4% to +9% of its speed with 128x64 (``benchmarks/compare_read_paths.py``, same page:
    251-452 TFLOP/s against 261-428), so sharing them costs those layouts little.

    16-bit up to d = 128 with a softcap (at a padded d of 128) or a lower window bound under
    :data:`NARROW_WINDOW` keys: 64x64 tiles, 4 warps, 3 stages. Measured on the H200 (2026-12-03,
    bf16, b=1 h=16 n=16384 causal, one run per experiment, docs/speed.md, "Tiles for the
    features"): softcap 30 at d = 128, 3.72-3.79 ms against 4.76 ms for the 128x128 tiles (the
    tanh makes the scores' arithmetic the bound, and smaller programs keep more of it in flight;
    at d = 64 no candidate beat the default by more than 3.5%, so a softcap alone keeps it there);
    window (1023, 0), 0.236 ms against 0.315 at d = 64 and 0.371 against 0.410 at d = 128 (a
    program's 128 rows span 128 more keys of the band than one row does, a large share of a
    narrow band). Only a 1023-key window was measured; the bound of 4096 keys, past which the band
    is long enough for the larger tiles' efficiency to win as it does causal, is a judgement.
    """
    block_d = padded_head_dim(head_dim)
    softcap = features is not None and features.softcap != 0
    narrow = features is not None and 0 <= features.left < NARROW_WINDOW
    if dtype != torch.float32 and block_d <= 128 and (narrow or (block_d == 128 and softcap)):
        return ForwardConfig(64, 64, 4, 3)
    if dtype != torch.float32 and block_d == 128:
        return ForwardConfig(128, 128, 8, 3)
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


def slice_offsets(t: torch.Tensor, group: int = 1) -> torch.Tensor:
    """Element offset of each ``[n, d]`` slice of ``t``, in the row-major order of its leading dims,
    each repeated ``group`` times.

    This is what lets the kernel take any leading layout (batch and heads in either order, a
    stride-0 broadcast dim, a sliced batch) without a ``.contiguous()`` copy. With ``group`` > 1
    it is the table of a kv tensor indexed by *query* slice: the heads are the last leading dim,
    so query slice ``s`` of ``[..., h_q]`` uses kv slice ``s // group`` of ``[..., h_kv]`` (query
    head ``h`` uses kv head ``h // group``), and grouped-query attention copies nothing either.
    The table depends only on the leading sizes and strides, so it is built once per layout and
    device and cached.
    """
    return _slice_offsets(tuple(t.shape[:-2]), tuple(t.stride()[:-2]), t.device, group)


@functools.lru_cache(maxsize=256)
def _slice_offsets(sizes: tuple[int, ...], strides: tuple[int, ...], device: torch.device,
                   group: int = 1) -> torch.Tensor:
    # Built on the CPU and copied once: building it on the GPU took a dozen tiny kernel launches
    # per tensor per call, a measurable share of a short attention call. The copy from pageable
    # memory is synchronous, so the cached tensor is complete before any stream reads it.
    offsets = torch.zeros((), dtype=torch.int64)
    for size, stride in zip(sizes, strides):
        offsets = offsets.unsqueeze(-1) + torch.arange(size, dtype=torch.int64) * stride
    return offsets.reshape(-1).repeat_interleave(group).to(device)


def flash_attention_forward(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    is_causal: bool = False,
    *,
    scale: float | None = None,
    window: tuple[int, int] | None = None,
    softcap: float | None = None,
    causal_alignment: str = "top_left",
    block_q: int | None = None,
    block_k: int | None = None,
    num_warps: int | None = None,
    num_stages: int | None = None,
    split_keys: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Run the forward kernel: ``o = softmax(scale q k^T) v`` and its row log-sum-exp.

    Args:
        q: ``[..., h_q, n_q, d]`` queries.
        k: ``[..., h_kv, n_k, d]`` keys, same dtype as ``q`` and the same leading dims but the
            heads, ``h_q % h_kv == 0`` (grouped-query attention when ``h_kv < h_q``).
        v: ``[..., h_kv, n_k, d]`` values.
        is_causal: mask key ``j`` from query ``i`` when ``j > c_i``.
        scale, window, softcap, causal_alignment: the contract's features
            (``properties/kernels.py``; :mod:`flash.scores`).
        block_q, block_k: tile sizes (powers of two, at least 16); default from
            :func:`forward_config` (16-bit inputs: 128x64 up to d = 64, 128x128 to d = 128;
            the spec's 64x64 for float32).
        num_warps, num_stages: Triton launch options; default from :func:`forward_config`.
        split_keys: keys per split of the split-KV path (:mod:`flash.decode`), which a call with
            few query rows per kv head and many keys takes; ``None``: its default; ``0``: never.
            (The tile options then apply to the forward path only.)

    Returns:
        ``o`` of shape ``[..., n_q, d]`` in the input dtype (contiguous), and ``lse`` of shape
        ``[..., n_q]`` in float32 (``-inf`` for a row that sees no key, whose ``o`` is 0).
    """
    key = replay.signature(q, k, v, is_causal, scale, window, softcap, causal_alignment, block_q,
                           block_k, num_warps, num_stages, split_keys)
    recording = replay.recorded(key)
    if recording is not None:  # this signature ran before: its checks passed, its launches are known
        tensors = recording.replay(q, k, v)
        return tensors["o"], tensors["lse"]
    check_inputs(q, k, v, is_causal)
    check_features(scale, window, softcap, causal_alignment)
    check_split_keys(split_keys)
    recording = None if key is None else replay.Recording()
    *lead, n_q, d = q.shape
    n_k = k.shape[-2]
    batch = math.prod(lead)
    o = replay.empty(recording, "o", (*lead, n_q, d), q.dtype, q.device)
    lse = replay.empty(recording, "lse", (*lead, n_q), torch.float32, q.device)
    group = group_size(q, k)
    features = resolve(d, is_causal, scale, window, softcap, causal_alignment)
    offsets = slice_offsets(q), slice_offsets(k, group), slice_offsets(v, group)
    from flash.decode import launch_split_kv, split_plans  # here: flash.decode imports this module

    plans = split_plans([n_q], [n_k], features, split_keys, q.device)
    if plans is not None:
        launch_split_kv(q, k, v, o, lse, *offsets, None, None, plans, o_strides=(n_q * d, d),
                        lse_strides=(n_q, 1), n_q=n_q, n_k=n_k, slices=batch, sequences=1,
                        group=group, features=features, split_keys=split_keys, recording=recording)
    else:
        launch_forward(
            q, k, v, o, lse, *offsets, None, None, o_strides=(n_q * d, d), lse_strides=(n_q, 1),
            n_q=n_q, n_k=n_k, slices=batch, sequences=1, features=features,
            block_q=block_q, block_k=block_k, num_warps=num_warps, num_stages=num_stages,
            recording=recording,
        )
    if recording is not None:
        replay.remember(key, recording)
    return o, lse


def group_size(q: torch.Tensor, k: torch.Tensor) -> int:
    """Query heads per kv head: ``h_q // h_kv`` (dim -3 of ``[..., h, n, d]``; 1 below rank 3)."""
    return q.shape[-3] // k.shape[-3] if q.dim() >= 3 else 1


def launch_forward(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, o: torch.Tensor, lse: torch.Tensor,
    q_offsets: torch.Tensor, k_offsets: torch.Tensor, v_offsets: torch.Tensor,
    cu_seqlens_q: torch.Tensor | None, cu_seqlens_k: torch.Tensor | None,
    *, o_strides: tuple[int, int], lse_strides: tuple[int, int], n_q: int, n_k: int,
    slices: int, sequences: int, features: Features, block_q: int | None = None,
    block_k: int | None = None, num_warps: int | None = None, num_stages: int | None = None,
    split_plan_table: torch.Tensor | None = None, recording: replay.Recording | None = None,
) -> None:
    """Launch the forward kernel over ``slices`` query slices (times ``sequences`` packed sequences).

    Dense input: one ``[n_q, d]`` matrix per slice, starting at ``q_offsets[s]``, attending to the
    k and v matrices at ``k_offsets[s]``, ``v_offsets[s]`` (indexed by query slice, so grouped
    heads are offsets repeated per group); ``n_q``, ``n_k`` are their lengths. Packed (varlen)
    input, ``cu_seqlens_*`` given: a slice is a head, sequence ``b`` holds its rows
    ``cu_seqlens_q[b]:cu_seqlens_q[b + 1]``, and ``n_q``, ``n_k`` are the longest lengths (the
    grid's size). ``o_strides``, ``lse_strides``: element strides of o and lse between slices and
    between rows. ``split_plan_table`` (packed input only): the sequences it splits
    (:func:`flash.decode.split_plans`) are skipped, left to the split-KV path. The caller has
    checked every argument.
    """
    d = q.shape[-1]
    block_d = padded_head_dim(d)
    tma = tma_eligible(k, v, block_d)
    config = forward_config(d, q.dtype, features)  # the same tiles whichever path reads k and v
    block_q = config.block_q if block_q is None else block_q
    block_k = config.block_k if block_k is None else block_k
    for name, block in (("block_q", block_q), ("block_k", block_k)):
        if block < 16 or block & (block - 1):
            raise ValueError(f"{name} must be a power of two >= 16, got {block}")
    num_q_tiles = triton.cdiv(n_q, block_q)
    if num_q_tiles * slices * sequences == 0:
        return  # packed input whose every query sequence is empty: nothing to compute
    varlen = cu_seqlens_q is not None
    args = (
        q, k, v, o, lse,
        q_offsets, k_offsets, v_offsets,
        cu_seqlens_q if varlen else q_offsets, cu_seqlens_k if varlen else q_offsets,
        q_offsets if split_plan_table is None else split_plan_table,
        q.stride(-2), q.stride(-1), k.stride(-2), k.stride(-1), v.stride(-2), v.stride(-1),
        *o_strides, *lse_strides,
        n_q, n_k, d, num_q_tiles, slices,
    )
    meta = dict(
        **features.kernel_args(varlen, n_q, n_k),
        VARLEN=varlen,
        SPLIT_KV=split_plan_table is not None,
        BLOCK_Q=block_q,
        BLOCK_K=block_k,
        BLOCK_D=block_d,
        INPUT_PRECISION="ieee" if q.dtype == torch.float32 else "tf32",
        OFFSET_ALIGN=offset_alignment(q, k, v),
        TMA=tma,
        num_warps=config.num_warps if num_warps is None else num_warps,
        num_stages=config.num_stages if num_stages is None else num_stages,
    )
    if meta["TMA"]:
        ensure_scratch_allocator()
    replay.launch(_flash_forward_kernel, num_q_tiles * slices * sequences, args, meta,
                  ("q", "k", "v", "o", "lse"), recording)


TMA: bool = os.environ.get("FLASH_TMA", "1") != "0"
"""Read k and v through tensor descriptors where :func:`tma_eligible` allows (``FLASH_TMA=0`` in the
environment, or ``False`` here: never; set it before the first call of a shape, whose launch the
replay keeps)."""


def tma_eligible(k: torch.Tensor, v: torch.Tensor, block_d: int) -> bool:
    """Whether the forward may read ``k`` and ``v`` through tensor descriptors (TMA).

    A descriptor needs its base and every stride but the last 16-byte aligned and the last stride
    1: each slice's base is ``data_ptr`` plus a slice offset (a multiple of
    :func:`offset_alignment`) plus a row times the row stride (packed input: the sequence's first
    row). Only 16-bit inputs with a padded head dim of 128, where it was measured faster
    (:func:`forward_config`); the others keep the pointer path, which takes any layout.
    """
    if not TMA or k.dtype not in (torch.float16, torch.bfloat16) or block_d != 128:
        return False
    size = k.element_size()
    for t in (k, v):
        if t.stride(-1) != 1 or t.stride(-2) <= 0 or (t.stride(-2) * size) % 16 \
                or t.data_ptr() % 16:
            return False
    return (offset_alignment(k, v) * size) % 16 == 0
