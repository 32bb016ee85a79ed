"""Varlen kernel module with one bug: its schedule of sequences comes from a function cached with
``functools.lru_cache`` on the two ``cu_seqlens`` tensors, so the cache holds those tensors (and
each batch's schedule) alive, 64 batches deep; and since a tensor hashes by identity, offsets
overwritten in place since are read as they were.

Every call on fresh offsets is right. Smallest input that shows it: one packed call, then
``del cu_seqlens_q, cu_seqlens_k`` and ``gc.collect()``: their storages are still alive.
"""

import functools

from tests.broken._varlen import attention, attention_with_lse, run_sequences, spans

__all__ = ["attention", "attention_with_lse", "attention_varlen", "attention_varlen_with_lse"]


@functools.lru_cache(maxsize=64)  # the bug: the cache holds its tensor arguments
def _schedule(cu_seqlens_q, cu_seqlens_k):
    return spans(cu_seqlens_q, cu_seqlens_k)


def attention_varlen_with_lse(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                              is_causal=False):
    return run_sequences(q, k, v, _schedule(cu_seqlens_q, cu_seqlens_k), is_causal)


def attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, is_causal=False):
    return attention_varlen_with_lse(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                                     is_causal)[0]
