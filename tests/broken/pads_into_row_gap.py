"""Kernel module with one bug: where a head dim is not a multiple of 16 and an input's rows have room
after them (a ``[..., :d]`` slice of a wider buffer), it zeroes the pad columns in place, in the
caller's memory, so that its loads of 16-wide rows need no mask. The output is right.

Written blind to the suite in a held-out round of other people's kernels (docs/mutation.md); every
layout the grids had then either has no room after its rows or a column stride other than 1, so
nothing saw it. Smallest input that shows it: q = k = v = ``torch.randn(1, 16)[:, :15]`` (the one
element after the row is zeroed).
"""

import torch

from tests import conforming
from tests.conforming import FEATURES, SUPPORTED_DTYPES

__all__ = ["FEATURES", "SUPPORTED_DTYPES", "attention", "attention_with_lse"]

BLOCK_D = 16


def zero_pad_columns(t: torch.Tensor) -> None:
    d = t.shape[-1]
    padded = -(-d // BLOCK_D) * BLOCK_D
    if padded == d or t.dim() < 2 or t.stride(-1) != 1 or t.stride(-2) < padded:
        return
    last = t.storage_offset() + sum((n - 1) * s for n, s in zip(t.shape, t.stride())) - (d - 1)
    if last + padded > t.untyped_storage().nbytes() // t.element_size():
        return  # no room after the last row
    with torch.no_grad():  # the bug: the pad columns are the caller's memory
        t.detach().as_strided((*t.shape[:-1], padded), t.stride(), t.storage_offset())[..., d:].zero_()


def attention(q, k, v, is_causal=False, **features):
    for t in (q, k, v):
        zero_pad_columns(t)
    return conforming.attention(q, k, v, is_causal, **features)


def attention_with_lse(q, k, v, is_causal=False, **features):
    for t in (q, k, v):
        zero_pad_columns(t)
    return conforming.attention_with_lse(q, k, v, is_causal, **features)
