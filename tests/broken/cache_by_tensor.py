"""Kernel module with one bug: outside autograd it prepares k and v once per tensor object (an
upcast, contiguous copy, cached as ``functools.lru_cache`` on a tensor argument would: by identity),
so a k or v overwritten in place since (a KV cache written between decoding steps) is read as it was.

Each call on fresh tensors is right; so is every call that records gradients. Smallest input that
shows it: any call, then ``k.copy_(other)`` and the same call again.
"""

import torch

from tests import conforming
from tests.broken._kept import kept
from tests.conforming import FEATURES, SUPPORTED_DTYPES

__all__ = ["FEATURES", "SUPPORTED_DTYPES", "attention", "attention_with_lse"]

_PREPARED: dict = {}


def _prepared(t: torch.Tensor) -> torch.Tensor:
    # the bug: a new copy for a new tensor object only, not for new values
    return kept(_PREPARED, (t,), lambda: conforming.up(t).clone(memory_format=torch.contiguous_format))


def _inputs(k, v):
    if torch.is_grad_enabled() and (k.requires_grad or v.requires_grad):
        return k, v
    return _prepared(k), _prepared(v)


def attention(q, k, v, is_causal=False, **features):
    return conforming.attention(q, *_inputs(k, v), is_causal, **features).to(q.dtype)


def attention_with_lse(q, k, v, is_causal=False, **features):
    o, lse = conforming.attention_with_lse(q, *_inputs(k, v), is_causal, **features)
    return o.to(q.dtype), lse
