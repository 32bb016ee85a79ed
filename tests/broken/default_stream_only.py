"""Kernel module with one bug: on CUDA it computes on a stream of its own, ordered against the
*default* stream (it waits for it before the call, and makes it wait after), not against the
caller's current stream: code written and tested where everything runs on the default stream.

On the default stream it is right, so every other check passes. Smallest input that shows it: any
call inside ``torch.cuda.stream(s)`` behind work queued on ``s`` that writes its inputs (it reads
them before that work has run).
"""

import torch

from tests import conforming
from tests.conforming import FEATURES, SUPPORTED_DTYPES

__all__ = ["FEATURES", "SUPPORTED_DTYPES", "attention", "attention_with_lse"]

_OWN: dict[torch.device, torch.cuda.Stream] = {}


def _on_own_stream(call, q, *args, **features):
    if q.device.type != "cuda":
        return call(q, *args, **features)
    own = _OWN.setdefault(q.device, torch.cuda.Stream(q.device))
    default = torch.cuda.default_stream(q.device)
    own.wait_stream(default)  # the bug: the default stream, where torch.cuda.current_stream() is meant
    with torch.cuda.stream(own):
        result = call(q, *args, **features)
    default.wait_stream(own)
    return result


def attention(q, k, v, is_causal=False, **features):
    return _on_own_stream(conforming.attention, q, k, v, is_causal, **features)


def attention_with_lse(q, k, v, is_causal=False, **features):
    return _on_own_stream(conforming.attention_with_lse, q, k, v, is_causal, **features)
