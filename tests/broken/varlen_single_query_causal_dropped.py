"""Varlen kernel module with one bug: when every sequence has one query row (``max_seqlen_q == 1``)
it drops ``is_causal``, as FlashAttention's varlen forward does (there, with bottom-right alignment,
causal is a no-op for one row). Under the contract's default top-left alignment the row sees its
sequence's first key alone, so the call attends to every key instead.

Written blind to the suite in a held-out round of other people's kernels (docs/mutation.md, the
thirty-second session); no packed grid case had every sequence one row and causal top-left.
Smallest input that shows it: one sequence of one query row and two keys, causal.
"""

from tests.broken._varlen import attention, attention_with_lse, run_sequences, spans

__all__ = ["attention", "attention_with_lse", "attention_varlen", "attention_varlen_with_lse"]


def attention_varlen_with_lse(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                              is_causal=False):
    if max_seqlen_q == 1:
        is_causal = False  # the bug: right only for bottom-right alignment
    return run_sequences(q, k, v, spans(cu_seqlens_q, cu_seqlens_k), is_causal)


def attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, is_causal=False):
    return attention_varlen_with_lse(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                                     is_causal)[0]
