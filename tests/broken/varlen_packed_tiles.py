"""Varlen kernel module with one bug: key tiles are aligned to the packed rows, not to each
sequence's start, while the module promises ``BATCH_INVARIANT = True``.

The online softmax walks a sequence's keys in tiles cut at multiples of 64 of the *packed* key
index, so a sequence that starts mid-tile is walked in other pieces than when it is computed alone
(where tiles start at its first key). The math is the same, so the oracle checks pass, and tile
edges do not depend on values, so nothing leaks; but the bits differ from the dense path, which
the module promised they would not. Smallest input that shows it: a sequence of 65 keys starting
at packed key 1.
"""

import torch

from tests.broken._float32 import scores, up
from tests.broken._varlen import attention, attention_with_lse, heads_first, pack, spans

__all__ = ["attention", "attention_with_lse", "attention_varlen", "attention_varlen_with_lse"]

BATCH_INVARIANT = True
BLOCK = 64


def attention_varlen_with_lse(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                              is_causal=False):
    outs, lses = [], []
    for rows_q, rows_k in spans(cu_seqlens_q, cu_seqlens_k):
        if rows_q.start == rows_q.stop:
            continue
        qb, kb, vb = (heads_first(t[r]) for t, r in ((q, rows_q), (k, rows_k), (v, rows_k)))
        s, vb = scores(qb, kb, is_causal), up(vb)
        # the bug: tile edges at packed key indices that are multiples of BLOCK
        edges = [0] + [e - rows_k.start for e in range(-(-(rows_k.start + 1) // BLOCK) * BLOCK,
                                                       rows_k.stop, BLOCK)] + [kb.shape[-2]]
        m = torch.full(s.shape[:-1] + (1,), float("-inf"), dtype=s.dtype, device=s.device)
        l_i = torch.zeros_like(m)
        acc = torch.zeros(*s.shape[:-1], vb.shape[-1], dtype=s.dtype, device=s.device)
        for a, b in zip(edges, edges[1:]):
            m_new = torch.maximum(m, s[..., a:b].amax(-1, keepdim=True))
            alpha = torch.exp(m - m_new)
            p = torch.exp(s[..., a:b] - m_new)
            l_i = alpha * l_i + p.sum(-1, keepdim=True)
            acc = alpha * acc + torch.matmul(p, vb[..., a:b, :])
            m = m_new
        outs.append((acc / l_i).to(q.dtype))
        lses.append((m + torch.log(l_i)).squeeze(-1).detach())
    return pack(q, outs, lses)


def attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, is_causal=False):
    return attention_varlen_with_lse(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                                     is_causal)[0]
