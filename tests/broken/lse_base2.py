"""Kernel module with one bug: the lse is returned in base 2 (``m2 + log2(l)``, not divided by log2(e)).

A Triton kernel keeps scores in base 2 for ``exp2``; this one forgets to convert the lse back.
The output is correct. Smallest input that shows it: any row whose lse is not 0, e.g. one query
and two keys with equal scores (lse = log 2, returned as 1).
"""

from tests.broken import _float32

LOG2E = 1.4426950408889634


def attention_with_lse(q, k, v, is_causal=False):
    o, lse = _float32.attention_with_lse(q, k, v, is_causal)
    return o, lse * LOG2E  # the bug: base-2 lse


def attention(q, k, v, is_causal=False):
    return _float32.attention(q, k, v, is_causal)
