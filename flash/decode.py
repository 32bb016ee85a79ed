"""The split-KV forward (FlashDecoding) for few query rows over many keys, and its lse merge.

One program per query tile (:mod:`flash.forward`) leaves most of a GPU idle when a call has one
query row per head (decoding) or a few (speculative decoding): ``batch * heads`` programs, each
walking every key alone. This path instead gives each *kv head* several programs, one per slice of
its keys (a "split"), and merges their results:

1. ``_split_kv_kernel``, one program per (sequence, kv slice, row tile, split): its rows are the
   query rows of every query head of the kv head's group (row ``i`` of the group's query head
   ``h`` is group row ``h * n_q + i``, 16 to a tile; one head to a tile in the interpreter, see
   :func:`launch_split_kv`), so each key and value is read once per 16 rows of the whole group,
   not once per query head. It runs the forward's online softmax (the
   same :func:`flash.forward._attend_key_tiles`, masked, so each row keeps its own band) over its
   split's key tiles, and stores the split's normalized output ``o_s`` and base-2 log-sum-exp
   ``lse_s`` in float32 (``o_s = 0``, ``lse_s = -inf`` for a row that sees no key of the split: a
   window, a causal diagonal or the end of the keys can leave a split empty for a row).
2. ``_merge_kernel``, one program per (sequence, query slice): ``lse = log2 sum_s 2^lse_s`` and
   ``o = sum_s 2^(lse_s - lse) o_s``, accumulated split by split with a running max as the
   forward's online softmax does (no exponent overflows, empty splits weigh 0); a row empty in
   every split stores ``o = 0``, ``lse = -inf``.

Which calls take it, and in how many splits, is :func:`split_plan`: a function of one sequence's
lengths and band only, never of the batch, the number of heads or the group. So batching never
changes a bit (``flash.BATCH_INVARIANT``), a grouped-query call computes each row as the call with
k and v repeated per group does, and a packed (varlen) call, which plans each sequence with the
same rule (from the lengths its input check reads back), computes each sequence as the dense call
of that sequence alone does. The result is the forward's within rounding, not bit for bit (the
sum runs in another order). The backward does not care which path made ``o`` and the lse.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import torch
import triton
import triton.language as tl

from flash import replay
from flash._runtime import INTERPRET  # (sets TRITON_INTERPRET before the kernels are decorated)
from flash.forward import _attend_key_tiles, offset_alignment, padded_head_dim
from flash.scores import PLAN_FIELDS, Features, as_vector, diagonal

__all__ = ["MAX_SPLIT_ROWS", "SPLIT_KEYS", "SplitPlan", "default_split_keys", "launch_split_kv",
           "split_plan", "split_plans"]

SPLIT_KEYS = 512
"""The shortest split by default: a call splits when its rows' keys make two splits or more."""
LONGEST_DEFAULT_SPLIT = 2048
"""By default a split doubles from :data:`SPLIT_KEYS` up to this length (:func:`default_split_keys`)."""
SPLITS_TO_DOUBLE = 32
"""By default a split doubles while the band holds this many splits of it."""
MAX_SPLIT_ROWS = 16
"""The most query rows (per head) a call may have to split; longer queries fill a GPU already."""
MAX_SPLITS = 256
"""At most this many splits (longer splits past ``MAX_SPLITS * split_keys`` keys)."""
TILE_ROWS = 16
"""Group rows per program: the smallest ``tl.dot`` tile (decoding has one row per query head)."""
PACK_HEADS: bool = not INTERPRET
"""Whether a split-KV tile packs a group's rows, several query heads to a tile, so that a kv head is
read once per :data:`TILE_ROWS` of them (the GPU's layout), or holds one head's rows (the
interpreter's default: its ``tl.dot`` is numpy's matmul, which may round a row by its position in
the block, and a grouped call must equal the call with k and v repeated bit for bit). Read at each
launch; the CPU suite runs the packed layout too (``tests/test_decode.py``,
``test_split_kv_packed_heads``), so that the GPU's row-to-head arithmetic is gated on the CPU."""


class SplitPlan(NamedTuple):
    """How one sequence is split: ``splits`` pieces of ``split_len`` keys from ``lo`` to ``hi``."""

    splits: int
    split_len: int
    lo: int
    """The first key tile's start (``split_block_k``-aligned)."""
    hi: int
    """One past the last key some row sees."""


