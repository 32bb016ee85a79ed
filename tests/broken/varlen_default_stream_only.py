"""Varlen kernel module with one bug: on CUDA its packed calls run on a stream of its own, ordered
against the *default* stream (it waits for it before the call, and makes it wait after), not against
the caller's current stream; and it reads ``cu_seqlens`` back to the host on that stream, so the
caller's stream is never synchronized. The dense calls are right (:mod:`tests.broken.default_stream_only`
is this bug in them).

On the default stream it is right, so every other check passes. Smallest input that shows it: any
packed call inside ``torch.cuda.stream(s)`` behind work queued on ``s`` that writes its inputs (it
reads them, the offsets too, before that work has run).
"""

import math

import torch

from tests.broken import _float32
from tests.broken._varlen import attention, attention_with_lse, heads_first, spans

__all__ = ["attention", "attention_with_lse", "attention_varlen", "attention_varlen_with_lse"]

_OWN: dict[torch.device, torch.cuda.Stream] = {}

ordered_against = torch.cuda.default_stream
"""The stream the packed calls wait for and make wait: the bug (``torch.cuda.current_stream`` is
right; the suite's GPU test sets it so, to show that the check passes the same code then)."""


def _packed(q, k, v, cu_seqlens_q, cu_seqlens_k, is_causal):
    """Packed ``(o, lse)`` in buffers shaped by q, each sequence's rows filled by a dense call."""
    o = torch.zeros_like(q)
    lse = torch.full(q.shape[:2], -math.inf, dtype=torch.float32, device=q.device)
    for rows_q, rows_k in spans(cu_seqlens_q, cu_seqlens_k):
        if rows_q.start == rows_q.stop:
            continue
        o_b, lse_b = _float32.attention_with_lse(heads_first(q[rows_q]), heads_first(k[rows_k]),
                                                 heads_first(v[rows_k]), is_causal)
        o[rows_q], lse[rows_q] = heads_first(o_b), lse_b.detach().transpose(0, 1)
    return o, lse


def attention_varlen_with_lse(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                              is_causal=False):
    if q.device.type != "cuda":
        return _packed(q, k, v, cu_seqlens_q, cu_seqlens_k, is_causal)
    own = _OWN.setdefault(q.device, torch.cuda.Stream(q.device))
    caller = ordered_against(q.device)  # the bug: the default stream, not the current one
    own.wait_stream(caller)
    with torch.cuda.stream(own):
        result = _packed(q, k, v, cu_seqlens_q, cu_seqlens_k, is_causal)
    caller.wait_stream(own)
    return result


def attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, is_causal=False):
    return attention_varlen_with_lse(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                                     is_causal)[0]
