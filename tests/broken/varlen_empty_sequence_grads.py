"""Varlen kernel module with one bug: a sequence without queries never gets its ``dk``, ``dv`` written.

The backward launches its key-side programs per query tile, so a sequence with ``n_q = 0`` launches
none, and its rows of ``dk``, ``dv`` keep whatever the buffers held. In a kernel that is
``torch.empty`` memory; here, to be deterministic, the buffers start as copies of ``k`` and ``v``
(a backward that reuses its inputs' memory). Everything else is right, so only the gradient check
sees it (the no-leakage check never changes such a sequence's neighbours' inputs into its rows,
and the per-sequence check skips sequences without queries). Smallest input that shows it: one
sequence of ``(n_q, n_k) = (0, 1)`` beside one of ``(1, 1)``.
"""

import torch

from tests.broken import _float32, _varlen
from tests.broken._varlen import attention, attention_with_lse, heads_first, spans

__all__ = ["attention", "attention_with_lse", "attention_varlen", "attention_varlen_with_lse"]


class _Varlen(_varlen.SavedForward):
    @staticmethod
    def backward(ctx, do, _dlse):
        q, k, v, o, lse, cu_seqlens_q, cu_seqlens_k = ctx.saved_tensors
        dq = torch.zeros_like(q)
        dk, dv = k.clone(), v.clone()  # the bug: rows no program writes keep these values
        for rows_q, rows_k in spans(cu_seqlens_q, cu_seqlens_k):
            if rows_q.start == rows_q.stop:
                continue
            grads = _float32.backward(*(heads_first(t[r]) for t, r in (
                (q, rows_q), (k, rows_k), (v, rows_k), (o, rows_q), (lse, rows_q), (do, rows_q))),
                ctx.is_causal)
            dq[rows_q], dk[rows_k], dv[rows_k] = (heads_first(g) for g in grads)
        return dq, dk, dv, None, None, None


attention_varlen_with_lse, attention_varlen = _varlen.entry_points(_Varlen)