def split_plan(n_q: int, n_k: int, features: Features, split_keys: int | None = None) -> SplitPlan | None:
    """The split-KV plan of one sequence, or ``None`` when the forward computes it.

    A sequence splits when it has at most :data:`MAX_SPLIT_ROWS` query rows and the keys some row
    sees, ``[lo, hi)``, hold two splits of ``split_keys`` (default: :func:`default_split_keys` of
    the band; 0 never splits). It depends on the sequence's lengths and band only: see the module
    docstring.
    """
    if (split_keys is not None and split_keys <= 0) or not 1 <= n_q <= MAX_SPLIT_ROWS:
        return None
    diag = n_k - n_q if features.bottom_right else 0
    lo, hi = 0, n_k
    if features.left != -1:
        lo = min(max(diag - features.left, 0), n_k)
    if features.right != -1:
        hi = min(hi, max(n_q + diag + features.right, 0))
    hi = max(hi, lo)
    if split_keys is None:
        split_keys = default_split_keys(hi - lo)
    splits = min((hi - lo) // split_keys, MAX_SPLITS)
    if splits < 2:
        return None
    block_k = split_block_k(split_keys)
    lo = lo // block_k * block_k
    split_len = triton.cdiv(triton.cdiv(hi - lo, splits), block_k) * block_k
    return SplitPlan(triton.cdiv(hi - lo, split_len), split_len, lo, hi)


def default_split_keys(band: int) -> int:
    """Keys per split when the caller names none, for a band of ``band`` visible keys.

    :data:`SPLIT_KEYS` (512), doubled while the band holds :data:`SPLITS_TO_DOUBLE` (32) splits of
    it, up to :data:`LONGEST_DEFAULT_SPLIT` (2048): 512 keys below 16k, 1024 from 16k, 2048 from
    32k. On the H200 (docs/speed.md, "Decoding: the split-KV path") longer splits read a long cache
    faster, since each split writes a float32 partial and the merge reads them all: 1024-key splits
    beat 512 by 5-17% at 16k-128k keys, 2048 beat 1024 at 128k; 16 splits or more per kv head
    still give a batch of decodes thousands of programs. A function of the band alone, so a
    sequence splits the same in any batch (``flash.BATCH_INVARIANT``).
    """
    keys = SPLIT_KEYS
    while keys < LONGEST_DEFAULT_SPLIT and band >= SPLITS_TO_DOUBLE * keys:
        keys *= 2
    return keys


def split_plans(lengths_q: list[int], lengths_k: list[int], features: Features,
                split_keys: int | None, device: torch.device) -> tuple[torch.Tensor, int, int] | None:
    """The plan table of a batch of sequences, its slot count and most splits; ``None``: no splits.

    Row ``b`` of the int32 table ``[B, PLAN_FIELDS]`` is sequence ``b``'s :class:`SplitPlan` and its
    first partial slot (the running sum of the splits before it); a sequence the forward computes
    has 0 splits. Built on the host from the lengths and cached, like the slice offsets.
    """
    return _split_plans(tuple(lengths_q), tuple(lengths_k), features, split_keys, device)


@functools.lru_cache(maxsize=256)
def _split_plans(lengths_q, lengths_k, features, split_keys, device):
    rows, slot, most = [], 0, 0
    for n_q, n_k in zip(lengths_q, lengths_k):
        plan = split_plan(n_q, n_k, features, split_keys) or SplitPlan(0, 0, 0, 0)
        rows.append([*plan, slot])
        slot += plan.splits
        most = max(most, plan.splits)
    if not most:
        return None
    return torch.tensor(rows, dtype=torch.int32).to(device), slot, most


def split_block_k(split_keys: int) -> int:
    """Key tile of the split-KV path: 64, or the largest power of two >= 16 within a split."""
    block_k = 64
    while block_k > 16 and block_k > split_keys:
        block_k //= 2
    return block_k


@triton.jit
def _split_kv_kernel(
    Q, K, V, O_PART, LSE_PART, PLAN,
    Q_OFFSETS, K_OFFSETS, V_OFFSETS,  # int64 [S]: slice starts, indexed by query slice
    CU_Q, CU_K,  # VARLEN: int32 [B + 1] sequence starts; else unused
    stride_qn, stride_qd, stride_kn, stride_kd, stride_vn, stride_vd,
    N_Q, N_K, HEAD_DIM, GROUP, num_q_slices, row_tiles, max_splits, part_rows,
    qk_scale, cap_log2, win_left, win_right,
    SOFTCAP: tl.constexpr,
    HAS_LEFT: tl.constexpr,
    HAS_RIGHT: tl.constexpr,
    BOTTOM_RIGHT: tl.constexpr,
    VARLEN: tl.constexpr,
    ONE_HEAD_PER_TILE: tl.constexpr,  # the interpreter: see launch_split_kv
    BLOCK_Q: tl.constexpr,
    BLOCK_K: tl.constexpr,
    BLOCK_D: tl.constexpr,
    INPUT_PRECISION: tl.constexpr,
    OFFSET_ALIGN: tl.constexpr,
):
    # The split varies fastest: programs side by side read neighbouring key slices of one kv head.
    pid = tl.program_id(0)
    split = pid % max_splits
    pid = pid // max_splits
    tile = pid % row_tiles
    pid = pid // row_tiles
    kv_slice = pid % (num_q_slices // GROUP)
    seq = pid // (num_q_slices // GROUP)
    if VARLEN:
        start_q = tl.load(CU_Q + seq)
        start_k = tl.load(CU_K + seq)
        n_q = tl.load(CU_Q + seq + 1) - start_q
        n_k = tl.load(CU_K + seq + 1) - start_k
        row_q = start_q.to(tl.int64)
        row_k = start_k.to(tl.int64)
    else:
        n_q = N_Q
        n_k = N_K
        row_q = 0
        row_k = 0
    # This sequence's plan (flash.decode.split_plan): 0 splits if the forward computes it.
    splits = tl.load(PLAN + seq * PLAN_FIELDS)
    split_len = tl.load(PLAN + seq * PLAN_FIELDS + 1)
    lo = tl.load(PLAN + seq * PLAN_FIELDS + 2)
    hi = tl.load(PLAN + seq * PLAN_FIELDS + 3)
    slot = tl.load(PLAN + seq * PLAN_FIELDS + 4) + split
    diag = diagonal(n_q, n_k, BOTTOM_RIGHT)
    lo_diag = diag - win_left
    hi_diag = diag + win_right

    # Group row r is row i = r % n_q of the group's query head r // n_q (query slice
    # kv_slice * GROUP + r // n_q). A tile holds 16 consecutive group rows, or (ONE_HEAD_PER_TILE)
    # one head's n_q rows; rows past GROUP * n_q, or past a head's n_q, are padding, loaded as 0,
    # never stored. A program past its sequence's splits or rows has nothing to do.
    if ONE_HEAD_PER_TILE:
        offs_r = tile * n_q + tl.arange(0, BLOCK_Q)
        in_tile = tl.arange(0, BLOCK_Q) < n_q
        first_r = tile * n_q
    else:
        offs_r = tile * BLOCK_Q + tl.arange(0, BLOCK_Q)
        in_tile = offs_r == offs_r
        first_r = tile * BLOCK_Q
    offs_d = tl.arange(0, BLOCK_D)
    mask_r = in_tile & (offs_r < GROUP * n_q) & as_vector(split < splits, offs_r)
    mask_d = offs_d < HEAD_DIM
    rows = offs_r % tl.maximum(n_q, 1)
    q_slice = kv_slice * GROUP + offs_r // tl.maximum(n_q, 1)
    q_start = tl.load(Q_OFFSETS + q_slice, mask=mask_r, other=0)
    q_ptrs = (Q + q_start[:, None] + (row_q + rows[:, None]).to(tl.int64) * stride_qn
              + offs_d[None, :] * stride_qd)
    q = tl.load(q_ptrs, mask=mask_r[:, None] & mask_d[None, :], other=0.0)
    k_base = K + tl.multiple_of(tl.load(K_OFFSETS + kv_slice * GROUP), OFFSET_ALIGN) + row_k * stride_kn
    v_base = V + tl.multiple_of(tl.load(V_OFFSETS + kv_slice * GROUP), OFFSET_ALIGN) + row_k * stride_vn

    start = lo + split * split_len
    end = tl.minimum(start + split_len, hi)
    end = tl.where((split < splits) & (first_r < GROUP * n_q), tl.maximum(end, start), start)
    m_i = tl.full([BLOCK_Q], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_Q], dtype=tl.float32)
    acc = tl.zeros([BLOCK_Q, BLOCK_D], dtype=tl.float32)
    # Every tile masked: a tile's rows are several heads' rows, each with its own band, and a
    # split of a long decode is memory-bound, so the mask's arithmetic costs no time.
    acc, l_i, m_i = _attend_key_tiles(
        acc, l_i, m_i, q, k_base, v_base, stride_kn, stride_kd, stride_vn, stride_vd,
        rows, offs_d, mask_d, n_k, qk_scale, cap_log2, lo_diag, hi_diag, start, end,
        MASKED=True, HAS_LEFT=HAS_LEFT, HAS_RIGHT=HAS_RIGHT, SOFTCAP=SOFTCAP,
        EMPTY_ROWS=True, BLOCK_K=BLOCK_K, INPUT_PRECISION=INPUT_PRECISION,
    )
    empty = l_i == 0.0  # no key of this split for this row: weight 2^-inf = 0 in the merge
    l_i = tl.where(empty, 1.0, l_i)
    o_s = acc / l_i[:, None]
    lse_s = tl.where(empty, float("-inf"), m_i + tl.log2(l_i))  # base 2

    # Partials: lse [slots, num_q_slices, part_rows], o [..., HEAD_DIM], float32.
    part = (slot * num_q_slices + q_slice).to(tl.int64) * part_rows + rows
    tl.store(LSE_PART + part, lse_s, mask=mask_r)
    o_ptrs = O_PART + part[:, None] * HEAD_DIM + offs_d[None, :]
    tl.store(o_ptrs, o_s, mask=mask_r[:, None] & mask_d[None, :])


@triton.jit
def _merge_kernel(
    O_PART, LSE_PART, PLAN, Out, LSE,
    CU_Q,
    stride_os, stride_on, stride_ls, stride_ln,
    N_Q, HEAD_DIM, num_q_slices, part_rows,
    VARLEN: tl.constexpr,
    BLOCK_R: tl.constexpr,
    BLOCK_D: tl.constexpr,
):
    # One program per (sequence, query slice): its rows, merged over its splits in order.
    q_slice = tl.program_id(0) % num_q_slices
    seq = tl.program_id(0) // num_q_slices
    if VARLEN:
        start_q = tl.load(CU_Q + seq)
        n_q = tl.load(CU_Q + seq + 1) - start_q
        row_q = start_q.to(tl.int64)
    else:
        n_q = N_Q
        row_q = 0
    splits = tl.load(PLAN + seq * PLAN_FIELDS)
    slot = tl.load(PLAN + seq * PLAN_FIELDS + 4)
    offs_r = tl.arange(0, BLOCK_R)
    offs_d = tl.arange(0, BLOCK_D)
    mask_r = (offs_r < n_q) & as_vector(splits > 0, offs_r)  # no splits: the forward computed it
    mask = mask_r[:, None] & (offs_d < HEAD_DIM)[None, :]
    m = tl.full([BLOCK_R], float("-inf"), dtype=tl.float32)
    w_sum = tl.zeros([BLOCK_R], dtype=tl.float32)
    acc = tl.zeros([BLOCK_R, BLOCK_D], dtype=tl.float32)
    for split in range(0, splits):
        part = ((slot + split) * num_q_slices + q_slice).to(tl.int64) * part_rows + offs_r
        lse_s = tl.load(LSE_PART + part, mask=mask_r, other=float("-inf"))
        o_s = tl.load(O_PART + part[:, None] * HEAD_DIM + offs_d[None, :], mask=mask, other=0.0)
        m_new = tl.maximum(m, lse_s)
        # All splits so far empty for this row: subtract 0, so 2^-inf = 0 and not NaN. Today's
        # plans never leave a stored row's first split empty (16 rows start at most 15 keys apart,
        # and a first split that starts a partial tile early is two tiles long), so the mutation
        # gate has no mutant here; a padded row takes it, and a plan that changes must not NaN.
        m_use = tl.where(m_new == float("-inf"), 0.0, m_new)
        alpha = tl.exp2(m - m_use)
        w = tl.exp2(lse_s - m_use)
        w_sum = w_sum * alpha + w
        acc = acc * alpha[:, None] + w[:, None] * o_s
        m = m_new
    empty = w_sum == 0.0
    w_sum = tl.where(empty, 1.0, w_sum)
    o = acc / w_sum[:, None]
    lse = tl.where(empty, float("-inf"), (m + tl.log2(w_sum)) / 1.4426950408889634)
    rows = row_q + offs_r
    o_ptrs = Out + q_slice.to(tl.int64) * stride_os + rows[:, None] * stride_on + offs_d[None, :]
    tl.store(o_ptrs, o.to(Out.dtype.element_ty), mask=mask)
    tl.store(LSE + q_slice.to(tl.int64) * stride_ls + rows * stride_ln, lse, mask=mask_r)


def launch_split_kv(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, o: torch.Tensor, lse: torch.Tensor,
    q_offsets: torch.Tensor, k_offsets: torch.Tensor, v_offsets: torch.Tensor,
    cu_seqlens_q: torch.Tensor | None, cu_seqlens_k: torch.Tensor | None,
    plans: tuple[torch.Tensor, int, int], *, o_strides: tuple[int, int],
    lse_strides: tuple[int, int], n_q: int, n_k: int, slices: int, sequences: int, group: int,
    features: Features, split_keys: int | None = None, num_warps: int | None = None,
    num_stages: int | None = None, recording: replay.Recording | None = None,
) -> None:
    """Run the split-KV path of the sequences ``plans`` splits (:func:`split_plans`): partials, merge.

    Arguments as :func:`flash.forward.launch_forward`'s (``n_q``, ``n_k`` the longest lengths of
    packed input), plus the plans and ``group`` (query slices per kv slice). The sequences with no
    splits are left untouched: the forward computes them (launched with the plan table, it skips
    the others).
    """
    table, slots, max_splits = plans
    varlen = cu_seqlens_q is not None
    d = q.shape[-1]
    part_rows = min(n_q, MAX_SPLIT_ROWS)
    o_part = replay.empty(recording, "o_part", (slots, slices, part_rows, d), torch.float32, q.device)
    lse_part = replay.empty(recording, "lse_part", (slots, slices, part_rows), torch.float32, q.device)
    args_of_features = features.kernel_args(varlen, n_q, n_k)
    args_of_features.pop("EMPTY_ROWS")  # a split may leave any row empty: the kernel always allows for it
    cu_q = cu_seqlens_q if varlen else table
    cu_k = cu_seqlens_k if varlen else table
    # A packed tile (PACK_HEADS) holds the group's rows, several heads to a tile; on a GPU a row's
    # numbers do not depend on where in the tile it sits (the suite's GPU grids check it: a grouped
    # call equals the call with k and v repeated, bit for bit). Otherwise each tile holds one head's
    # rows, at the rows they hold alone: the same numbers whatever the group.
    one_head = not PACK_HEADS
    row_tiles = group if one_head else triton.cdiv(group * part_rows, TILE_ROWS)
    # Shared memory holds a k and a v tile per pipeline stage: with float32 and d = 256 three
    # stages of 64-key tiles would need 282 KB (the H200 has 227 KB), so wide float32 rows take
    # 32-key tiles, and d = 256 two stages. A smaller tile still divides the plan's (64-aligned)
    # splits, and the tile size changes only the order of the sum within a split, which depends on
    # the dtype and head dim, never on the batch or the group.
    block_d = padded_head_dim(d)
    block_k = split_block_k(SPLIT_KEYS if split_keys is None else split_keys)
    if q.dtype == torch.float32 and block_d >= 128:
        block_k = min(block_k, 32)
    stages = 2 if block_d == 256 else 3
    args = (q, k, v, o_part, lse_part, table, q_offsets, k_offsets, v_offsets, cu_q, cu_k,
            q.stride(-2), q.stride(-1), k.stride(-2), k.stride(-1), v.stride(-2), v.stride(-1),
            n_q, n_k, d, group, slices, row_tiles, max_splits, part_rows)
    meta = dict(
        **args_of_features,
        VARLEN=varlen,
        ONE_HEAD_PER_TILE=one_head,
        BLOCK_Q=TILE_ROWS,
        BLOCK_K=block_k,
        BLOCK_D=block_d,
        INPUT_PRECISION="ieee" if q.dtype == torch.float32 else "tf32",
        OFFSET_ALIGN=offset_alignment(q, k, v),
        num_warps=4 if num_warps is None else num_warps,
        num_stages=stages if num_stages is None else num_stages,
    )
    replay.launch(_split_kv_kernel, sequences * (slices // group) * row_tiles * max_splits, args,
                  meta, ("q", "k", "v", "o_part", "lse_part"), recording)
    args = (o_part, lse_part, table, o, lse, cu_q, *o_strides, *lse_strides, n_q, d, slices,
            part_rows)
    meta = dict(VARLEN=varlen, BLOCK_R=max(16, triton.next_power_of_2(part_rows)), BLOCK_D=block_d,
                num_warps=4)
    replay.launch(_merge_kernel, sequences * slices, args, meta,
                  ("o_part", "lse_part", None, "o", "lse"), recording)
