"""Kernel module with one bug: the backward keeps ``D = rowsum(do * o)`` on the autograd context
after its first run (to skip the reduction "when the backward runs again"), and a second backward
of the same forward reuses it, whatever its own upstream gradient.

One backward per forward is right, and so is a second one for the same upstream gradient (the
check as it stood before the thirty-fourth session: the same ``do`` twice); a second loss on the
same activations (``retain_graph=True``, another upstream gradient) gets dq and dk from the first
loss's ``D``, dv right. Written blind to the suite in a held-out round of other people's kernels
(docs/mutation.md, the thirty-fourth session). Smallest input that shows it: one query, one key,
``o.sum().backward(retain_graph=True)`` then ``(2 * o).sum().backward()``: dq must stay 0.
"""

import torch

from tests.broken import _float32

# As flash: no float64, so gradcheck (several backwards of one forward too) is n/a, and
# check_backward_repeatable is the one check that sees the bug.
SUPPORTED_DTYPES = (torch.float16, torch.bfloat16, torch.float32)


class _Attention(_float32.SavedForward):
    @staticmethod
    def backward(ctx, do):
        q, k, v, o, lse = ctx.saved_tensors
        if not hasattr(ctx, "delta"):
            ctx.delta = _float32.delta(o, do)  # the bug: kept for the next backward
        return (*_float32.backward(q, k, v, o, lse, do, ctx.is_causal, d=ctx.delta), None)


def attention(q, k, v, is_causal=False):
    return _Attention.apply(q, k, v, is_causal)


def attention_with_lse(q, k, v, is_causal=False):
    return attention(q, k, v, is_causal), _float32.attention_with_lse(q, k, v, is_causal)[1]
