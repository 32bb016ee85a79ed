"""Kernel module with one bug: each call prepares each distinct input once (a float32 copy, q's
multiplied by the softmax scale so that the scores need none), keyed by address to save a copy when
one tensor fills several roles, and forgets that q's copy is scaled: in ``attention(x, x, x)`` k is
read from q's scaled copy, so the scores are scaled twice.

Every call on separate tensors is right, and so is one where k is v. Smallest input that shows it:
self-attention, the same tensor as q, k and v.
"""

import torch

from tests import conforming
from tests.conforming import FEATURES, SUPPORTED_DTYPES

__all__ = ["FEATURES", "SUPPORTED_DTYPES", "attention", "attention_with_lse"]


def _prepared(q, k, v, scale):
    copies: dict = {}

    def copy(t: torch.Tensor, factor: float) -> torch.Tensor:
        # the bug: keyed by address alone, not by (address, role)
        return copies.setdefault(t.data_ptr(), conforming.up(t) * factor)

    return copy(q, conforming.softmax_scale(q, scale)), copy(k, 1.0), copy(v, 1.0)


def attention(q, k, v, is_causal=False, *, scale=None, **features):
    o = conforming.attention(*_prepared(q, k, v, scale), is_causal, scale=1.0, **features)
    return o.to(q.dtype)


def attention_with_lse(q, k, v, is_causal=False, *, scale=None, **features):
    o, lse = conforming.attention_with_lse(*_prepared(q, k, v, scale), is_causal, scale=1.0, **features)
    return o.to(q.dtype), lse
