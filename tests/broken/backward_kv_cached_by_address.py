"""Kernel module with one bug: its backward prepares k and v (a float32, contiguous copy) once per
address, and finds them again by ``(data_ptr, shape, strides, dtype)``, so a k or v overwritten in
place since its first backward (a buffer refilled between training steps) is read as it was. The
forward reads its inputs afresh.

Every output is right, and so is every backward of tensors it has not seen before. Smallest input
that shows it: a forward and backward, then ``k.copy_(other)`` and the same forward and backward
again: ``dq`` is the old keys'.
"""

import torch

from tests.broken import _float32

_PREPARED: dict[tuple, torch.Tensor] = {}


def _prepared(t: torch.Tensor) -> torch.Tensor:
    key = (t.data_ptr(), tuple(t.shape), t.stride(), t.dtype)
    if key not in _PREPARED:  # the bug: an address says nothing of what is stored there now
        _PREPARED[key] = _float32.up(t).clone(memory_format=torch.contiguous_format)
    return _PREPARED[key]


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
