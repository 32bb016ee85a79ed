"""Packed variable-length attention (varlen): many sequences of different lengths in one call.

Sequences are packed along the first dim, as flash-attention's ``flash_attn_varlen_func`` takes
them: q ``[total_q, heads, d]``, k and v ``[total_k, heads, d]``, and ``cu_seqlens_q``,
``cu_seqlens_k`` (int32, ``batch + 1`` entries) the cumulative lengths, so that sequence ``b`` is
rows ``cu_seqlens_q[b]:cu_seqlens_q[b + 1]`` of q and ``cu_seqlens_k[b]:cu_seqlens_k[b + 1]``
of k and v. Each sequence attends only within itself; causal masking is top-left per sequence
(query ``i`` of a sequence sees its key ``j`` iff ``j <= i``). No padding is stored or computed.

The kernels are the dense ones (:mod:`flash.forward`, :mod:`flash.backward_triton`) with
``VARLEN`` set: a slice is a head, and each program reads its sequence's window from
``cu_seqlens``; the grid is sized by ``max_seqlen_*`` and tiles past a shorter sequence's end do
nothing. A sequence that the dense call would give to the split-KV path (:mod:`flash.decode`: a
few query rows over many keys) takes that path here too, and the forward skips it. A sequence's
numbers are therefore bit-for-bit those of the same sequence passed alone to
:func:`flash.attention` (same path, same tiles, same order of operations), which the suite checks.

A sequence may have no queries (``n_q = 0``: it produces nothing, and its keys get zero
gradients); one with queries and no keys is rejected, as attention over no keys is undefined.
Every argument is checked first (:func:`flash.checks.check_varlen_inputs`), which reads
``cu_seqlens`` back to the host once per call.
"""

from __future__ import annotations

import torch

from flash.backward_triton import Offsets, backward_config, launch_backward
from flash.checks import check_features, check_split_keys, check_varlen_inputs
from flash.decode import launch_split_kv, split_plans
from flash.forward import launch_forward, slice_offsets
from flash.scores import Features, resolve


def _heads_first(t: torch.Tensor) -> torch.Tensor:
    """``[total, heads, d]`` viewed as ``[heads, total, d]``: one slice per head, no copy."""
    return t.transpose(0, 1)


