"""Kernel module with one bug: the lse buffer is allocated without a dtype.

``torch.empty(shape, device=...)`` takes torch's default dtype, float32 in most processes, so every
test run with the defaults passes. A caller that set another (``torch.set_default_dtype``: float64
in scientific code, bfloat16 where a model is built in it) gets an lse of that dtype, rounded to 8
bits in bfloat16. ``o`` and the gradients are right. Smallest input that shows it: any call under
``torch.set_default_dtype(torch.float64)``.
"""

import torch

from tests.broken import _float32

__all__ = ["attention", "attention_with_lse"]

attention = _float32.attention


def attention_with_lse(q, k, v, is_causal=False):
    o, lse = _float32.attention_with_lse(q, k, v, is_causal)
    out = torch.empty(lse.shape, device=lse.device)  # the bug: no dtype=torch.float32
    return o, out.copy_(lse)
