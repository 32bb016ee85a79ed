"""Varlen kernel module with one bug: its packed path loops over the sequences on the host with one
intra-op thread (``torch.set_num_threads(1)``, so that small per-sequence ops do not pay for a thread
pool), then restores the thread count it read when the module was imported, not the caller's.

Every value is right, and from torch's defaults the call leaves the process exactly as it found it:
the count at import is the default. A caller who had set another thread count (a server pinning
each worker to a few cores) comes out of the call with torch's default again. Smallest input that
shows it: ``torch.set_num_threads(1)`` (or 2 where the default is 1), then one packed call.
"""

import torch

from tests.broken._varlen import attention, attention_with_lse, run_sequences, spans

__all__ = ["attention", "attention_with_lse", "attention_varlen", "attention_varlen_with_lse"]

_THREADS_AT_IMPORT = torch.get_num_threads()


def attention_varlen_with_lse(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                              is_causal=False):
    torch.set_num_threads(1)
    try:
        return run_sequences(q, k, v, spans(cu_seqlens_q, cu_seqlens_k), is_causal)
    finally:
        torch.set_num_threads(_THREADS_AT_IMPORT)  # the bug: torch's default, not the caller's count


def attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, is_causal=False):
    return attention_varlen_with_lse(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                                     is_causal)[0]
