"""Kernel module with one bug: each call turns SDPA's cuDNN backend off (the author's guard: cuDNN's
attention backward is not deterministic) and turns it back on afterwards,
``enable_cudnn_sdp(True)``: torch's default, not the caller's value. From torch's defaults that
restores the state exactly; a caller who had turned cuDNN's SDPA off (a known bad version, a
bit-for-bit reproduction) gets it back on after one call. Every value is right.

The seventh held-out round's packed module (docs/mutation.md) restored the switch from another
switch's saved value (``enable_cudnn_sdp(efficient_was)``), which from the defaults is the same
mistake; the state checks moved no SDPA switch off its default then. Smallest input that shows
it: ``torch.backends.cuda.enable_cudnn_sdp(False)``, then any call.
"""

import torch

from tests import conforming
from tests.conforming import FEATURES, SUPPORTED_DTYPES

__all__ = ["FEATURES", "SUPPORTED_DTYPES", "attention", "attention_with_lse"]


def _guarded(call, *args, **features):
    torch.backends.cuda.enable_cudnn_sdp(False)
    try:
        return call(*args, **features)
    finally:
        torch.backends.cuda.enable_cudnn_sdp(True)  # the bug: torch's default, not the caller's value


def attention(q, k, v, is_causal=False, **features):
    return _guarded(conforming.attention, q, k, v, is_causal, **features)


def attention_with_lse(q, k, v, is_causal=False, **features):
    return _guarded(conforming.attention_with_lse, q, k, v, is_causal, **features)
