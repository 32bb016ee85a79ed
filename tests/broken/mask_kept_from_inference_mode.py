"""Kernel module with one bug: it keeps each shape's mask of hidden keys, built on first use (as
``functools.lru_cache`` on the lengths would), and applies it with ``masked_fill``, which autograd
saves for backward. A first call under ``torch.inference_mode()`` builds the mask as an inference
tensor, and every later call that records gradients, at that shape, raises ("Inference tensors
cannot be saved for backward").

Every call is right, as long as the first call at a shape is not an inference one: every other
check passes. Smallest input that shows it: any call under inference mode, then the same shape
with gradients.
"""

import torch

from tests import conforming
from tests.conforming import FEATURES, SUPPORTED_DTYPES

__all__ = ["FEATURES", "SUPPORTED_DTYPES", "attention", "attention_with_lse"]

_HIDDEN: dict = {}


def _hidden(q, k, is_causal, window, causal_alignment) -> torch.Tensor:
    key = (q.shape[-2], k.shape[-2], q.device, is_causal, window, causal_alignment)
    if key not in _HIDDEN:  # the bug: kept whatever mode the first call ran in
        _HIDDEN[key] = ~conforming.visible(q.shape[-2], k.shape[-2], is_causal, window, causal_alignment,
                                           q.device)
    return _HIDDEN[key]


def _scores(q, k, is_causal, scale=None, window=None, softcap=None, causal_alignment="top_left"):
    s = conforming.scores(q, k, False, scale, None, softcap, causal_alignment)  # every key seen
    return s.masked_fill(_hidden(q, k, is_causal, window, causal_alignment), conforming.HIDDEN)


def attention(q, k, v, is_causal=False, **features):
    return conforming.attend(_scores(q, k, is_causal, **features), q, v)


attention_with_lse = conforming.attention_with_lse  # forward-only, no mask kept
