"""Kernel module with one bug: online softmax that rescales the denominator but not the accumulator.

Key tiles of 16; when a later tile raises the row max, ``l`` is multiplied by ``alpha`` but
``acc`` is not, so earlier tiles keep too much weight and the weights sum to more than one: the
output can leave the range of the values. Smallest input that shows it: 17 keys with the
largest score in the second tile.
"""

import torch

from tests.broken._float32 import scores, up

BLOCK = 16


def attention_with_lse(q, k, v, is_causal=False):
    s = scores(q, k, is_causal)
    vf = up(v)
    m = torch.full(s.shape[:-1], float("-inf"), dtype=s.dtype, device=s.device)
    l_i = torch.zeros(s.shape[:-1], dtype=s.dtype, device=s.device)
    acc = torch.zeros((*s.shape[:-1], v.shape[-1]), dtype=s.dtype, device=s.device)
    for start in range(0, s.shape[-1], BLOCK):
        s_j = s[..., start : start + BLOCK]
        m_new = torch.maximum(m, s_j.amax(-1))
        alpha = torch.exp(m - m_new)
        p = torch.exp(s_j - m_new.unsqueeze(-1))
        l_i = l_i * alpha + p.sum(-1)
        acc = acc + torch.matmul(p, vf[..., start : start + BLOCK, :])  # the bug: acc * alpha + ...
        m = m_new
    return (acc / l_i.unsqueeze(-1)).to(q.dtype), (m + torch.log(l_i)).detach()


def attention(q, k, v, is_causal=False):
    return attention_with_lse(q, k, v, is_causal)[0]
