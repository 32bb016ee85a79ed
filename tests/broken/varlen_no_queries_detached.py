"""Varlen kernel module with one bug: a batch in which no sequence has queries gets fresh empty
tensors, made outside autograd.

A kernel that returns early when there is nothing to launch (``total_q == 0``) with
``q.new_empty(...)`` returns the right shapes, dtype and device, and nothing to differentiate: a
training step whose loss is that ``o`` alone raises in ``backward()``, though q, k and v require
grad. The fifth held-out round's packed module did this (docs/mutation.md). Every batch with a
query is right.
"""

import torch

from tests.broken import _varlen
from tests.broken._varlen import attention, attention_with_lse

__all__ = ["attention", "attention_with_lse", "attention_varlen", "attention_varlen_with_lse"]


def attention_varlen_with_lse(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                              is_causal=False):
    if q.shape[0] == 0:  # the bug: an early return outside autograd
        return q.new_empty((0, *q.shape[1:])), q.new_empty((0, q.shape[1]), dtype=torch.float32)
    return _varlen.attention_varlen_with_lse(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                                             max_seqlen_k, is_causal)


def attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, is_causal=False):
    return attention_varlen_with_lse(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                                     is_causal)[0]
