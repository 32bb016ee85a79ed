"""Kernel module: the float64 dense oracle, with its output cast back to the input dtype.

Its varlen entry points are the padded varlen oracle (:func:`oracle.varlen.dense_attention_varlen`)
cast back the same way.
"""

from __future__ import annotations

import torch

from oracle.dense import dense_attention
from oracle.varlen import dense_attention_varlen

FEATURES = frozenset({"scale", "gqa", "window", "softcap", "bottom_right", "varlen"})


def attention_with_lse(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, is_causal: bool = False, **features
) -> tuple[torch.Tensor, torch.Tensor]:
    o, lse = dense_attention(q, k, v, is_causal, **features)
    return o.to(q.dtype), lse.float().detach()


def attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, is_causal: bool = False, **features
) -> torch.Tensor:
    return attention_with_lse(q, k, v, is_causal, **features)[0]


def attention_varlen_with_lse(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu_seqlens_q: torch.Tensor,
    cu_seqlens_k: torch.Tensor, max_seqlen_q: int, max_seqlen_k: int, is_causal: bool = False,
    **features,
) -> tuple[torch.Tensor, torch.Tensor]:
    # The oracle pads to the longest sequence itself; max_seqlen_* are part of the contract only.
    o, lse = dense_attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, is_causal, **features)
    return o.to(q.dtype), lse.float().detach()


def attention_varlen(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu_seqlens_q: torch.Tensor,
    cu_seqlens_k: torch.Tensor, max_seqlen_q: int, max_seqlen_k: int, is_causal: bool = False,
    **features,
) -> torch.Tensor:
    return attention_varlen_with_lse(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                                     is_causal, **features)[0]
