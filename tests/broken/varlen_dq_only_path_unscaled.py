"""Varlen kernel module with one bug: when only q requires grad, the packed backward takes a
shorter path that forgets the softmax scale in ``dq`` (``dS k``, not ``scale dS k``).

The packed twin of ``dq_only_path_unscaled``: with frozen keys and values (``ctx.needs_input_grad``)
the backward skips the dk/dv work, and that path is where the bug lives. With all three requiring
grad every check sees a right backward. Smallest input that shows it: one sequence of two keys
with different values, head dim d > 1, only q requiring grad.
"""

import math

import torch

from tests.broken import _varlen
from tests.broken._varlen import attention, attention_with_lse

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
        dq, dk, dv = _varlen.backward(q, k, v, o, lse, do, cu_seqlens_q, cu_seqlens_k, ctx.is_causal)
        if not (ctx.needs_input_grad[1] or ctx.needs_input_grad[2]):
            return dq * math.sqrt(q.shape[-1]), None, None, None, None, None  # the bug: dq-only path
        return dq, dk, dv, None, None, None


def attention_varlen_with_lse(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                              is_causal=False):
    return _Varlen.apply(q, k, v, cu_seqlens_q, cu_seqlens_k, is_causal)


def attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, is_causal=False):
    return attention_varlen_with_lse(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                                     is_causal)[0]
