"""Kernel module with one bug: the forward it takes when autograd records the call (inputs that
require grad: the "training" path, which saves what its backward needs) forgets the softmax scale;
the path without gradients is right, and so is the backward, which recomputes from q, k, v.

A kernel that dispatches on ``requires_grad`` (SDPA picks its backend partly on it) can be right in
inference and wrong in training. Smallest input that shows it: a head dim d > 1, two keys with
different scores, inputs that require grad.
"""

import torch

from tests.broken import _float32


class _TrainingAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, is_causal):
        ctx.save_for_backward(q, k, v)
        ctx.is_causal = is_causal
        s = torch.matmul(_float32.up(q), _float32.up(k).transpose(-2, -1))  # the bug: no 1/sqrt(d)
        if is_causal:
            hidden = torch.ones(s.shape[-2:], dtype=torch.bool, device=s.device).triu(1)
            s = s.masked_fill(hidden, float("-inf"))
        return torch.matmul(torch.softmax(s, -1), _float32.up(v)).to(q.dtype)

    @staticmethod
    def backward(ctx, do):
        q, k, v = ctx.saved_tensors
        with torch.enable_grad():
            leaves = [t.detach().requires_grad_() for t in (q, k, v)]
            o = _float32.attention(*leaves, ctx.is_causal)
            return (*torch.autograd.grad(o, leaves, do), None)


def attention(q, k, v, is_causal=False):
    if torch.is_grad_enabled() and any(t.requires_grad for t in (q, k, v)):
        return _TrainingAttention.apply(q, k, v, is_causal)
    return _float32.attention(q, k, v, is_causal)


def attention_with_lse(q, k, v, is_causal=False):
    return _float32.attention_with_lse(q, k, v, is_causal)
