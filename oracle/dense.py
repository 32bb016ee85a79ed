"""Dense attention computed the obvious way, in a chosen precision: the reference everything is judged by.

``dense_attention(q, k, v, is_causal)`` upcasts to float64 by default and is *the oracle*. The same
function with ``compute_dtype=q.dtype`` is the *same-precision reference* that the error model
(:mod:`properties.error_model`) uses to decide how much error the dtype itself makes unavoidable.
Using one function for both means the two differ only in precision, never in formula.
"""

from __future__ import annotations

import math

import torch


def causal_mask(n_q: int, n_k: int, device: torch.device | str) -> torch.Tensor:
    """``[n_q, n_k]`` bool, True where key ``j`` is hidden from query ``i`` (``j > i``, top-left aligned)."""
    return torch.ones(n_q, n_k, dtype=torch.bool, device=device).triu(1)


def dense_scores(
    q: torch.Tensor, k: torch.Tensor, is_causal: bool = False, *, hidden: torch.Tensor | None = None
) -> torch.Tensor:
    """Scaled scores ``q k^T / sqrt(d)`` in the dtype of ``q``, with hidden keys at ``-inf``.

    ``hidden`` (bool, broadcastable to the scores, True where a key is hidden) masks keys besides
    the causal mask: the varlen oracle (:mod:`oracle.varlen`) hides other sequences and padding.
    """
    s = torch.matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(q.shape[-1]))
    if is_causal:
        s = s.masked_fill(causal_mask(q.shape[-2], k.shape[-2], q.device), float("-inf"))
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
) -> tuple[torch.Tensor, torch.Tensor]:
    """``softmax(q k^T / sqrt(d)) v`` and the row log-sum-exp, computed densely in ``compute_dtype``.

    Args:
        q, k, v: ``[..., n_q, d]``, ``[..., n_k, d]``, ``[..., n_k, d]``.
        is_causal: hide key ``j`` from query ``i`` when ``j > i`` (top-left aligned).
        compute_dtype: precision of every operation (``None``: the inputs' own dtype).
        hidden: optional bool mask, broadcastable to ``[..., n_q, n_k]``, True where a key is
            hidden as well (no row may hide every key).

    Returns:
        ``o`` ``[..., n_q, d]`` and ``lse`` ``[..., n_q]``, both in ``compute_dtype``;
        differentiable in q, k, v.
    """
    if compute_dtype is not None:
        q, k, v = q.to(compute_dtype), k.to(compute_dtype), v.to(compute_dtype)
    s = dense_scores(q, k, is_causal, hidden=hidden)
    lse = torch.logsumexp(s, dim=-1)
    p = torch.softmax(s, dim=-1)
    return torch.matmul(p, v), lse
