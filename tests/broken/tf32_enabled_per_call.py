"""Kernel module with one bug: each call turns on TF32 for float32 matmuls
(``torch.backends.cuda.matmul.allow_tf32 = True``, a speed switch many training scripts set) and
leaves it on.

Its own outputs are right (it computes in float32 on the CPU, where the switch changes nothing,
and the scores it returns are its own). What it breaks is every float32 matmul the caller runs on a
GPU afterwards: TF32 keeps 10 mantissa bits of each operand, not 23. Smallest input that shows it:
``torch.backends.cuda.matmul.allow_tf32`` before and after one call.
"""

import torch

from tests.broken import _float32


def attention_with_lse(q, k, v, is_causal=False):
    torch.backends.cuda.matmul.allow_tf32 = True  # the bug: a process-wide switch, never set back
    return _float32.attention_with_lse(q, k, v, is_causal)


def attention(q, k, v, is_causal=False):
    return attention_with_lse(q, k, v, is_causal)[0]
