"""Varlen kernel module with one bug: it turns ``cu_seqlens_k`` into the sequence lengths in place
(``cu[1:] -= cu[:-1]``, to save an allocation), so the caller's offsets come back as lengths.

Each call is right for the offsets it was given (it is :mod:`tests.broken._varlen`'s); one
``cu_seqlens`` usually serves every layer of a model, and the next layer's call reads lengths as
offsets. Smallest input that shows it: two sequences, the first with at least one key.
"""

import torch

from tests.broken import _varlen
from tests.broken._varlen import attention, attention_with_lse

__all__ = ["attention", "attention_with_lse", "attention_varlen", "attention_varlen_with_lse"]


def attention_varlen_with_lse(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                              is_causal=False):
    out = _varlen.attention_varlen_with_lse(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                                            max_seqlen_k, is_causal)
    with torch.no_grad():
        cu_seqlens_k[1:] -= cu_seqlens_k[:-1].clone()  # the bug: "the offsets are not needed any more"
    return out


def attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, is_causal=False):
    return attention_varlen_with_lse(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                                     is_causal)[0]
