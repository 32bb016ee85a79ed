"""Varlen kernel module with one bug: when only q requires grad, the packed backward takes a
shorter path that forgets the softmax scale in ``dq`` (``dS k``, not ``scale dS k``).

The packed twin of ``dq_only_path_unscaled``: with frozen keys and values (``ctx.needs_input_grad``)
the backward skips the dk/dv work, and that path is where the bug lives. With all three requiring
grad every check sees a right backward. Smallest input that shows it: one sequence of two keys
with different values, head dim d > 1, only q requiring grad.
"""

import math

from tests.broken import _varlen
from tests.broken._varlen import attention, attention_with_lse

__all__ = ["attention", "attention_with_lse", "attention_varlen", "attention_varlen_with_lse"]


class _Varlen(_varlen.SavedForward):
    @staticmethod
    def backward(ctx, do, _dlse):
        q, k, v, o, lse, cu_seqlens_q, cu_seqlens_k = ctx.saved_tensors
        dq, dk, dv = _varlen.backward(q, k, v, o, lse, do, cu_seqlens_q, cu_seqlens_k, ctx.is_causal)
        if not (ctx.needs_input_grad[1] or ctx.needs_input_grad[2]):
            return dq * math.sqrt(q.shape[-1]), None, None, None, None, None  # the bug: dq-only path
        return dq, dk, dv, None, None, None


attention_varlen_with_lse, attention_varlen = _varlen.entry_points(_Varlen)
