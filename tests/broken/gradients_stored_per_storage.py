"""Kernel module with one bug: its backward hands back one gradient buffer per distinct input
storage (so that a tensor in two roles gets one buffer) and *stores* each role's gradient into it
instead of adding: when k is v, the buffer ends as dv, and autograd adds it for both roles, so the
shared tensor's gradient is 2 dv, not dk + dv.

The forward is right, and so is every gradient of separate tensors. Smallest input that shows it:
k and v the same tensor, with gradients.
"""

import torch

from tests import conforming
from tests.conforming import FEATURES, SUPPORTED_DTYPES

__all__ = ["FEATURES", "SUPPORTED_DTYPES", "attention", "attention_with_lse"]


class _Attention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, is_causal, features):
        ctx.save_for_backward(q, k, v)
        ctx.is_causal, ctx.features = is_causal, features
        return conforming.attention(q, k, v, is_causal, **features)

    @staticmethod
    def backward(ctx, do):
        q, k, v = ctx.saved_tensors
        with torch.enable_grad():
            leaves = [t.detach().requires_grad_() for t in (q, k, v)]
            o = conforming.attention(*leaves, ctx.is_causal, **ctx.features)
            grads = torch.autograd.grad(o, leaves, do)
        buffers: dict = {}
        for t, g in zip((q, k, v), grads):
            buffers.setdefault(t.data_ptr(), torch.empty_like(g)).copy_(g)  # the bug: copy_, not add_
        return (*(buffers[t.data_ptr()] for t in (q, k, v)), None, None)


def attention(q, k, v, is_causal=False, **features):
    return _Attention.apply(q, k, v, is_causal, features)


def attention_with_lse(q, k, v, is_causal=False, **features):
    return conforming.attention_with_lse(q, k, v, is_causal, **features)
