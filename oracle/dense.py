"""Dense attention computed the obvious way, in a chosen precision: the reference everything is judged by.

``dense_attention(q, k, v, is_causal)`` upcasts to float64 by default and is *the oracle*. The same
function with ``compute_dtype=q.dtype`` is the *same-precision reference* that the error model
(:mod:`properties.error_model`) uses to decide how much error the dtype itself makes unavoidable
(for the lse, which the contract makes float32, ``compute_dtype=torch.float32``: the inputs
upcast). Using one function for both means the two differ only in precision, never in formula.

It takes every feature of the extended contract (``properties/kernels.py``), with its meaning
spelled out once, here:

- ``scale``: the softmax scale (``None``: ``1 / sqrt(d)``);
- grouped-query heads: k and v may have fewer heads (dim -3) than q; query head ``h`` uses kv head
  ``h // (h_q // h_kv)``;
- ``causal_alignment``: ``c_i = i`` (``"top_left"``) or ``i + n_k - n_q`` (``"bottom_right"``);
- ``window=(left, right)``: query ``i`` sees key ``j`` iff ``c_i - left <= j <= c_i + right``
  (a bound of ``-1`` is dropped); with ``is_causal`` also ``j <= c_i``;
- ``softcap``: ``c > 0`` replaces each scaled score ``s`` by ``c tanh(s / c)`` before the softmax;
- a row that sees no key: ``o = 0``, ``lse = -inf``, and no gradient flows from it (never NaN).
"""

from __future__ import annotations

import math

import torch

ALIGNMENTS = ("top_left", "bottom_right")


def visible_keys(
    rows: torch.Tensor, cols: torch.Tensor, n_q: int, n_k: int, *, is_causal: bool = False,
    window: tuple[int, int] | None = None, causal_alignment: str = "top_left",
) -> torch.Tensor:
    """``[len(rows), len(cols)]`` bool, True where query ``rows[a]`` may see key ``cols[b]`` of an
    ``n_q x n_k`` problem (the causal mask and the window, with their alignment)."""
    if causal_alignment not in ALIGNMENTS:
        raise ValueError(f"causal_alignment must be one of {ALIGNMENTS}, got {causal_alignment!r}")
    c = rows[:, None] + (n_k - n_q if causal_alignment == "bottom_right" else 0)
    j = cols[None, :]
    visible = torch.ones(len(rows), len(cols), dtype=torch.bool, device=rows.device)
    if is_causal:
        visible &= j <= c
    if window is not None:
        left, right = window
        if left >= 0:
            visible &= j >= c - left
        if right >= 0:
            visible &= j <= c + right
    return visible


def visible_mask(
    n_q: int, n_k: int, device: torch.device | str = "cpu", *, is_causal: bool = False,
    window: tuple[int, int] | None = None, causal_alignment: str = "top_left",
) -> torch.Tensor | None:
    """``[n_q, n_k]`` bool, True where query ``i`` may see key ``j``; ``None`` when every key is visible."""
    if causal_alignment not in ALIGNMENTS:
        raise ValueError(f"causal_alignment must be one of {ALIGNMENTS}, got {causal_alignment!r}")
    if not is_causal and window is None:
        return None
    return visible_keys(torch.arange(n_q, device=device), torch.arange(n_k, device=device), n_q, n_k,
                        is_causal=is_causal, window=window, causal_alignment=causal_alignment)


def softmax_scale(head_dim: int, scale: float | None = None) -> float:
    """The softmax scale a call uses: ``scale``, or ``1 / sqrt(head_dim)`` when it is None."""
    return 1.0 / math.sqrt(head_dim) if scale is None else scale


def causal_mask(n_q: int, n_k: int, device: torch.device | str) -> torch.Tensor:
    """``[n_q, n_k]`` bool, True where key ``j`` is hidden from query ``i`` (``j > i``, top-left aligned)."""
    return torch.ones(n_q, n_k, dtype=torch.bool, device=device).triu(1)


