"""Varlen kernel module with one bug: on CUDA its packed calls run on a stream of its own, ordered
against the *default* stream (it waits for it before the call, and makes it wait after), not against
the caller's current stream. The dense calls are right (:mod:`tests.broken.default_stream_only` is
this bug in them).

Its packed path never reads ``cu_seqlens`` back to the host (sequences are gathered into padded
blocks on the device, as a kernel given ``max_seqlen_*`` does), so nothing synchronizes the caller's
stream: with :data:`ordered_against` set to ``torch.cuda.current_stream`` it is a correct module
that ``check_varlen_current_stream`` can test conclusively, which flash (it reads the offsets back
to check them) is not.

On the default stream it is right, so every other check passes. Smallest input that shows it: any
packed call inside ``torch.cuda.stream(s)`` behind work queued on ``s`` that writes its inputs (it
reads them, the offsets too, before that work has run).
"""

import math

import torch

from tests.broken._varlen import attention, attention_with_lse

__all__ = ["attention", "attention_with_lse", "attention_varlen", "attention_varlen_with_lse"]

_OWN: dict[torch.device, torch.cuda.Stream] = {}

ordered_against = torch.cuda.default_stream
"""The stream the packed calls wait for and make wait: the bug (``torch.cuda.current_stream`` is
right; the suite's GPU test sets it so, to show that the check passes the same code then)."""


def _rows(cu_seqlens: torch.Tensor, longest: int, total: int):
    """``(rows, valid)``, ``[batch, longest]``: each sequence's packed row indices, and which are
    inside it; a row past a sequence's end points at row ``total`` (one spare row)."""
    at = torch.arange(longest, device=cu_seqlens.device)
    start, length = cu_seqlens[:-1].long(), (cu_seqlens[1:] - cu_seqlens[:-1]).long()
    valid = at < length[:, None]
    return torch.where(valid, start[:, None] + at, total), valid


def _packed(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, is_causal):
    """Packed ``(o, lse)``, every sequence at once on the device: top-left causal per sequence; a
    row that sees no key gets ``o = 0``, ``lse = -inf``."""
    rows_q, valid_q = _rows(cu_seqlens_q, max_seqlen_q, q.shape[0])
    rows_k, valid_k = _rows(cu_seqlens_k, max_seqlen_k, k.shape[0])

    def padded(t, rows):  # [batch, heads, longest, d], the spare row zero
        t = torch.cat([t.float(), t.new_zeros((1, *t.shape[1:]), dtype=torch.float32)])
        return t[rows].transpose(1, 2)

    s = padded(q, rows_q) @ padded(k, rows_k).transpose(-1, -2) / math.sqrt(q.shape[-1])
    seen = valid_q[:, None, :, None] & valid_k[:, None, None, :]
    if is_causal:
        seen = seen & torch.ones(s.shape[-2:], dtype=torch.bool, device=s.device).tril()
    s = s.masked_fill(~seen, -math.inf)
    m = s.amax(-1, keepdim=True).detach()
    m = torch.where(torch.isfinite(m), m, 0.0)
    p = torch.exp(s - m)
    l_i = p.sum(-1, keepdim=True)
    o = (p @ padded(v, rows_k)) / torch.where(l_i > 0, l_i, 1.0)
    lse = (m + torch.log(l_i)).squeeze(-1).detach()  # log 0 = -inf where no key is seen
    total = q.shape[0]
    o_packed = q.new_zeros((total + 1, *q.shape[1:]), dtype=torch.float32)
    o_packed = o_packed.index_put((rows_q,), o.transpose(1, 2))  # padding rows land in the spare row
    lse_packed = torch.full((total + 1, q.shape[1]), -math.inf, dtype=torch.float32, device=q.device)
    lse_packed = lse_packed.index_put((rows_q,), lse.transpose(1, 2))
    return o_packed[:total].to(q.dtype), lse_packed[:total]


def attention_varlen_with_lse(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                              is_causal=False):
    args = (q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, is_causal)
    if q.device.type != "cuda":
        return _packed(*args)
    own = _OWN.setdefault(q.device, torch.cuda.Stream(q.device))
    caller = ordered_against(q.device)  # the bug: the default stream, not the current one
    own.wait_stream(caller)
    with torch.cuda.stream(own):
        result = _packed(*args)
    caller.wait_stream(own)
    return result


def attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, is_causal=False):
    return attention_varlen_with_lse(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                                     is_causal)[0]
