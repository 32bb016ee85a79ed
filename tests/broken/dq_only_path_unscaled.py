"""Kernel module with one bug: when only q requires grad, the backward takes a shorter path that
forgets the softmax scale in ``dq`` (``dS k``, not ``scale dS k``).

Autograd tells a backward which gradients it needs (``ctx.needs_input_grad``); with frozen keys and
values (a frozen encoder's cross-attention, a cached prompt) a kernel may skip the dk/dv pass and
compute ``dq`` on its own, and that path is where this bug lives. With all three inputs requiring
grad, as every other gradient check calls it, the backward is right. Smallest input that shows it:
a head dim d > 1, two keys with different values, only q requiring grad.
"""

import math

from tests.broken import _float32


class _Attention(_float32.SavedForward):
    @staticmethod
    def backward(ctx, do):
        q, k, v, o, lse = ctx.saved_tensors
        dq, dk, dv = _float32.backward(q, k, v, o, lse, do, ctx.is_causal)
        if not (ctx.needs_input_grad[1] or ctx.needs_input_grad[2]):
            return dq * math.sqrt(q.shape[-1]), None, None, None  # the bug: the dq-only path's scale
        return dq, dk, dv, None


def attention(q, k, v, is_causal=False):
    return _Attention.apply(q, k, v, is_causal)


def attention_with_lse(q, k, v, is_causal=False):
    return attention(q, k, v, is_causal), _float32.attention_with_lse(q, k, v, is_causal)[1]
