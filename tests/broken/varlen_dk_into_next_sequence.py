"""Varlen kernel module with one bug: the backward's key range ends one key late, so gradients
leak into the next sequence's first key.

The forward is correct. The backward recomputes ``P = exp(S - lse)`` from the saved lse over keys
``cu_k[b] .. cu_k[b + 1]`` inclusive (``<=`` for ``<``): the next sequence's first key gets a
probability it never had, so its ``dk``, ``dv`` receive this sequence's gradient, and this
sequence's ``dq`` a term from it. Causal, only rows ``i >= n_k`` reach that key. Smallest input
that shows it: two sequences of one query and one key each, non-causal: ``dv`` of sequence 1
depends on sequence 0's upstream gradient.
"""

import torch

from tests.broken import _float32, _varlen
from tests.broken._varlen import attention, attention_with_lse, heads_first, spans

__all__ = ["attention", "attention_with_lse", "attention_varlen", "attention_varlen_with_lse"]


class _Varlen(_varlen.SavedForward):
    @staticmethod
    def backward(ctx, do, _dlse):
        q, k, v, o, lse, cu_seqlens_q, cu_seqlens_k = ctx.saved_tensors
        dq, dk, dv = (torch.zeros_like(t, dtype=torch.float32) for t in (q, k, v))
        for rows_q, rows_k in spans(cu_seqlens_q, cu_seqlens_k):
            if rows_q.start == rows_q.stop:
                continue
            rows_k = slice(rows_k.start, min(rows_k.stop + 1, k.shape[0]))  # the bug: one key too many
            grads = _float32.backward(*(heads_first(t[r]) for t, r in (
                (q, rows_q), (k, rows_k), (v, rows_k), (o, rows_q), (lse, rows_q), (do, rows_q))),
                ctx.is_causal)
            dq[rows_q] += heads_first(grads[0])
            dk[rows_k] += heads_first(grads[1])
            dv[rows_k] += heads_first(grads[2])
        return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype), None, None, None


attention_varlen_with_lse, attention_varlen = _varlen.entry_points(_Varlen)
