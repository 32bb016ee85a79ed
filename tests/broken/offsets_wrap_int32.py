"""Kernel module with one bug: a leading slice's offset is computed in 32-bit integers.

A kernel that starts slice ``s`` at ``s * n * d`` in int32 (a program id times a stride) counts
modulo 2^32, so past 2^31 elements it reads and writes another slice (on a GPU, often before the
buffer: an illegal memory access). Emulated in PyTorch: slice ``s`` reads and writes the slice whose
offset is ``s * n * d`` modulo :data:`WRAP` (2^31 here; tests set it lower, so the CPU can hold the
tensors). Correct below ``WRAP`` elements, so no ordinary case shows it; smallest input that does: q,
k, v of more than ``WRAP`` elements each (``properties.large.check_large_offsets``).
"""

import torch

from tests.broken import _float32

WRAP = 2**31
"""Where the offsets wrap (elements)."""


def _wrapped(t: torch.Tensor) -> torch.Tensor:
    """``t`` (``[..., n, d]``) with each leading slice replaced by the one its wrapped offset names."""
    n, d = t.shape[-2:]
    flat = t.reshape(-1, n, d)
    source = (torch.arange(flat.shape[0], device=t.device) * (n * d)) % WRAP // (n * d)
    return flat[source].reshape(t.shape)


def attention_with_lse(q, k, v, is_causal=False):
    o, lse = _float32.attention_with_lse(_wrapped(q), _wrapped(k), _wrapped(v), is_causal)
    return o, lse


def attention(q, k, v, is_causal=False):
    # Differentiable through the gather: gradients of a wrapped slice land on the slice it read.
    return _float32.attention(_wrapped(q), _wrapped(k), _wrapped(v), is_causal)
