"""Kernel module with one bug: outside autograd, ``attention`` writes its output into one buffer per
(shape, dtype, device), kept for the next call (an allocation spared per decoding step), and returns
that buffer: the next call of that shape overwrites the output the caller holds.

Every output is right when its call returns, and ``attention_with_lse`` and the calls autograd
records (inputs that require grad) allocate as they should. Smallest input that shows it: two calls
of ``attention`` on inputs of one shape, the first's output read after the second. (Under
``torch.inference_mode()`` it allocates too: a buffer made there is an inference tensor, which a
later call outside could not write.)
"""

import torch

from tests.broken import _float32

attention_with_lse = _float32.attention_with_lse

_BUFFERS: dict = {}


def attention(q, k, v, is_causal=False):
    o = _float32.attention(q, k, v, is_causal)
    recorded = torch.is_grad_enabled() and any(t.requires_grad for t in (q, k, v))
    if recorded or torch.is_inference_mode_enabled():
        return o
    buffer = _BUFFERS.setdefault((tuple(o.shape), o.dtype, o.device), torch.empty_like(o))
    return buffer.copy_(o)  # the bug: the buffer is the caller's output, and the next call's
