"""Varlen kernel module with one bug: the packed path turns the softcap on with ``softcap is not
None``, so ``softcap=0`` (the contract's other spelling of off, and FlashAttention's default) caps
every score at 0: ``0 * tanh(s / 0)`` is 0, every visible key weighs the same. The dense path and
every ``softcap > 0`` are right.

Written blind to the suite in a held-out round of other people's kernels (docs/mutation.md, the
thirty-third session): no case passed ``softcap=0`` to a kernel (the cases dropped it as off).
Smallest input that shows it: one sequence, a query and two keys, ``softcap=0.0``.
"""

import torch

from tests import conforming as C
from tests.broken import _varlen_features as base
from tests.broken._varlen_features import FEATURES, SUPPORTED_DTYPES, attention, attention_with_lse

__all__ = ["FEATURES", "SUPPORTED_DTYPES", "attention", "attention_with_lse", "attention_varlen",
           "attention_varlen_with_lse"]


def _scores(q, k, is_causal, scale, window, softcap, causal_alignment):
    s = torch.matmul(C.up(q), C.kv_heads(q, C.up(k)).transpose(-2, -1)) * C.softmax_scale(q, scale)
    if softcap is not None:  # the bug: 0 is off too
        s = C.cap(s, softcap)
    seen = C.visible(q.shape[-2], k.shape[-2], is_causal, window, causal_alignment, q.device)
    return s.masked_fill(~seen, C.HIDDEN)


def _sequence(qh, kh, vh, is_causal, **features):
    return base.sequence(qh, kh, vh, is_causal, scores=_scores, **features)


def attention_varlen_with_lse(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                              is_causal=False, **features):
    return base.packed(q, k, v, cu_seqlens_q, cu_seqlens_k, is_causal, one=_sequence, **features)


def attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, is_causal=False,
                     **features):
    return attention_varlen_with_lse(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                                     is_causal, **features)[0]
