"""Kernel module with one bug: the backward turns the saved lse into base 2 in place
(``lse *= log2 e``, to use ``exp2`` as Triton kernels do), so it changes what the forward saved.

One backward per forward is right: the first conversion is the right one. A second backward of the
same forward (``retain_graph=True``) converts again and recomputes the probabilities from an lse
``log2 e`` times too large. Smallest input that shows it: any, with two backwards of one forward.
"""

import math

import torch

from tests.broken import _float32

LOG2E = 1 / math.log(2)


class _Attention(_float32.SavedForward):
    @staticmethod
    def backward(ctx, do):
        q, k, v, o, lse = ctx.saved_tensors
        # The bug: in place, on the saved tensor. Through .data, as a Triton kernel writing into the
        # saved buffer would be: invisible to autograd's version counter, so nothing raises.
        lse2 = lse.data.mul_(LOG2E)
        scale = 1 / math.sqrt(q.shape[-1])
        qf, kf, vf, of, dof = (_float32.up(t) for t in (q, k, v, o, do))
        p = torch.exp2(_float32.scores(qf, kf, ctx.is_causal) * LOG2E - lse2.unsqueeze(-1))
        dv = torch.matmul(p.transpose(-2, -1), dof)
        ds = p * (torch.matmul(dof, vf.transpose(-2, -1)) - (dof * of).sum(-1, keepdim=True))
        dq = torch.matmul(ds, kf) * scale
        dk = torch.matmul(ds.transpose(-2, -1), qf) * scale
        return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype), None


def attention(q, k, v, is_causal=False):
    return _Attention.apply(q, k, v, is_causal)


def attention_with_lse(q, k, v, is_causal=False):
    return attention(q, k, v, is_causal), _float32.attention_with_lse(q, k, v, is_causal)[1]