def varlen_forward(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu_seqlens_q: torch.Tensor,
    cu_seqlens_k: torch.Tensor, max_seqlen_q: int, max_seqlen_k: int, is_causal: bool,
    features: Features, lengths: tuple[list[int], list[int]], split_keys: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``o [total_q, h_q, d]`` (input dtype) and ``lse [total_q, h_q]`` (float32) of packed input.

    ``lengths``: the sequences' query and key lengths (from the input check). A sequence that the
    dense call would split alone (:func:`flash.decode.split_plan`) takes the split-KV path here
    too, so that it is computed exactly as alone; the others take the forward.
    """
    total_q, heads, d = q.shape
    o = torch.empty((total_q, heads, d), dtype=q.dtype, device=q.device)
    lse = torch.empty((total_q, heads), dtype=torch.float32, device=q.device)
    group = heads // k.shape[1]
    qh, kh, vh = (_heads_first(t) for t in (q, k, v))
    offsets = slice_offsets(qh), slice_offsets(kh, group), slice_offsets(vh, group)
    plans = split_plans(*lengths, features, split_keys, q.device)
    geometry = dict(o_strides=(d, heads * d), lse_strides=(1, heads), n_q=max_seqlen_q,
                    n_k=max_seqlen_k, slices=heads, sequences=cu_seqlens_q.numel() - 1,
                    features=features)
    launch_forward(qh, kh, vh, o, lse, *offsets, cu_seqlens_q, cu_seqlens_k, **geometry,
                   split_plan_table=None if plans is None else plans[0])
    if plans is not None:
        launch_split_kv(qh, kh, vh, o, lse, *offsets, cu_seqlens_q, cu_seqlens_k, plans,
                        group=group, split_keys=split_keys, **geometry)
    return o, lse


def varlen_backward(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, o: torch.Tensor, lse: torch.Tensor,
    do: torch.Tensor, cu_seqlens_q: torch.Tensor, cu_seqlens_k: torch.Tensor,
    max_seqlen_q: int, max_seqlen_k: int, features: Features,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``dq, dk, dv`` (contiguous, shaped like q, k, v) of packed input, with the Triton backward."""
    total_q, heads, d = q.shape
    total_k, kv_heads = k.shape[:2]
    delta = torch.empty((total_q, heads), dtype=torch.float32, device=q.device)
    # Every row is written: each key tile's program stores its rows (zeros for a sequence with no
    # queries), each query tile's program its rows of dq.
    dq = torch.empty((total_q, heads, d), dtype=q.dtype, device=q.device)
    dk = torch.empty((total_k, kv_heads, d), dtype=q.dtype, device=q.device)
    dv = torch.empty((total_k, kv_heads, d), dtype=q.dtype, device=q.device)
    qh, kh, vh, oh, doh = (_heads_first(t) for t in (q, k, v, o, do))
    group = heads // kv_heads
    offsets = Offsets(*(slice_offsets(t) for t in (qh, kh, vh, oh, doh)),
                      k_by_q=slice_offsets(kh, group), v_by_q=slice_offsets(vh, group))
    launch_backward(
        qh, kh, vh, oh, lse, doh, delta, dq, dk, dv, offsets, cu_seqlens_q, cu_seqlens_k,
        lse_strides=(1, heads), dq_strides=(d, heads * d), dkv_strides=(d, kv_heads * d),
        n_q=max_seqlen_q, n_k=max_seqlen_k, slices=heads, group=group,
        sequences=cu_seqlens_q.numel() - 1, features=features, config=backward_config(d, q.dtype),
    )
    return dq, dk, dv


class FlashAttentionVarlen(torch.autograd.Function):
    """Packed variable-length Flash Attention; returns ``(o, lse)``, ``lse`` not differentiable."""

    @staticmethod
    def forward(ctx, q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                is_causal=False, scale=None, window=None, softcap=None, causal_alignment="top_left",
                split_keys=None):
        lengths = check_varlen_inputs(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                                      max_seqlen_k, is_causal)
        check_features(scale, window, softcap, causal_alignment)
        check_split_keys(split_keys)
        features = resolve(q.shape[-1], is_causal, scale, window, softcap, causal_alignment)
        o, lse = varlen_forward(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                                is_causal, features, lengths, split_keys)
        ctx.save_for_backward(q, k, v, o, lse, cu_seqlens_q, cu_seqlens_k)
        ctx.geometry = (max_seqlen_q, max_seqlen_k, features)
        ctx.mark_non_differentiable(lse)
        return o, lse

    @staticmethod
    def backward(ctx, do, _dlse):
        q, k, v, o, lse, cu_q, cu_k = ctx.saved_tensors
        if do.dtype != q.dtype:
            do = do.to(q.dtype)
        dq, dk, dv = varlen_backward(q, k, v, o, lse, do, cu_q, cu_k, *ctx.geometry)
        return dq, dk, dv, None, None, None, None, None, None, None, None, None, None


def attention_varlen_with_lse(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu_seqlens_q: torch.Tensor,
    cu_seqlens_k: torch.Tensor, max_seqlen_q: int, max_seqlen_k: int, is_causal: bool = False,
    *, scale: float | None = None, window: tuple[int, int] | None = None,
    softcap: float | None = None, causal_alignment: str = "top_left", split_keys: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`attention_varlen`, plus the log-sum-exp per token and head (float32 ``[total_q, h_q]``)."""
    return FlashAttentionVarlen.apply(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                                      max_seqlen_k, is_causal, scale, window, softcap,
                                      causal_alignment, split_keys)


def attention_varlen(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu_seqlens_q: torch.Tensor,
    cu_seqlens_k: torch.Tensor, max_seqlen_q: int, max_seqlen_k: int, is_causal: bool = False,
    *, scale: float | None = None, window: tuple[int, int] | None = None,
    softcap: float | None = None, causal_alignment: str = "top_left", split_keys: int | None = None,
) -> torch.Tensor:
    """Attention over packed sequences: ``o [total_q, h_q, d]``, differentiable in q, k, v.

    Args:
        q: ``[total_q, h_q, d]``; k, v: ``[total_k, h_kv, d]`` with ``h_q % h_kv == 0`` (any
            strides; float16, bfloat16 or float32; head dims 1..256, as :func:`flash.attention`).
        cu_seqlens_q, cu_seqlens_k: int32 ``[batch + 1]`` on q's device: 0, then the running
            totals of the sequence lengths, ending at ``total_q`` / ``total_k``.
        max_seqlen_q, max_seqlen_k: ints at least the longest query / key sequence (they size the
            grid; larger only wastes programs).
        is_causal: causal masking within each sequence.
        scale, window, softcap, causal_alignment: as :func:`flash.attention`, per sequence (the
            bottom-right diagonal and the window follow each sequence's own lengths).
        split_keys: as :func:`flash.attention`; each sequence splits or not as it would alone.

    Raises ``TypeError``/``ValueError`` naming the argument for anything else (see
    :func:`flash.checks.check_varlen_inputs`).
    """
    return attention_varlen_with_lse(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                                     max_seqlen_k, is_causal, scale=scale, window=window,
                                     softcap=softcap, causal_alignment=causal_alignment,
                                     split_keys=split_keys)[0]
