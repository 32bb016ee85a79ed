"""The correct packed attention the broken varlen modules start from: each sequence through
:mod:`tests.broken._float32` on ``[heads, n, d]`` views of the packed tensors, packed back.

Each ``varlen_*`` module copies the step it breaks, so its one bug is the only difference from this
file. Their dense ``attention`` and ``attention_with_lse`` are :mod:`tests.broken._float32`'s
(correct), so ``check_varlen_matches_separate`` compares the broken varlen path with a right one.
"""

import torch

from tests.broken import _float32

attention = _float32.attention
attention_with_lse = _float32.attention_with_lse


def spans(cu_seqlens_q, cu_seqlens_k):
    """Per sequence: ``(rows of q, rows of k)``, as slices of the packed tensors."""
    cq, ck = cu_seqlens_q.tolist(), cu_seqlens_k.tolist()
    return [(slice(cq[b], cq[b + 1]), slice(ck[b], ck[b + 1])) for b in range(len(cq) - 1)]


def heads_first(t):
    """A packed ``[n, heads, d]`` slice as the ``[heads, n, d]`` view a dense call takes."""
    return t.transpose(0, 1)


def pack(q, outs, lses):
    """Per-sequence ``[heads, n, d]`` outputs and ``[heads, n]`` lse back to packed rows."""
    o = torch.cat([q[:0]] + [x.transpose(0, 1) for x in outs])
    lse = torch.cat([q.new_zeros((0, q.shape[1]), dtype=torch.float32)] + [x.transpose(0, 1) for x in lses])
    return o, lse


def run_sequences(q, k, v, schedule, is_causal):
    """Packed ``(o, lse)``, each sequence of ``schedule`` (:func:`spans`' list) computed alone."""
    outs, lses = [], []
    for rows_q, rows_k in schedule:
        if rows_q.start == rows_q.stop:
            continue  # a sequence without queries produces nothing
        o, lse = _float32.attention_with_lse(heads_first(q[rows_q]), heads_first(k[rows_k]),
                                             heads_first(v[rows_k]), is_causal)
        outs.append(o)
        lses.append(lse)
    return pack(q, outs, lses)


def attention_varlen_with_lse(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                              is_causal=False):
    return run_sequences(q, k, v, spans(cu_seqlens_q, cu_seqlens_k), is_causal)


def attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, is_causal=False):
    return attention_varlen_with_lse(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                                     is_causal)[0]


def backward(q, k, v, o, lse, do, cu_seqlens_q, cu_seqlens_k, is_causal):
    """Packed ``dq, dk, dv`` from the saved lse, each sequence by :func:`tests.broken._float32.backward`
    (0 for the keys of a sequence without queries)."""
    dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
    for rows_q, rows_k in spans(cu_seqlens_q, cu_seqlens_k):
        if rows_q.start == rows_q.stop:
            continue
        grads = _float32.backward(*(heads_first(t[r]) for t, r in (
            (q, rows_q), (k, rows_k), (v, rows_k), (o, rows_q), (lse, rows_q), (do, rows_q))), is_causal)
        dq[rows_q], dk[rows_k], dv[rows_k] = (heads_first(g) for g in grads)
    return dq, dk, dv


class SavedForward(torch.autograd.Function):
    """The correct packed forward, saving ``q, k, v, o, lse, cu_seqlens_q, cu_seqlens_k`` and
    ``is_causal``, returning ``(o, lse)`` (lse not differentiable): a broken varlen module whose bug
    is in its backward subclasses this and writes only ``backward(ctx, do, _dlse)``."""

    @staticmethod
    def forward(ctx, q, k, v, cu_seqlens_q, cu_seqlens_k, is_causal):
        o, lse = attention_varlen_with_lse(q, k, v, cu_seqlens_q, cu_seqlens_k, 0, 0, is_causal)
        ctx.save_for_backward(q, k, v, o, lse, cu_seqlens_q, cu_seqlens_k)
        ctx.is_causal = is_causal
        ctx.mark_non_differentiable(lse)
        return o, lse


def entry_points(function):
    """The contract's ``attention_varlen_with_lse`` and ``attention_varlen`` through
    ``function.apply(q, k, v, cu_seqlens_q, cu_seqlens_k, is_causal)`` (a :class:`SavedForward`)."""

    def attention_varlen_with_lse(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                                  is_causal=False):
        return function.apply(q, k, v, cu_seqlens_q, cu_seqlens_k, is_causal)

    def attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, is_causal=False):
        return attention_varlen_with_lse(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                                         is_causal)[0]

    return attention_varlen_with_lse, attention_varlen
