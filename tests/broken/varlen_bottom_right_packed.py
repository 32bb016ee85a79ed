"""Varlen kernel module with one bug: bottom-right alignment measured from the packed totals.

The contract puts query ``i`` of sequence ``b`` at ``c_i = i + n_k(b) - n_q(b)`` under
``causal_alignment="bottom_right"``: each sequence is aligned by its own lengths. This module shifts
every sequence by ``total_k - total_q`` instead (the shift of one dense call on the packed batch),
so wherever a sequence's ``n_k - n_q`` differs from the batch's, its causal diagonal and its window
move: rows see keys they must not, or lose ones they must see. Smallest input that shows it:
causal, bottom-right, sequences of ``(n_q, n_k) = (2, 2)`` then ``(1, 2)`` (``total_k - total_q =
1``): sequence 0's row 0 is placed at ``c = 1`` and sees its key 1.

Its dense ``attention`` and ``attention_with_lse`` are :mod:`tests.conforming`'s (correct, every
feature), so ``check_varlen_matches_separate`` compares the broken packed path with a right one.
"""

import torch

from oracle.dense import visible_keys
from tests import conforming
from tests.broken._varlen import heads_first, pack, spans

__all__ = ["attention", "attention_with_lse", "attention_varlen", "attention_varlen_with_lse"]

FEATURES = conforming.FEATURES | {"varlen"}
attention = conforming.attention
attention_with_lse = conforming.attention_with_lse


def attention_varlen_with_lse(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                              is_causal=False, *, scale=None, window=None, softcap=None,
                              causal_alignment="top_left"):
    outs, lses = [], []
    for rows_q, rows_k in spans(cu_seqlens_q, cu_seqlens_k):
        if rows_q.start == rows_q.stop:
            continue
        qb, kb, vb = (heads_first(t[r]) for t, r in ((q, rows_q), (k, rows_k), (v, rows_k)))
        s = conforming.scores(qb, kb, False, scale, None, softcap, "top_left")  # scaled, capped
        rows, cols = (torch.arange(t.shape[-2], device=q.device) for t in (qb, kb))
        # the bug: the alignment's n_q and n_k are the packed totals, not this sequence's lengths
        seen = visible_keys(rows, cols, q.shape[0], k.shape[0], is_causal=is_causal, window=window,
                            causal_alignment=causal_alignment)
        s = s.masked_fill(~seen, float("-inf"))
        m = s.amax(-1, keepdim=True)
        p = torch.exp(s - m.masked_fill(torch.isneginf(m), 0.0))  # a row with no key: all weights 0
        l_i = p.sum(-1, keepdim=True)
        o = torch.matmul(p, conforming.up(conforming.kv_heads(qb, vb))) / l_i.masked_fill(l_i == 0, 1.0)
        outs.append(o.to(q.dtype))
        lses.append((m + torch.log(l_i)).squeeze(-1).detach().float())
    return pack(q, outs, lses)


def attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, is_causal=False,
                     **features):
    return attention_varlen_with_lse(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                                     is_causal, **features)[0]
