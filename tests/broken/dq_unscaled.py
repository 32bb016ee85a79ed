"""Kernel module with one bug: the backward forgets the softmax scale in ``dq``: ``dS k``, not
``scale dS k``.

The forward is correct, and so are ``dk`` and ``dv``. Smallest input that shows it: any head dim
d > 1 (at d = 1 the scale is 1), two keys with different values.
"""

import math

from tests.broken import _float32


class _Attention(_float32.SavedForward):
    @staticmethod
    def backward(ctx, do):
        q, k, v, o, lse = ctx.saved_tensors
        dq, dk, dv = _float32.backward(q, k, v, o, lse, do, ctx.is_causal)
        return dq * math.sqrt(q.shape[-1]), dk, dv, None  # the bug: undoes the scale of dq


def attention(q, k, v, is_causal=False):
    return _Attention.apply(q, k, v, is_causal)


def attention_with_lse(q, k, v, is_causal=False):
    return attention(q, k, v, is_causal), _float32.attention_with_lse(q, k, v, is_causal)[1]
