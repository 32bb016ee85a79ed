"""Varlen kernel module with one bug: the packed backward turns the saved lse into base 2 in place,
so it changes what the forward saved.

The packed twin of ``lse_base2_in_place``: one backward per forward is right; a second backward of
the same packed forward (``retain_graph=True``) converts again and recomputes the probabilities
from an lse ``log2 e`` times too large. Smallest input that shows it: any packed batch, two
backwards of one forward.
"""

import math

from tests.broken import _varlen
from tests.broken._varlen import attention, attention_with_lse

__all__ = ["attention", "attention_with_lse", "attention_varlen", "attention_varlen_with_lse"]

LOG2E = 1 / math.log(2)


class _Varlen(_varlen.SavedForward):
    @staticmethod
    def backward(ctx, do, _dlse):
        q, k, v, o, lse, cu_seqlens_q, cu_seqlens_k = ctx.saved_tensors
        # The bug: in place, on the saved tensor, through .data (as a Triton kernel writing into the
        # saved buffer would be: invisible to autograd's version counter). The per-sequence backward
        # takes the natural-log lse, so it gets lse2 / log2 e: right the first time only.
        lse2 = lse.data.mul_(LOG2E)
        return (*_varlen.backward(q, k, v, o, lse2 / LOG2E, do, cu_seqlens_q, cu_seqlens_k, ctx.is_causal),
                None, None, None)


attention_varlen_with_lse, attention_varlen = _varlen.entry_points(_Varlen)
