"""Varlen kernel module with one bug: it builds its schedule (each sequence's rows of q and of k)
once per pair of ``cu_seqlens`` tensor objects, cached by identity (as ``functools.lru_cache`` on a
tensor argument would), so offsets overwritten in place since (a serving loop refilling its buffers
for the next batch) are read as they were.

Every call on fresh offsets is right. Smallest input that shows it: a batch of two sequences of
lengths 1 and 2, then the same buffers refilled with lengths 2 and 1, and the same call again.
"""

import torch

from tests.broken._kept import kept
from tests.broken._varlen import attention, attention_with_lse, run_sequences, spans

__all__ = ["attention", "attention_with_lse", "attention_varlen", "attention_varlen_with_lse"]

_SCHEDULES: dict = {}


def _schedule(cu_seqlens_q: torch.Tensor, cu_seqlens_k: torch.Tensor) -> list:
    # the bug: a new schedule for new tensor objects only, not for new offsets
    return kept(_SCHEDULES, (cu_seqlens_q, cu_seqlens_k), lambda: spans(cu_seqlens_q, cu_seqlens_k))


def attention_varlen_with_lse(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                              is_causal=False):
    return run_sequences(q, k, v, _schedule(cu_seqlens_q, cu_seqlens_k), is_causal)


def attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, is_causal=False):
    return attention_varlen_with_lse(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                                     is_causal)[0]
