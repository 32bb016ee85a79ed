"""Kernel module with one bug: the padding keys of a partial last key tile take part in the softmax.

A tiled kernel loads the last key tile with ``other=0`` past ``n_k`` and forgets to set those scores
to ``-inf``: each padding key has score ``q . 0 = 0`` and value 0, so it adds ``exp(0 - m)`` to the
denominator and nothing to the numerator. Lengths that fill their tiles are right. Smallest input
that shows it: one key (15 padding keys in its 16-key tile); the output is then ``v_0`` times
``p_0 / (p_0 + 15 exp(-m))`` instead of ``v_0``.
"""

import torch

from tests.broken._float32 import scores, up

BLOCK = 16


def attention_with_lse(q, k, v, is_causal=False):
    n_k = k.shape[-2]
    pad = -n_k % BLOCK
    k_tiles = torch.nn.functional.pad(up(k), (0, 0, 0, pad))  # zero rows, as a masked load gives
    v_tiles = torch.nn.functional.pad(up(v), (0, 0, 0, pad))
    s = scores(q, k_tiles, is_causal)  # the bug: no -inf for keys n_k..n_k+pad-1
    m = s.amax(-1, keepdim=True)
    p = torch.exp(s - m)
    l_i = p.sum(-1, keepdim=True)
    o = torch.matmul(p, v_tiles) / l_i
    return o.to(q.dtype), (m + torch.log(l_i)).squeeze(-1).detach()


def attention(q, k, v, is_causal=False):
    return attention_with_lse(q, k, v, is_causal)[0]
