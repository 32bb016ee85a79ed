"""Varlen kernel module with one bug: when only q requires grad, the packed backward takes a
shorter path that forgets the softmax scale in ``dq`` (``dS k``, not ``scale dS k``).

The packed twin of ``dq_only_path_unscaled``: with frozen keys and values (``ctx.needs_input_grad``)
the backward skips the dk/dv work, and that path is where the bug lives. With all three requiring
grad every check sees a right backward. Smallest input that shows it: one sequence of two keys
with different values, head dim d > 1, only q requiring grad.
"""

import math

import torch

from tests.broken import _float32, _varlen
from tests.broken._varlen import attention, attention_with_lse, heads_first, spans

__all__ = ["attention", "attention_with_lse", "attention_varlen", "attention_varlen_with_lse"]


class _Varlen(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, cu_seqlens_q, cu_seqlens_k, is_causal):
        o, lse = _varlen.attention_varlen_with_lse(q, k, v, cu_seqlens_q, cu_seqlens_k, 0, 0, is_causal)
        ctx.save_for_backward(q, k, v, o, lse, cu_seqlens_q, cu_seqlens_k)
        ctx.is_causal = is_causal
        ctx.mark_non_differentiable(lse)
        return o, lse

    @staticmethod
    def backward(ctx, do, _dlse):
        q, k, v, o, lse, cu_seqlens_q, cu_seqlens_k = ctx.saved_tensors
        dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
        for rows_q, rows_k in spans(cu_seqlens_q, cu_seqlens_k):
            if rows_q.start == rows_q.stop:
                continue
            grads = _float32.backward(*(heads_first(t[r]) for t, r in (
                (q, rows_q), (k, rows_k), (v, rows_k), (o, rows_q), (lse, rows_q), (do, rows_q))),
                ctx.is_causal)
            dq[rows_q], dk[rows_k], dv[rows_k] = (heads_first(g) for g in grads)
        if not (ctx.needs_input_grad[1] or ctx.needs_input_grad[2]):
            return dq * math.sqrt(q.shape[-1]), None, None, None, None, None  # the bug: dq-only path
        return dq, dk, dv, None, None, None


def attention_varlen_with_lse(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                              is_causal=False):
    return _Varlen.apply(q, k, v, cu_seqlens_q, cu_seqlens_k, is_causal)


def attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, is_causal=False):
    return attention_varlen_with_lse(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                                     is_causal)[0]
