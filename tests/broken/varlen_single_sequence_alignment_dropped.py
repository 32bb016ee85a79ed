"""Varlen kernel module with one bug: a batch of one sequence skips the packing and calls the dense
path on ``[heads, n, d]`` views, passing the scale, window and softcap but not
``causal_alignment``, so a lone sequence is always aligned top-left. Batches of two sequences or
more, and ``n_q == n_k``, are right.

Written blind to the suite in a held-out round of other people's kernels (docs/mutation.md, the
thirty-third session): no packed grid case was a batch of one sequence with bottom-right alignment
and ``n_q != n_k``. Smallest input that shows it: ``cu_seqlens_q = [0, 1]``, ``cu_seqlens_k = [0,
2]``, causal, bottom-right (the query sees both keys, not only the first).
"""

from tests.broken import _varlen_features as base
from tests.broken._varlen import heads_first
from tests.broken._varlen_features import FEATURES, SUPPORTED_DTYPES, attention, attention_with_lse

__all__ = ["FEATURES", "SUPPORTED_DTYPES", "attention", "attention_with_lse", "attention_varlen",
           "attention_varlen_with_lse"]


def attention_varlen_with_lse(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                              is_causal=False, *, scale=None, window=None, softcap=None,
                              causal_alignment="top_left"):
    if cu_seqlens_q.numel() == 2 and int(cu_seqlens_q[1]) > 0:  # one sequence: nothing to pack
        # The bug: causal_alignment is not passed on.
        o, lse = base.sequence(heads_first(q), heads_first(k), heads_first(v), is_causal, scale=scale,
                               window=window, softcap=softcap)
        return o.transpose(0, 1), lse.transpose(0, 1)
    return base.packed(q, k, v, cu_seqlens_q, cu_seqlens_k, is_causal, scale=scale, window=window,
                       softcap=softcap, causal_alignment=causal_alignment)


def attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, is_causal=False,
                     **features):
    return attention_varlen_with_lse(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                                     is_causal, **features)[0]
