"""The correct packed attention with the contract's features, the base of the broken varlen modules
whose bug is in a feature: each sequence through :mod:`tests.conforming`'s scores on ``[heads, n,
d]`` views of the packed tensors (autograd differentiates it; no backward of its own), packed back
with :mod:`tests.broken._varlen`'s helpers. Dense calls are :mod:`tests.conforming`'s.
"""

import torch

from tests import conforming as C
from tests.broken._varlen import heads_first, pack, spans

FEATURES = C.FEATURES | {"varlen"}
SUPPORTED_DTYPES = C.SUPPORTED_DTYPES
attention = C.attention
attention_with_lse = C.attention_with_lse


def sequence(qh, kh, vh, is_causal, scale=None, window=None, softcap=None, causal_alignment="top_left",
             scores=C.scores):
    """``(o, lse)`` of one sequence, heads first; ``scores`` builds its masked scores."""
    s = scores(qh, kh, is_causal, scale, window, softcap, causal_alignment)
    return C.attend(s, qh, vh), torch.logsumexp(s, -1).float()


def packed(q, k, v, cu_seqlens_q, cu_seqlens_k, is_causal, one=sequence, **features):
    """Packed ``(o, lse)``: ``one`` on each sequence with queries."""
    outs, lses = [], []
    for rows_q, rows_k in spans(cu_seqlens_q, cu_seqlens_k):
        if rows_q.start == rows_q.stop:
            continue  # a sequence without queries produces nothing
        o, lse = one(heads_first(q[rows_q]), heads_first(k[rows_k]), heads_first(v[rows_k]), is_causal,
                     **features)
        outs.append(o)
        lses.append(lse)
    return pack(q, outs, lses)


def with_scores(scores):
    """``(attention_varlen_with_lse, attention_varlen)`` of a module whose one bug is in ``scores``
    (the signature of :func:`tests.conforming.scores`): each sequence through it."""

    def one(qh, kh, vh, is_causal, **features):
        return sequence(qh, kh, vh, is_causal, scores=scores, **features)

    def attention_varlen_with_lse(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                                  is_causal=False, **features):
        return packed(q, k, v, cu_seqlens_q, cu_seqlens_k, is_causal, one=one, **features)

    def attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, is_causal=False,
                         **features):
        return attention_varlen_with_lse(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                                         is_causal, **features)[0]

    return attention_varlen_with_lse, attention_varlen


def attention_varlen_with_lse(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                              is_causal=False, **features):
    return packed(q, k, v, cu_seqlens_q, cu_seqlens_k, is_causal, **features)


def attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, is_causal=False,
                     **features):
    return packed(q, k, v, cu_seqlens_q, cu_seqlens_k, is_causal, **features)[0]
