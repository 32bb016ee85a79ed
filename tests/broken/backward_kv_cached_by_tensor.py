"""Kernel module with one bug: its backward prepares k and v (a float32, contiguous copy) once per
tensor object (cached by identity, as ``functools.lru_cache`` on a tensor argument would), so a k
or v overwritten in place since its first backward (a buffer refilled between training steps) is
read as it was. The forward reads its inputs afresh.

Every output is right, and so is every backward of tensors it has not seen before. Smallest input
that shows it: a forward and backward, then ``k.detach().copy_(other)`` and the same forward and
backward of the same leaf tensors again: ``dq`` is the old keys'.

(Keyed by identity, not by address: a cache keyed by ``data_ptr`` also answers a new tensor that
the allocator put where a freed one was, which other checks then see by chance.)
"""

import torch

from tests.broken import _float32
from tests.broken._kept import kept

_PREPARED: dict = {}


def _prepared(t: torch.Tensor) -> torch.Tensor:
    # the bug: a new copy for a new tensor object only, not for new values
    return kept(_PREPARED, (t,), lambda: _float32.up(t).clone(memory_format=torch.contiguous_format))


class _Attention(_float32.SavedForward):
    @staticmethod
    def backward(ctx, do):
        q, k, v, o, lse = ctx.saved_tensors
        dq, dk, dv = _float32.backward(q, _prepared(k), _prepared(v), o, lse, do, ctx.is_causal)
        return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype), None


def attention(q, k, v, is_causal=False):
    _float32.reject_float64(q)
    return _Attention.apply(q, k, v, is_causal)


def attention_with_lse(q, k, v, is_causal=False):
    return attention(q, k, v, is_causal), _float32.attention_with_lse(q, k, v, is_causal)[1]
