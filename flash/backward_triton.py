"""The Triton backward kernels of Flash Attention (FlashAttention-2 style) and their launcher.

Given the saved ``q, k, v, o``, the forward's row log-sum-exp ``lse`` and the upstream gradient
``do``, with ``S = scale * q k^T`` and ``P = exp(S - lse)`` recomputed tile by tile:

    D = rowsum(do * o),   dv = P^T do,   dP = do v^T,   dS = P * (dP - D),
    dq = scale * dS k,    dk = scale * dS^T q

in three launches, none of which allocates anything of size ``n_q x n_k``:

1. ``_backward_preprocess_kernel``: ``D`` (float32, ``[B, n_q]``), one program per query tile;
2. ``_backward_dkdv_kernel``: one program per (key tile, leading index) holds its k and v tiles and
   the ``dk``, ``dv`` accumulators, and streams over the query tiles that can see it;
3. ``_backward_dq_kernel``: one program per (query tile, leading index) holds q, do and the ``dq``
   accumulator, and streams over the key tiles it can see.

Caution, what this backward does and does not do:

- it covers what the forward covers (:mod:`flash.forward`): any leading dims and strides
  (including stride 0 on a leading dim, and any strides of ``do``), nothing copied; any
  ``n_q, n_k >= 1``; float16, bfloat16, float32 (float32 products in IEEE fp32, not TF32); head
  dims 1..256, padded to a power of two and masked; every feature of the forward (scale, grouped
  heads, bottom-right alignment, windows, softcap with tanh's derivative ``1 - tanh^2``), and rows
  that see no key (lse ``-inf``) get zero gradients, not NaN;
- it is **deterministic**: every element of ``dq``, ``dk``, ``dv`` is written by exactly one
  program, which sums its tiles in a fixed order; there are no atomics, so two calls on the same
  inputs (and the same tile sizes) give bit-identical gradients;
- a key tile visits only the query tiles whose band reaches it, and a query tile only the key
  tiles its band reaches, as in the forward; keys that no query sees (causal with ``n_k > n_q``,
  outside every window) get ``dk = dv = 0``; as in the forward, the tiles seen whole (every row
  of the query tile sees every key of the key tile, none past the end) run without masks, and
  only the band's edges and the last partial tile are masked (:func:`flash.scores.unmasked_key_range`,
  :func:`flash.scores.unmasked_query_range`), but where one masked loop measured faster
  (:func:`loop_shape`: d > 64 with a band, plain multi-head, aligned lengths). A masked tile
  zeroes hidden entries of ``P`` after the exponential, so a tile seen whole gets the same bits
  masked or not, and the choice of loops changes no bit of the gradients;
- grouped heads: one dk/dv program per (key tile, kv head) sums the group's query heads in a fixed
  order, so it stays deterministic and writes each kv row once;
- ``dk``, ``dv`` come back contiguous in the *shape* of ``k``, ``v``: for a stride-0 broadcast
  ``k`` that is the expanded shape, which is what autograd expects of the gradient of a view;
- 16-bit inputs: ``P`` and ``dS`` are rounded to the input dtype before their products, as the
  forward rounds ``P``; accumulators are float32;
- packed variable-length input (:mod:`flash.varlen`) runs the same kernels with ``VARLEN`` set:
  each program works on one sequence's window of a head, found from ``cu_seqlens``;
- it does not support dropout, attention bias or float64.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
import triton
import triton.language as tl

import flash._runtime  # noqa: F401  (sets TRITON_INTERPRET before the kernels are decorated)
from flash.forward import group_size, offset_alignment, padded_head_dim, slice_offsets
from flash.scores import (
    Features,
    diagonal,
    key_range,
    lse_base2,
    query_range,
    resolve,
    scores,
    unmasked_key_range,
    unmasked_query_range,
    visible,
)


@triton.jit
def _window(pid_b, CU_Q, CU_K, N_Q, N_K, num_slices, VARLEN: tl.constexpr):
    """(slice, first query row, first key row, n_q, n_k) of a program's ``pid_b``.

    Dense input: the slice is ``pid_b`` and its window is all of it. Packed (varlen) input:
    ``pid_b`` counts (sequence, slice) pairs; the window is that sequence's rows of the slice.
    """
    # One return after the branches: a return inside a constexpr branch followed by another is
    # mishandled by some Triton versions.
    if VARLEN:
        seq = pid_b // num_slices
        start_q = tl.load(CU_Q + seq)
        start_k = tl.load(CU_K + seq)
        n_q = tl.load(CU_Q + seq + 1) - start_q
        n_k = tl.load(CU_K + seq + 1) - start_k
        slice_ = pid_b % num_slices
        row_q = start_q.to(tl.int64)
        row_k = start_k.to(tl.int64)
    else:
        slice_ = pid_b
        row_q = 0
        row_k = 0
        n_q = N_Q
        n_k = N_K
    return slice_, row_q, row_k, n_q, n_k


ONE_LOOP_ALIGN = 16
"""A dense call runs the backward's one masked loop only if both lengths are multiples of this
(:func:`loop_shape`)."""


@triton.jit
def _backward_preprocess_kernel(
    Out, DO, Delta,
    O_OFFSETS, DO_OFFSETS,  # int64 [S]: where each slice's [n_q, d] matrix starts
    CU_Q, CU_K,  # VARLEN: int32 [B + 1] sequence starts; else unused
    stride_on, stride_od, stride_don, stride_dod,
    stride_ls, stride_ln,  # Delta (laid out as lse): element strides between slices and rows
    N_Q, HEAD_DIM, num_q_tiles, num_slices,
    VARLEN: tl.constexpr,
    BLOCK_Q: tl.constexpr,
    BLOCK_D: tl.constexpr,
    OFFSET_ALIGN: tl.constexpr,  # divides every slice offset (flash.forward.offset_alignment)
):
    # D_i = sum_d do_id * o_id, in float32: the row term of dS = P * (dP - D).
    pid = tl.program_id(0)
    pid_q = pid % num_q_tiles
    pid_b, row_q, _, n_q, _ = _window(pid // num_q_tiles, CU_Q, CU_K, N_Q, N_Q, num_slices, VARLEN)
    offs_q = pid_q * BLOCK_Q + tl.arange(0, BLOCK_Q)
    offs_d = tl.arange(0, BLOCK_D)
    mask_q = offs_q < n_q
    mask = mask_q[:, None] & (offs_d < HEAD_DIM)[None, :]
    rows = offs_q[:, None].to(tl.int64) + row_q
    o_base = Out + tl.multiple_of(tl.load(O_OFFSETS + pid_b), OFFSET_ALIGN)
    do_base = DO + tl.multiple_of(tl.load(DO_OFFSETS + pid_b), OFFSET_ALIGN)
    o = tl.load(o_base + rows * stride_on + offs_d[None, :] * stride_od, mask=mask, other=0.0)
    do = tl.load(do_base + rows * stride_don + offs_d[None, :] * stride_dod, mask=mask, other=0.0)
    delta = tl.sum(o.to(tl.float32) * do.to(tl.float32), 1)
    delta_base = Delta + pid_b.to(tl.int64) * stride_ls + row_q * stride_ln
    tl.store(delta_base + offs_q.to(tl.int64) * stride_ln, delta, mask=mask_q)


@triton.jit
def _dkdv_query_tiles(
    dk, dv, k, v, q_base, do_base, lse_base, delta_base, stride_qn, stride_qd, stride_don,
    stride_dod, stride_ln, offs_k, offs_q, offs_d, mask_d, n_q, qk_scale, cap_log2,
    lo_diag, hi_diag, lo, hi,
    MASKED: tl.constexpr,
    HAS_LEFT: tl.constexpr,
    HAS_RIGHT: tl.constexpr,
    SOFTCAP: tl.constexpr,
    BLOCK_Q: tl.constexpr,
    INPUT_PRECISION: tl.constexpr,
):
    """One query head's share of a key tile's ``dk``, ``dv``: the query tiles ``[lo, hi)``, whose
    rows' q, do, lse and D start at ``q_base`` ... ``delta_base``; returns the updated ``dk, dv``.

    ``MASKED=False`` is for query tiles whose every row is before ``n_q`` and sees every key of the
    tile (:func:`flash.scores.unmasked_query_range`): nothing is masked. ``MASKED=True`` hides rows
    past ``n_q`` and the keys outside each row's band. Keys past ``n_k`` are never hidden here: they
    were loaded as zeros, and what they get lands only in their own rows of dk and dv, which are
    not stored.
    """
    for start_q in range(lo, hi, BLOCK_Q):
        rows = start_q + offs_q
        # -- load q and do transposed, [D, BQ]; the rows' lse and D --
        q_ptrs = q_base + rows[None, :].to(tl.int64) * stride_qn + offs_d[:, None] * stride_qd
        do_ptrs = do_base + rows[None, :].to(tl.int64) * stride_don + offs_d[:, None] * stride_dod
        if MASKED:
            mask_q = rows < n_q
            mask_dq = mask_d[:, None] & mask_q[None, :]
            qt = tl.load(q_ptrs, mask=mask_dq, other=0.0)
            do_t = tl.load(do_ptrs, mask=mask_dq, other=0.0)
            lse = tl.load(lse_base + rows.to(tl.int64) * stride_ln, mask=mask_q, other=0.0)
            delta = tl.load(delta_base + rows.to(tl.int64) * stride_ln, mask=mask_q, other=0.0)
        else:
            qt = tl.load(q_ptrs, mask=mask_d[:, None], other=0.0)
            do_t = tl.load(do_ptrs, mask=mask_d[:, None], other=0.0)
            lse = tl.load(lse_base + rows.to(tl.int64) * stride_ln)
            delta = tl.load(delta_base + rows.to(tl.int64) * stride_ln)
        lse = lse_base2(lse)  # base 2, past 2^24 raised above its rounding
        # -- recompute P^T from the saved lse; hidden and out-of-range entries are set to 0 --
        # P, not the scores, is masked: with the scores masked, a tile's P differed in the last
        # bit masked or not (H200, 2026-12-04; the compiler fuses exp2's argument differently),
        # so the gradients depended on the loops chosen (loop_shape) and a packed sequence was
        # not bit for bit itself alone (BATCH_INVARIANT). Masked after exp2 no bit differs. exp2
        # may overflow to inf on a hidden score; where drops it (it is never multiplied). A row
        # that sees no key has lse = -inf and exp2(+inf) everywhere, all of it hidden: so it
        # needs no guard on lse (a guard here was an equivalent mutant and was removed).
        st, tt = scores(k, qt, qk_scale, cap_log2, SOFTCAP, INPUT_PRECISION, ROUNDED=False)
        pt = tl.exp2(st - lse[None, :])
        if MASKED:
            seen = visible(mask_q[None, :], rows[None, :], offs_k[:, None], lo_diag, hi_diag,
                           HAS_LEFT, HAS_RIGHT)
            pt = tl.where(seen, pt, 0.0)
        # -- dv += P^T do --
        dv += tl.dot(pt.to(do_t.dtype), tl.trans(do_t), input_precision=INPUT_PRECISION)
        # -- dS^T = P^T * (dP^T - D), dP^T = v do^T; dk += dS^T q --
        dpt = tl.dot(v, do_t, input_precision=INPUT_PRECISION)
        dst = pt * (dpt - delta[None, :])
        if SOFTCAP:
            dst = dst * (1.0 - tt * tt)  # d/dx c tanh(x / c) = 1 - tanh^2
        dk += tl.dot(dst.to(qt.dtype), tl.trans(qt), input_precision=INPUT_PRECISION)
    return dk, dv


@triton.jit
def _backward_dkdv_kernel(
    Q, K, V, DO, LSE, Delta, DK, DV,
    Q_OFFSETS, K_OFFSETS, V_OFFSETS, DO_OFFSETS,  # int64: slice starts (q, do by query slice;
    CU_Q, CU_K,  # VARLEN: int32 [B + 1] sequence starts; else unused      k, v by kv slice)
    stride_qn, stride_qd, stride_kn, stride_kd, stride_vn, stride_vd, stride_don, stride_dod,
    stride_ls, stride_ln,  # lse and Delta: element strides between slices and between rows
    stride_gs, stride_gn,  # dk and dv (one layout): element strides between slices and rows
    N_Q, N_K, HEAD_DIM, num_k_tiles, num_slices,
    group,  # query heads per kv head: kv slice s serves query slices s * group .. + group - 1
    qk_scale, cap_log2, win_left, win_right,  # as in the forward (flash.scores)
    sm_scale,  # the softmax scale itself, applied to dk once at the end
    SOFTCAP: tl.constexpr,
    HAS_LEFT: tl.constexpr,
    HAS_RIGHT: tl.constexpr,
    BOTTOM_RIGHT: tl.constexpr,
    VARLEN: tl.constexpr,
    SPLIT_RUNS: tl.constexpr,  # three runs (masked, unmasked, masked) or one masked loop: loop_shape
    BLOCK_Q: tl.constexpr,
    BLOCK_K: tl.constexpr,
    BLOCK_D: tl.constexpr,
    INPUT_PRECISION: tl.constexpr,
    OFFSET_ALIGN: tl.constexpr,  # divides every slice offset (flash.forward.offset_alignment)
):
    # One program per (key tile, kv slice[, sequence]); it owns rows [start_k, start_k + BLOCK_K)
    # of dk and dv, so nothing is shared between programs and no atomics are needed: the query
    # heads of a group are summed here, one after the other, in a fixed order. Everything is
    # computed transposed ([BLOCK_K, BLOCK_Q]) so that the products with q and do need no
    # transposes of the accumulators.
    pid = tl.program_id(0)
    pid_k = pid % num_k_tiles
    pid_b, row_q, row_k, n_q, n_k = _window(pid // num_k_tiles, CU_Q, CU_K, N_Q, N_K, num_slices,
                                            VARLEN)

    k_base = K + tl.multiple_of(tl.load(K_OFFSETS + pid_b), OFFSET_ALIGN) + row_k * stride_kn
    v_base = V + tl.multiple_of(tl.load(V_OFFSETS + pid_b), OFFSET_ALIGN) + row_k * stride_vn

    start_k = pid_k * BLOCK_K
    offs_k = start_k + tl.arange(0, BLOCK_K)
    offs_q = tl.arange(0, BLOCK_Q)
    offs_d = tl.arange(0, BLOCK_D)
    mask_k = offs_k < n_k
    mask_d = offs_d < HEAD_DIM
    mask_kd = mask_k[:, None] & mask_d[None, :]

    # -- this program's k and v tiles stay in registers for the whole loop --
    rows_k = offs_k[:, None].to(tl.int64)
    k = tl.load(k_base + rows_k * stride_kn + offs_d[None, :] * stride_kd, mask=mask_kd, other=0.0)
    v = tl.load(v_base + rows_k * stride_vn + offs_d[None, :] * stride_vd, mask=mask_kd, other=0.0)
    dk = tl.zeros([BLOCK_K, BLOCK_D], dtype=tl.float32)
    dv = tl.zeros([BLOCK_K, BLOCK_D], dtype=tl.float32)

    # Only the query tiles whose band reaches this key tile (causal: from the tile holding row
    # start_k on). If no row sees it (causal with start_k >= n_q, a window past it) the loop is
    # empty and dk = dv = 0, which is the right gradient.
    diag = diagonal(n_q, n_k, BOTTOM_RIGHT)
    lo_diag = diag - win_left
    hi_diag = diag + win_right
    lo, hi = query_range(start_k, start_k + BLOCK_K - 1, n_q, lo_diag, hi_diag, BLOCK_Q,
                         HAS_LEFT, HAS_RIGHT)
    if VARLEN:
        # The grid is sized for the longest sequence: a tile past the end of a shorter one
        # skips the loop and stores nothing (every row is masked).
        hi = tl.where(start_k < n_k, hi, lo)
    # Query tiles in three runs, as the forward's key tiles: [lo, full_lo) masked (the band's
    # edge: the causal diagonal), [full_lo, full_hi) unmasked (every row before n_q and seeing
    # every key of this tile), [full_hi, hi) masked (the other edge, the partial last tile).
    # Without SPLIT_RUNS (loop_shape: bands at d > 64) the first masked run covers [lo, hi) alone.
    first_hi = hi
    if SPLIT_RUNS:
        full_lo, full_hi = unmasked_query_range(start_k, start_k + BLOCK_K - 1, n_q, lo_diag, hi_diag,
                                                lo, hi, BLOCK_Q, HAS_LEFT, HAS_RIGHT)
        first_hi = full_lo

    for g in range(0, group):
        q_slice = pid_b * group + g
        q_base = Q + tl.multiple_of(tl.load(Q_OFFSETS + q_slice), OFFSET_ALIGN) + row_q * stride_qn
        do_base = DO + tl.multiple_of(tl.load(DO_OFFSETS + q_slice), OFFSET_ALIGN) + row_q * stride_don
        lse_base = LSE + q_slice.to(tl.int64) * stride_ls + row_q * stride_ln
        delta_base = Delta + q_slice.to(tl.int64) * stride_ls + row_q * stride_ln
        dk, dv = _dkdv_query_tiles(
            dk, dv, k, v, q_base, do_base, lse_base, delta_base, stride_qn, stride_qd, stride_don,
            stride_dod, stride_ln, offs_k, offs_q, offs_d, mask_d, n_q, qk_scale, cap_log2,
            lo_diag, hi_diag, lo, first_hi, MASKED=True, HAS_LEFT=HAS_LEFT, HAS_RIGHT=HAS_RIGHT,
            SOFTCAP=SOFTCAP, BLOCK_Q=BLOCK_Q, INPUT_PRECISION=INPUT_PRECISION,
        )
        if SPLIT_RUNS:
            dk, dv = _dkdv_query_tiles(
                dk, dv, k, v, q_base, do_base, lse_base, delta_base, stride_qn, stride_qd, stride_don,
                stride_dod, stride_ln, offs_k, offs_q, offs_d, mask_d, n_q, qk_scale, cap_log2,
                lo_diag, hi_diag, full_lo, full_hi, MASKED=False, HAS_LEFT=HAS_LEFT, HAS_RIGHT=HAS_RIGHT,
                SOFTCAP=SOFTCAP, BLOCK_Q=BLOCK_Q, INPUT_PRECISION=INPUT_PRECISION,
            )
            dk, dv = _dkdv_query_tiles(
                dk, dv, k, v, q_base, do_base, lse_base, delta_base, stride_qn, stride_qd, stride_don,
                stride_dod, stride_ln, offs_k, offs_q, offs_d, mask_d, n_q, qk_scale, cap_log2,
                lo_diag, hi_diag, full_hi, hi, MASKED=True, HAS_LEFT=HAS_LEFT, HAS_RIGHT=HAS_RIGHT,
                SOFTCAP=SOFTCAP, BLOCK_Q=BLOCK_Q, INPUT_PRECISION=INPUT_PRECISION,
            )

    dk *= sm_scale
    # dk and dv are contiguous (allocated by the launcher), laid out by stride_gs, stride_gn.
    out = pid_b.to(tl.int64) * stride_gs + (row_k + rows_k) * stride_gn + offs_d[None, :]
    tl.store(DK + out, dk.to(DK.dtype.element_ty), mask=mask_kd)
    tl.store(DV + out, dv.to(DV.dtype.element_ty), mask=mask_kd)


@triton.jit
def _dq_key_tiles(
    dq, q, do, lse, delta, k_base, v_base, stride_kn, stride_kd, stride_vn, stride_vd, offs_q,
    offs_k, offs_d, mask_d, n_k, qk_scale, cap_log2, lo_diag, hi_diag, lo, hi,
    MASKED: tl.constexpr,
    HAS_LEFT: tl.constexpr,
    HAS_RIGHT: tl.constexpr,
    SOFTCAP: tl.constexpr,
    BLOCK_K: tl.constexpr,
    INPUT_PRECISION: tl.constexpr,
):
    """A query tile's ``dq`` over the key tiles ``[lo, hi)``; returns the updated ``dq``.

    ``MASKED=False`` is for key tiles before ``n_k`` that every row of the tile sees whole
    (:func:`flash.scores.unmasked_key_range`): nothing is masked. ``MASKED=True`` hides keys past
    ``n_k`` and outside each row's band. Rows past ``n_q`` are never hidden here: their q, do, lse
    and D were loaded as zeros, so their ``dS`` is 0, and their rows of dq are not stored.
    """
    for start_k in range(lo, hi, BLOCK_K):
        cols = start_k + offs_k
        # -- load k and v transposed, [D, BK] --
        kt_ptrs = k_base + cols[None, :].to(tl.int64) * stride_kn + offs_d[:, None] * stride_kd
        vt_ptrs = v_base + cols[None, :].to(tl.int64) * stride_vn + offs_d[:, None] * stride_vd
        if MASKED:
            mask_k = cols < n_k
            mask_dk = mask_d[:, None] & mask_k[None, :]
            kt = tl.load(kt_ptrs, mask=mask_dk, other=0.0)
            vt = tl.load(vt_ptrs, mask=mask_dk, other=0.0)
        else:
            kt = tl.load(kt_ptrs, mask=mask_d[:, None], other=0.0)
            vt = tl.load(vt_ptrs, mask=mask_d[:, None], other=0.0)
        # -- recompute P; keys past the end (and outside the band) get P = 0, masked after exp2
        # as in _dkdv_query_tiles, so that a tile's bits do not depend on the loop it runs in --
        s, t = scores(q, kt, qk_scale, cap_log2, SOFTCAP, INPUT_PRECISION, ROUNDED=False)
        p = tl.exp2(s - lse[:, None])
        if MASKED:
            seen = visible(mask_k[None, :], offs_q[:, None], cols[None, :], lo_diag, hi_diag,
                           HAS_LEFT, HAS_RIGHT)
            p = tl.where(seen, p, 0.0)
        # -- dS = P * (dP - D), dP = do v^T; dq += dS k --
        dp = tl.dot(do, vt, input_precision=INPUT_PRECISION)
        ds = p * (dp - delta[:, None])
        if SOFTCAP:
            ds = ds * (1.0 - t * t)  # d/dx c tanh(x / c) = 1 - tanh^2
        dq += tl.dot(ds.to(kt.dtype), tl.trans(kt), input_precision=INPUT_PRECISION)
    return dq


@triton.jit
def _backward_dq_kernel(
    Q, K, V, DO, LSE, Delta, DQ,
    Q_OFFSETS, K_OFFSETS, V_OFFSETS, DO_OFFSETS,  # all by query slice (k, v repeated per group)
    CU_Q, CU_K,
    stride_qn, stride_qd, stride_kn, stride_kd, stride_vn, stride_vd, stride_don, stride_dod,
    stride_ls, stride_ln,
    stride_gs, stride_gn,  # dq: element strides between slices and between rows
    N_Q, N_K, HEAD_DIM, num_q_tiles, num_slices,
    qk_scale, cap_log2, win_left, win_right, sm_scale,
    SOFTCAP: tl.constexpr,
    HAS_LEFT: tl.constexpr,
    HAS_RIGHT: tl.constexpr,
    BOTTOM_RIGHT: tl.constexpr,
    VARLEN: tl.constexpr,
    SPLIT_RUNS: tl.constexpr,  # as in _backward_dkdv_kernel
    BLOCK_Q: tl.constexpr,
    BLOCK_K: tl.constexpr,
    BLOCK_D: tl.constexpr,
    INPUT_PRECISION: tl.constexpr,
    OFFSET_ALIGN: tl.constexpr,  # divides every slice offset (flash.forward.offset_alignment)
):
    # One program per (query tile, slice[, sequence]); it owns rows of dq, as the forward owns
    # rows of o, and recomputes the same P the dk/dv kernel does (a second pass instead of atomics).
    pid = tl.program_id(0)
    pid_q = pid % num_q_tiles
    pid_b, row_q, row_k, n_q, n_k = _window(pid // num_q_tiles, CU_Q, CU_K, N_Q, N_K, num_slices,
                                            VARLEN)

    k_base = K + tl.multiple_of(tl.load(K_OFFSETS + pid_b), OFFSET_ALIGN) + row_k * stride_kn
    v_base = V + tl.multiple_of(tl.load(V_OFFSETS + pid_b), OFFSET_ALIGN) + row_k * stride_vn
    lse_base = LSE + pid_b.to(tl.int64) * stride_ls + row_q * stride_ln
    delta_base = Delta + pid_b.to(tl.int64) * stride_ls + row_q * stride_ln

    offs_q = pid_q * BLOCK_Q + tl.arange(0, BLOCK_Q)
    offs_k = tl.arange(0, BLOCK_K)
    offs_d = tl.arange(0, BLOCK_D)
    mask_q = offs_q < n_q
    mask_d = offs_d < HEAD_DIM
    mask_qd = mask_q[:, None] & mask_d[None, :]

    rows_q = offs_q[:, None].to(tl.int64)
    q_base = Q + tl.multiple_of(tl.load(Q_OFFSETS + pid_b), OFFSET_ALIGN)
    do_base = DO + tl.multiple_of(tl.load(DO_OFFSETS + pid_b), OFFSET_ALIGN)
    q = tl.load(q_base + (row_q + rows_q) * stride_qn + offs_d[None, :] * stride_qd,
                mask=mask_qd, other=0.0)
    do = tl.load(do_base + (row_q + rows_q) * stride_don + offs_d[None, :] * stride_dod,
                 mask=mask_qd, other=0.0)
    lse = tl.load(lse_base + offs_q.to(tl.int64) * stride_ln, mask=mask_q, other=0.0)
    lse = lse_base2(lse)  # base 2, past 2^24 raised above its rounding
    delta = tl.load(delta_base + offs_q.to(tl.int64) * stride_ln, mask=mask_q, other=0.0)
    dq = tl.zeros([BLOCK_Q, BLOCK_D], dtype=tl.float32)

    # Only the key tiles this query tile's band reaches (causal: none wholly in its future).
    diag = diagonal(n_q, n_k, BOTTOM_RIGHT)
    lo_diag = diag - win_left
    hi_diag = diag + win_right
    first_row = pid_q * BLOCK_Q
    lo, hi = key_range(first_row, first_row + BLOCK_Q - 1, n_k, lo_diag, hi_diag, BLOCK_K,
                       HAS_LEFT, HAS_RIGHT)
    if VARLEN:
        hi = tl.where(first_row < n_q, hi, lo)  # a tile past this sequence's end

    # Key tiles in three runs, as in the forward: [lo, full_lo) masked, [full_lo, full_hi)
    # unmasked (before n_k, seen whole by every row of this tile), [full_hi, hi) masked.
    # Without SPLIT_RUNS (loop_shape) the first masked run covers [lo, hi) alone.
    first_hi = hi
    if SPLIT_RUNS:
        full_lo, full_hi = unmasked_key_range(first_row, first_row + BLOCK_Q - 1, n_k, lo_diag, hi_diag,
                                              lo, hi, BLOCK_K, HAS_LEFT, HAS_RIGHT)
        first_hi = full_lo
    dq = _dq_key_tiles(
        dq, q, do, lse, delta, k_base, v_base, stride_kn, stride_kd, stride_vn, stride_vd, offs_q,
        offs_k, offs_d, mask_d, n_k, qk_scale, cap_log2, lo_diag, hi_diag, lo, first_hi,
        MASKED=True, HAS_LEFT=HAS_LEFT, HAS_RIGHT=HAS_RIGHT, SOFTCAP=SOFTCAP, BLOCK_K=BLOCK_K,
        INPUT_PRECISION=INPUT_PRECISION,
    )
    if SPLIT_RUNS:
        dq = _dq_key_tiles(
            dq, q, do, lse, delta, k_base, v_base, stride_kn, stride_kd, stride_vn, stride_vd, offs_q,
            offs_k, offs_d, mask_d, n_k, qk_scale, cap_log2, lo_diag, hi_diag, full_lo, full_hi,
            MASKED=False, HAS_LEFT=HAS_LEFT, HAS_RIGHT=HAS_RIGHT, SOFTCAP=SOFTCAP, BLOCK_K=BLOCK_K,
            INPUT_PRECISION=INPUT_PRECISION,
        )
        dq = _dq_key_tiles(
            dq, q, do, lse, delta, k_base, v_base, stride_kn, stride_kd, stride_vn, stride_vd, offs_q,
            offs_k, offs_d, mask_d, n_k, qk_scale, cap_log2, lo_diag, hi_diag, full_hi, hi,
            MASKED=True, HAS_LEFT=HAS_LEFT, HAS_RIGHT=HAS_RIGHT, SOFTCAP=SOFTCAP, BLOCK_K=BLOCK_K,
            INPUT_PRECISION=INPUT_PRECISION,
        )

    dq *= sm_scale
    out = pid_b.to(tl.int64) * stride_gs + (row_q + rows_q) * stride_gn + offs_d[None, :]
    tl.store(DQ + out, dq.to(DQ.dtype.element_ty), mask=mask_qd)


class BackwardConfig(NamedTuple):
    """Launch parameters of the backward kernels.

    ``block_q_dkdv x block_k_dkdv`` are the tiles of the dk/dv kernel (a key tile held, query
    tiles streamed), ``block_q_dq x block_k_dq`` those of the dq kernel (a query tile held, key
    tiles streamed). They are independent of the forward's tiles.
    """

    block_q_dkdv: int
    block_k_dkdv: int
    block_q_dq: int
    block_k_dq: int
    num_warps: int
    num_stages: int


def backward_config(head_dim: int, dtype: torch.dtype) -> BackwardConfig:
    """Default launch parameters, keyed on the padded head dim and the dtype.

    16-bit inputs: chosen with ``python -m benchmarks.tune`` on an H200 (2026-11-30, Triton 3.6).
    Up to d = 64, 64x64 tiles in both kernels with 4 warps and 3 stages were the fastest candidate
    on every d = 64 shape of the quick grid (1.10-1.19x the previous 32x128 / 128x32 tiles with 8
    warps); at d = 128, 64x64 tiles in both kernels with 4 warps and 2 stages, the fastest of ten
    candidates on all six bf16 d = 128 shapes of the quick grid (H200, 2026-12-03; n = 1024, 4096,
    16384, causal and not): 4-10% faster than the 32x64 / 64x32 tiles chosen before over n = 1024
    only (docs/speed.md, "Tiles for the features and the backward"). At d = 64 the best candidate
    changed with the shape (32x128 / 128x32 with 4 warps non-causal, 32x64 / 64x32 causal) and won
    by 2-5% only, so d = 64 keeps its tiles.
    The dk/dv kernel holds two input tiles and two float32 accumulators of the held tile's size,
    so d = 256 and float32 keep the earlier, smaller tiles and fewer stages (not tuned; they fit
    in an H100's 228 KB of shared memory).
    """
    block_d = padded_head_dim(head_dim)
    if dtype == torch.float32:
        if block_d == 256:
            return BackwardConfig(16, 32, 32, 16, 8, 1)
        if block_d == 128:
            return BackwardConfig(16, 64, 64, 16, 8, 1)
        return BackwardConfig(16, 32, 32, 32, 4, 2)
    if block_d == 256:
        return BackwardConfig(32, 32, 32, 32, 8, 1)
    if block_d == 128:
        return BackwardConfig(64, 64, 64, 64, 4, 2)
    return BackwardConfig(64, 64, 64, 64, 4, 3)


_PREPROCESS_BLOCK_Q = 64


def loop_shape(block_d: int, features: Features, group: int, varlen: bool, n_q: int,
               n_k: int) -> dict[str, bool]:
    """The backward's ``SPLIT_RUNS``: whether its loops run in three runs (masked edge, unmasked
    middle, masked edge) or as one loop that masks every tile.

    The split saves the mask's work on the tiles seen whole; it also compiles the loop body three
    times, each with its own software pipeline to fill. Measured on an H200 (docs/speed.md, "The
    split at d = 128 with a band"), one masked loop is faster for plain multi-head attention at
    d > 64 with a causal or window band (n = 1024 causal: 0.91x the split's time), and slower with
    a softcap (1.11x: a masked tile pays tanh's derivative too), a GQA group (1.05x: the masked
    loop repeats for each query head of the group) and lengths that are not multiples of 16
    (1.07x: Triton's divisibility specialization helps the unmasked loads). So one loop only where
    it was faster (``SPLIT_RUNS`` off, the two other runs compiled out).

    Packed input keeps the split: one loop measured 1.02-1.03x the split's time on packed batches
    of 16 sequences, 4096 down to 256 rows, aligned or not (docs/speed.md, "The one-loop backward
    meets BATCH_INVARIANT"). A packed sequence may so run other loops than itself alone, which
    ``BATCH_INVARIANT`` allows only because the loops change no bit: the masked loops zero ``P``
    after the exponential (:func:`_dkdv_query_tiles`), and ``check_varlen_matches_separate`` holds
    them to it on a GPU (the interpreter's masking moves no bit either way).
    """
    banded = features.left != -1 or features.right != -1
    one_loop = block_d > 64 and banded and not features.softcap and group == 1
    aligned = n_q % ONE_LOOP_ALIGN == 0 and n_k % ONE_LOOP_ALIGN == 0
    return dict(SPLIT_RUNS=varlen or not (one_loop and aligned))


def flash_attention_backward(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    o: torch.Tensor,
    lse: torch.Tensor,
    do: torch.Tensor,
    is_causal: bool,
    *,
    features: Features | None = None,
    config: BackwardConfig | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Gradients of ``o = softmax(scale q k^T) v`` with respect to q, k and v, in Triton.

    Args:
        q: ``[..., h_q, n_q, d]``; k, v: ``[..., h_kv, n_k, d]``, as given to the forward (any
            strides; ``h_q`` a multiple of ``h_kv``).
        o: ``[..., n_q, d]`` the forward's output; lse: ``[..., n_q]`` float32, its row
            log-sum-exp (natural log) of the scaled scores.
        do: ``[..., n_q, d]`` the upstream gradient of ``o`` (any strides, same dtype as q).
        is_causal: as in the forward.
        features: the forward's (:func:`flash.scores.resolve`); default: none (``1/sqrt(d)``,
            top-left, no window or softcap). With ``is_causal`` they must say so too
            (``right == 0``): ``features`` is what the kernels read.
        config: tile sizes and launch options; default :func:`backward_config`. Tile sizes must
            be powers of two >= 16.

    Returns:
        ``dq`` shaped like q, ``dk`` like k, ``dv`` like v, contiguous, in the dtype of q.
    """
    config = backward_config(q.shape[-1], q.dtype) if config is None else config
    features = resolve(q.shape[-1], is_causal) if features is None else features
    for name in ("block_q_dkdv", "block_k_dkdv", "block_q_dq", "block_k_dq"):
        block = getattr(config, name)
        if block < 16 or block & (block - 1):
            raise ValueError(f"{name} must be a power of two >= 16, got {block}")
    if do.shape != o.shape or do.dtype != q.dtype:
        raise ValueError(
            f"do must match o: expected shape {tuple(o.shape)} and dtype {q.dtype}, "
            f"got {tuple(do.shape)} and {do.dtype}"
        )

    *lead, n_q, d = q.shape
    n_k = k.shape[-2]
    batch = math.prod(lead)
    group = group_size(q, k)
    delta = torch.empty((batch, n_q), dtype=torch.float32, device=q.device)
    dq = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    dk = torch.empty(k.shape, dtype=k.dtype, device=q.device)
    dv = torch.empty(v.shape, dtype=v.dtype, device=q.device)
    launch_backward(
        q, k, v, o, lse.contiguous(), do, delta, dq, dk, dv,
        Offsets(*(slice_offsets(t) for t in (q, k, v, o, do)),
                k_by_q=slice_offsets(k, group), v_by_q=slice_offsets(v, group)),
        None, None, lse_strides=(n_q, 1), dq_strides=(n_q * d, d), dkv_strides=(n_k * d, d),
        n_q=n_q, n_k=n_k, slices=batch, group=group, sequences=1, features=features,
        config=config,
    )
    return dq, dk, dv


class Offsets(NamedTuple):
    """The slice-offset tables (:func:`flash.forward.slice_offsets`) the backward kernels read.

    ``q``, ``o``, ``do`` by query slice; ``k``, ``v`` by kv slice (the dk/dv kernel's programs);
    ``k_by_q``, ``v_by_q`` by query slice (the dq kernel's): the same as ``k``, ``v`` unless
    heads are grouped.
    """

    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    o: torch.Tensor
    do: torch.Tensor
    k_by_q: torch.Tensor
    v_by_q: torch.Tensor


def launch_backward(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, o: torch.Tensor, lse: torch.Tensor,
    do: torch.Tensor, delta: torch.Tensor, dq: torch.Tensor, dk: torch.Tensor, dv: torch.Tensor,
    offsets: Offsets, cu_seqlens_q: torch.Tensor | None,
    cu_seqlens_k: torch.Tensor | None, *, lse_strides: tuple[int, int],
    dq_strides: tuple[int, int], dkv_strides: tuple[int, int], n_q: int, n_k: int, slices: int,
    group: int, sequences: int, features: Features, config: BackwardConfig,
) -> None:
    """Launch the three backward kernels over ``slices`` query slices (times ``sequences``).

    The geometry is the forward's (:func:`flash.forward.launch_forward`): with ``cu_seqlens_*`` a
    slice is a head of packed input and ``n_q``, ``n_k`` the longest sequences; ``group`` query
    slices share each kv slice (``slices // group`` of them). ``delta`` is laid out as ``lse``
    (``lse_strides``); dq, dk and dv are contiguous, laid out by ``dq_strides`` and
    ``dkv_strides`` (element strides between slices and between rows). Arguments are checked.
    """
    d = q.shape[-1]
    block_d = padded_head_dim(d)
    varlen = cu_seqlens_q is not None
    cu_q = cu_seqlens_q if varlen else offsets.q
    cu_k = cu_seqlens_k if varlen else offsets.q
    strides = (q.stride(-2), q.stride(-1), k.stride(-2), k.stride(-1),
               v.stride(-2), v.stride(-1), do.stride(-2), do.stride(-1))
    launch = features.kernel_args(varlen, n_q, n_k)
    launch.pop("EMPTY_ROWS")  # the backward needs no guard: an empty row's P is all hidden, masked to 0
    launch.update(
        VARLEN=varlen,
        **loop_shape(block_d, features, group, varlen, n_q, n_k),
        BLOCK_D=block_d,
        INPUT_PRECISION="ieee" if q.dtype == torch.float32 else "tf32",
        OFFSET_ALIGN=offset_alignment(q, k, v, o, do),
        num_warps=config.num_warps,
        num_stages=config.num_stages,
    )
    programs = slices * sequences

    # -- 1. D = rowsum(do * o) --
    tiles = triton.cdiv(n_q, _PREPROCESS_BLOCK_Q)
    if tiles * programs:
        _backward_preprocess_kernel[(tiles * programs,)](
            o, do, delta, offsets.o, offsets.do, cu_q, cu_k,
            o.stride(-2), o.stride(-1), do.stride(-2), do.stride(-1), *lse_strides,
            n_q, d, tiles, slices,
            VARLEN=varlen, BLOCK_Q=_PREPROCESS_BLOCK_Q, BLOCK_D=launch["BLOCK_D"],
            OFFSET_ALIGN=launch["OFFSET_ALIGN"],
        )
    # -- 2. dk, dv: one program per (key tile, kv slice), streaming over its query tiles --
    tiles = triton.cdiv(n_k, config.block_k_dkdv)
    if tiles * programs:
        _backward_dkdv_kernel[(tiles * programs // group,)](
            q, k, v, do, lse, delta, dk, dv, offsets.q, offsets.k, offsets.v, offsets.do,
            cu_q, cu_k, *strides, *lse_strides, *dkv_strides, n_q, n_k, d, tiles,
            slices // group, group, sm_scale=features.scale,
            BLOCK_Q=config.block_q_dkdv, BLOCK_K=config.block_k_dkdv, **launch,
        )
    # -- 3. dq: one program per query tile, streaming over key tiles --
    tiles = triton.cdiv(n_q, config.block_q_dq)
    if tiles * programs:
        _backward_dq_kernel[(tiles * programs,)](
            q, k, v, do, lse, delta, dq, offsets.q, offsets.k_by_q, offsets.v_by_q, offsets.do,
            cu_q, cu_k, *strides, *lse_strides, *dq_strides, n_q, n_k, d, tiles, slices,
            sm_scale=features.scale,
            BLOCK_Q=config.block_q_dq, BLOCK_K=config.block_k_dq, **launch,
        )
