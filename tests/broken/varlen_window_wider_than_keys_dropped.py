"""Varlen kernel module with one bug: a window side at least ``max_seqlen_k`` wide is dropped (made
-1, unbounded) before attending, on the reasoning that a window wider than the longest key sequence
hides no key. True while every ``c_i`` is a key position; with more queries than keys it is not:
top-left, ``c_i - left`` passes key 0 for the last rows; bottom-right, ``c_i + right`` falls before
key 0 for the first rows. Those rows see keys (or all keys) they must not.

Written blind to the suite in a held-out round of other people's kernels (docs/mutation.md, the
thirty-fourth session): no packed case had a window side as wide as its longest key sequence
together with a sequence of more queries than keys. Smallest input that shows it: one sequence of
3 queries and 1 key, ``window=(1, -1)`` top-left: query 2 must see no key.
"""

from tests.broken import _varlen_features as base
from tests.broken._varlen_features import FEATURES, SUPPORTED_DTYPES, attention, attention_with_lse

__all__ = ["FEATURES", "SUPPORTED_DTYPES", "attention", "attention_with_lse", "attention_varlen",
           "attention_varlen_with_lse"]


def _narrowed(window, max_seqlen_k):
    if window is None:
        return None
    # The bug: a side at least as wide as the longest key sequence is taken as unbounded.
    left, right = (-1 if side >= max_seqlen_k else side for side in window)
    return None if (left, right) == (-1, -1) else (left, right)


def attention_varlen_with_lse(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                              is_causal=False, window=None, **features):
    return base.packed(q, k, v, cu_seqlens_q, cu_seqlens_k, is_causal,
                       window=_narrowed(window, max_seqlen_k), **features)


def attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, is_causal=False,
                     **features):
    return attention_varlen_with_lse(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                                     is_causal, **features)[0]
