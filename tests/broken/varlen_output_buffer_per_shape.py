"""Varlen kernel module with one bug: outside autograd, the packed call writes ``o`` and the lse into
buffers kept per (shape, dtype, device) for the next call (a serving loop's packed batches often
have the same totals), and returns those buffers: the next call of those totals overwrites the
results the caller holds.

Every result is right when its call returns; a call autograd records allocates. Smallest input that
shows it: two packed calls with the same totals, the first's output read after the second.
"""

import torch

from tests.broken import _varlen
from tests.broken._varlen import attention, attention_with_lse

__all__ = ["attention", "attention_with_lse", "attention_varlen", "attention_varlen_with_lse"]

_BUFFERS: dict = {}


def _kept(t: torch.Tensor) -> torch.Tensor:
    buffer = _BUFFERS.setdefault((tuple(t.shape), t.dtype, t.device), torch.empty_like(t))
    return buffer.copy_(t)  # the bug: the buffer is the caller's result, and the next call's


def attention_varlen_with_lse(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                              is_causal=False):
    o, lse = _varlen.attention_varlen_with_lse(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                                               max_seqlen_k, is_causal)
    recorded = torch.is_grad_enabled() and any(t.requires_grad for t in (q, k, v))
    if recorded or torch.is_inference_mode_enabled():
        return o, lse
    return _kept(o), _kept(lse)


def attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, is_causal=False):
    return attention_varlen_with_lse(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                                     is_causal)[0]
