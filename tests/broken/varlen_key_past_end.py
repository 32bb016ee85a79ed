"""Varlen kernel module with one bug: each sequence's key range ends one key late (``<= cu_k[b + 1]``
instead of ``<``), so its queries also see the next sequence's first key.

Causal, that key sits at position ``n_k`` of the sequence, so only rows ``i >= n_k`` see it.
Smallest input that shows it: two sequences of one query and one key each, non-causal: sequence 0's
output mixes in sequence 1's value.
"""

from tests.broken import _float32
from tests.broken._varlen import attention, attention_with_lse, heads_first, pack, spans

__all__ = ["attention", "attention_with_lse", "attention_varlen", "attention_varlen_with_lse"]


def attention_varlen_with_lse(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                              is_causal=False):
    outs, lses = [], []
    for rows_q, rows_k in spans(cu_seqlens_q, cu_seqlens_k):
        if rows_q.start == rows_q.stop:
            continue
        rows_k = slice(rows_k.start, min(rows_k.stop + 1, k.shape[0]))  # the bug: one key too many
        o, lse = _float32.attention_with_lse(heads_first(q[rows_q]), heads_first(k[rows_k]),
                                             heads_first(v[rows_k]), is_causal)
        outs.append(o)
        lses.append(lse)
    return pack(q, outs, lses)


def attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, is_causal=False):
    return attention_varlen_with_lse(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                                     is_causal)[0]
