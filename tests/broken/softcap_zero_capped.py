"""Kernel module with one bug: the softcap is turned on with ``softcap is not None``, so
``softcap=0`` (the contract's other spelling of off, and FlashAttention's default) caps every score
at 0: ``0 * tanh(s / 0)`` is 0, every visible key weighs the same (and the gradients are NaN).
``softcap=None`` and every ``softcap > 0`` are right.

The dense twin of ``varlen_softcap_zero_capped`` (a held-out module of the thirty-third session,
docs/mutation.md): no case passed ``softcap=0`` to a kernel. Smallest input that shows it: a query
and two keys, ``softcap=0.0``.
"""

import torch

from tests import conforming as C
from tests.conforming import FEATURES, SUPPORTED_DTYPES

__all__ = ["FEATURES", "SUPPORTED_DTYPES", "attention", "attention_with_lse"]


def _scores(q, k, is_causal, scale, window, softcap, causal_alignment):
    s = torch.matmul(C.up(q), C.kv_heads(q, C.up(k)).transpose(-2, -1)) * C.softmax_scale(q, scale)
    if softcap is not None:  # the bug: 0 is off too
        s = C.cap(s, softcap)
    seen = C.visible(q.shape[-2], k.shape[-2], is_causal, window, causal_alignment, q.device)
    return s.masked_fill(~seen, C.HIDDEN)


def attention(q, k, v, is_causal=False, *, scale=None, window=None, softcap=None,
              causal_alignment="top_left"):
    return C.attend(_scores(q, k, is_causal, scale, window, softcap, causal_alignment), q, v)


def attention_with_lse(q, k, v, is_causal=False, *, scale=None, window=None, softcap=None,
                       causal_alignment="top_left"):
    with torch.no_grad():
        s = _scores(q, k, is_causal, scale, window, softcap, causal_alignment)
        return C.attend(s, q, v), torch.logsumexp(s, -1).float()
