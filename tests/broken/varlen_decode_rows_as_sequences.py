"""Varlen kernel module with one bug: a decoding batch (``max_seqlen_q == 1``) takes query row ``r``
for sequence ``r``.

A decode path that launches one program per query row and reads the keys of sequence ``r`` from
``cu_seqlens_k[r]:cu_seqlens_k[r + 1]`` never reads ``cu_seqlens_q``: right while every sequence
has its one query, wrong once a sequence without queries (a finished request, a cache slot kept)
comes before others, whose rows then attend another sequence's keys. The sixth held-out round's
packed module did this (docs/mutation.md). Smallest input that shows it: ``seqlens_q = (0, 1)``,
``seqlens_k = (1, 2)``.
"""

from tests.broken import _varlen_features as base
from tests.broken._varlen import heads_first, pack

__all__ = ["FEATURES", "SUPPORTED_DTYPES", "attention", "attention_with_lse", "attention_varlen",
           "attention_varlen_with_lse"]

FEATURES = base.FEATURES
SUPPORTED_DTYPES = base.SUPPORTED_DTYPES
attention = base.attention
attention_with_lse = base.attention_with_lse


def attention_varlen_with_lse(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                              is_causal=False, **features):
    if max_seqlen_q != 1:
        return base.attention_varlen_with_lse(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                                              max_seqlen_k, is_causal, **features)
    ck = cu_seqlens_k.tolist()
    outs, lses = [], []
    for r in range(q.shape[0]):  # the bug: row r's keys are sequence r's, not its own sequence's
        keys = slice(ck[r], ck[r + 1])
        o, lse = base.sequence(heads_first(q[r:r + 1]), heads_first(k[keys]), heads_first(v[keys]),
                               is_causal, **features)
        outs.append(o)
        lses.append(lse)
    return pack(q, outs, lses)


def attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, is_causal=False,
                     **features):
    return attention_varlen_with_lse(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                                     is_causal, **features)[0]
