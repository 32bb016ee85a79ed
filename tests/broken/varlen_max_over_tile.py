"""Varlen kernel module with one bug: the row max is taken over the whole key tile loaded from the
sequence's start, before any mask, so it includes the following sequences' keys.

Softmax does not care which constant is subtracted, so the output stays within rounding of the
oracle and equal, within the error model, to the sequence alone; but another sequence's keys now
decide this sequence's rounding, which only the bit-for-bit no-leakage check sees (and, at large
scores, a neighbour's key far above this sequence's own would underflow its rows). Smallest input
that shows it: two sequences of one query and one key: changing sequence 1's key changes the bits
of sequence 0's output.
"""

import torch

from tests.broken._float32 import scores, up
from tests.broken._varlen import attention, attention_with_lse, heads_first, pack, spans

__all__ = ["attention", "attention_with_lse", "attention_varlen", "attention_varlen_with_lse"]

BLOCK = 64


def attention_varlen_with_lse(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                              is_causal=False):
    outs, lses = [], []
    for rows_q, rows_k in spans(cu_seqlens_q, cu_seqlens_k):
        if rows_q.start == rows_q.stop:
            continue
        n_k = rows_k.stop - rows_k.start
        tiles = slice(rows_k.start, min(rows_k.start + BLOCK * -(-n_k // BLOCK), k.shape[0]))
        qb, kb, vb, k_tile = (heads_first(t[r]) for t, r in ((q, rows_q), (k, rows_k), (v, rows_k),
                                                             (k, tiles)))
        m = scores(qb, k_tile, False).amax(-1, keepdim=True).detach()  # the bug: unmasked tile
        p = torch.exp(scores(qb, kb, is_causal) - m)
        l_i = p.sum(-1, keepdim=True)
        outs.append((torch.matmul(p, up(vb)) / l_i).to(q.dtype))
        lses.append((m + torch.log(l_i)).squeeze(-1).detach())
    return pack(q, outs, lses)


def attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, is_causal=False):
    return attention_varlen_with_lse(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                                     is_causal)[0]
