"""Varlen kernel module with one bug: it turns ``cu_seqlens_k`` into the sequence lengths in place
(``cu[1:] -= cu[:-1]``, to save an allocation), so the caller's offsets come back as lengths.

Each call is right for the offsets it was given; one ``cu_seqlens`` usually serves every layer of a
model, and the next layer's call reads lengths as offsets. Smallest input that shows it: two
sequences, the first with at least one key.
"""

import torch

from tests.broken import _float32
from tests.broken._varlen import attention, attention_with_lse, heads_first, pack, spans

__all__ = ["attention", "attention_with_lse", "attention_varlen", "attention_varlen_with_lse"]


def _lengths_in_place(cu):
    with torch.no_grad():
        cu[1:] -= cu[:-1].clone()  # the bug: the caller's tensor
    return cu


def attention_varlen_with_lse(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                              is_causal=False):
    outs, lses = [], []
    for rows_q, rows_k in spans(cu_seqlens_q, cu_seqlens_k):
        if rows_q.start == rows_q.stop:
            continue
        o, lse = _float32.attention_with_lse(heads_first(q[rows_q]), heads_first(k[rows_k]),
                                             heads_first(v[rows_k]), is_causal)
        outs.append(o)
        lses.append(lse)
    _lengths_in_place(cu_seqlens_k)  # "the offsets are not needed any more"
    return pack(q, outs, lses)


def attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, is_causal=False):
    return attention_varlen_with_lse(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                                     is_causal)[0]
