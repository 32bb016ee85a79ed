"""Varlen kernel module with one bug: the packed lse buffer is allocated without a dtype.

As ``tests/broken/lse_in_default_dtype.py``, for the packed entry point: ``torch.full((total_q,
h_q), -inf)`` takes torch's default dtype, so only a caller that set another (float64, bfloat16)
sees an lse of that dtype. ``o`` and the gradients are right.
"""

import math

import torch

from tests.broken import _varlen
from tests.broken._varlen import attention, attention_with_lse

__all__ = ["attention", "attention_with_lse", "attention_varlen", "attention_varlen_with_lse"]


def attention_varlen_with_lse(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                              is_causal=False):
    o, lse = _varlen.attention_varlen_with_lse(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                                               max_seqlen_k, is_causal)
    out = torch.full(lse.shape, -math.inf, device=lse.device)  # the bug: no dtype=torch.float32
    return o, out.copy_(lse)


def attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, is_causal=False):
    return _varlen.attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                                    is_causal)
