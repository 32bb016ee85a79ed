"""Varlen kernel module with one bug: the causal diagonal is placed with the wrong tensor's offset.

The kernel turns a packed query row into a position within its sequence by subtracting the
sequence's *key* offset ``cu_k[b]`` instead of its query offset ``cu_q[b]``. Wherever the two
differ (an earlier sequence had ``n_q != n_k``) the diagonal moves by ``cu_q[b] - cu_k[b]``: rows
see future keys (or lose visible ones). Smallest input that shows it: causal, sequences of
``(n_q, n_k) = (2, 1)`` then ``(2, 2)``: sequence 1's row 0 sees its key 1.
"""

import torch

from tests.broken._float32 import up
from tests.broken._varlen import attention, attention_with_lse, heads_first, pack, spans

__all__ = ["attention", "attention_with_lse", "attention_varlen", "attention_varlen_with_lse"]


def attention_varlen_with_lse(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                              is_causal=False):
    outs, lses = [], []
    for rows_q, rows_k in spans(cu_seqlens_q, cu_seqlens_k):
        if rows_q.start == rows_q.stop:
            continue
        qb, kb, vb = (up(heads_first(t[r])) for t, r in ((q, rows_q), (k, rows_k), (v, rows_k)))
        s = torch.matmul(qb, kb.transpose(-2, -1)) / qb.shape[-1] ** 0.5
        if is_causal:
            row = torch.arange(rows_q.start, rows_q.stop, device=q.device) - rows_k.start  # the bug
            col = torch.arange(kb.shape[-2], device=q.device)
            s = s.masked_fill(col[None, :] > row[:, None], float("-inf"))
        m = s.amax(-1, keepdim=True)
        p = torch.exp(s - m)
        l_i = p.sum(-1, keepdim=True)
        outs.append((torch.matmul(p, vb) / l_i).to(q.dtype))
        lses.append((m + torch.log(l_i)).squeeze(-1).detach())
    return pack(q, outs, lses)


def attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, is_causal=False):
    return attention_varlen_with_lse(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                                     is_causal)[0]