def expand_kv(q: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    """k or v with its heads (dim -3) repeated per query group, so that it has as many heads as q.

    Query head ``h`` uses kv head ``h // (h_q // h_kv)``: each kv head is repeated ``h_q // h_kv``
    times in place (``repeat_interleave``), as SDPA's ``enable_gqa`` and FlashAttention do.
    """
    if t.dim() < 3 or t.shape[-3] == q.shape[-3]:
        return t
    h_q, h_kv = q.shape[-3], t.shape[-3]
    if h_kv == 0 or h_q % h_kv:
        raise ValueError(f"q has {h_q} heads, which is not a multiple of k/v's {h_kv}")
    return t.repeat_interleave(h_q // h_kv, dim=-3)


def dense_scores(
    q: torch.Tensor, k: torch.Tensor, is_causal: bool = False, *, hidden: torch.Tensor | None = None,
    scale: float | None = None, window: tuple[int, int] | None = None, softcap: float | None = None,
    causal_alignment: str = "top_left",
) -> torch.Tensor:
    """Scaled (and, with ``softcap``, capped) scores ``q k^T`` in the dtype of ``q``; hidden keys at ``-inf``.

    ``hidden`` (bool, broadcastable to the scores, True where a key is hidden) masks keys besides
    the causal mask and the window: the varlen oracle (:mod:`oracle.varlen`) hides other sequences
    and padding. k may have fewer heads than q (grouped-query attention, :func:`expand_kv`).
    """
    k = expand_kv(q, k)
    scale = softmax_scale(q.shape[-1], scale)
    s = torch.matmul(q, k.transpose(-2, -1)) * scale
    if softcap:
        s = softcap * torch.tanh(s / softcap)
    visible = visible_mask(q.shape[-2], k.shape[-2], q.device, is_causal=is_causal, window=window,
                           causal_alignment=causal_alignment)
    if visible is not None:
        s = s.masked_fill(~visible, float("-inf"))
    if hidden is not None:
        s = s.masked_fill(hidden, float("-inf"))
    return s


def dense_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    is_causal: bool = False,
    *,
    compute_dtype: torch.dtype | None = torch.float64,
    hidden: torch.Tensor | None = None,
    scale: float | None = None,
    window: tuple[int, int] | None = None,
    softcap: float | None = None,
    causal_alignment: str = "top_left",
) -> tuple[torch.Tensor, torch.Tensor]:
    """``softmax(scale q k^T) v`` and the row log-sum-exp, computed densely in ``compute_dtype``.

    Args:
        q, k, v: ``[..., h_q, n_q, d]``, ``[..., h_kv, n_k, d]``, ``[..., h_kv, n_k, d]``
            (``h_kv`` divides ``h_q``; rank-2 inputs have no heads).
        is_causal: hide key ``j`` from query ``i`` when ``j > c_i`` (see the module docstring).
        compute_dtype: precision of every operation (``None``: the inputs' own dtype).
        hidden: optional bool mask, broadcastable to ``[..., n_q, n_k]``, True where a key is
            hidden as well.
        scale, window, softcap, causal_alignment: the contract's features (module docstring).

    Returns:
        ``o`` ``[..., n_q, d]`` and ``lse`` ``[..., n_q]``, both in ``compute_dtype``;
        differentiable in q, k, v. A row that sees no key has ``o = 0`` and ``lse = -inf``, and
        sends no gradient back.
    """
    if compute_dtype is not None:
        q, k, v = q.to(compute_dtype), k.to(compute_dtype), v.to(compute_dtype)
    s = dense_scores(q, k, is_causal, hidden=hidden, scale=scale, window=window, softcap=softcap,
                     causal_alignment=causal_alignment)
    v = expand_kv(q, v)
    empty = torch.isneginf(s).all(dim=-1, keepdim=True)
    if bool(empty.any()):
        # softmax over a row of -inf is NaN, and 0 * NaN poisons every gradient: such a row is
        # computed over zeros instead, and its weights and lse are then set by hand, with no
        # path back to the scores.
        s = s.masked_fill(empty, 0.0)
        p = torch.softmax(s, dim=-1).masked_fill(empty, 0.0)
        lse = torch.logsumexp(s, dim=-1).masked_fill(empty.squeeze(-1), float("-inf"))
    else:
        p = torch.softmax(s, dim=-1)
        lse = torch.logsumexp(s, dim=-1)
    return torch.matmul(p, v), lse
