"""Kernel module with one bug: its output is written by a Triton kernel launched on the grid
``(row tiles, batch x heads)``, as Triton's fused-attention tutorial launches its forward. CUDA
caps a grid's second axis at 65535, so a call with more leading-dim slices than that does not
launch (``Triton Error [CUDA]: invalid argument``); in the interpreter, which has no such cap, it
is right.

Smallest input that shows it: any call with ``prod(leading) > 65535`` on a GPU
(``properties.grids.property_gpu_cases`` has one). Forward only outside autograd (a call that records
gradients writes its output with PyTorch), which is what ``check_output_matches_oracle`` calls.
"""

import torch
import triton
import triton.language as tl

import flash._runtime  # noqa: F401 - sets TRITON_INTERPRET (read when a kernel is decorated, below)
from tests import conforming
from tests.conforming import FEATURES, SUPPORTED_DTYPES

__all__ = ["FEATURES", "SUPPORTED_DTYPES", "attention", "attention_with_lse"]

BLOCK_ROWS = 16


@triton.jit
def _store_rows(src, dst, n_rows, d, BLOCK_R: tl.constexpr, BLOCK_D: tl.constexpr):
    tile = tl.program_id(0)
    piece = tl.program_id(1)  # the bug: the slices on the grid's second axis
    rows = tile * BLOCK_R + tl.arange(0, BLOCK_R)
    cols = tl.arange(0, BLOCK_D)
    at = piece.to(tl.int64) * n_rows * d + rows[:, None] * d + cols[None, :]
    mask = (rows[:, None] < n_rows) & (cols[None, :] < d)
    tl.store(dst + at, tl.load(src + at, mask=mask).to(dst.dtype.element_ty), mask=mask)


def _written(o32: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    if torch.is_grad_enabled() and o32.requires_grad:
        return o32.to(dtype)
    src = o32.contiguous()
    n_rows, d = src.shape[-2], src.shape[-1]
    pieces = src.numel() // max(n_rows * d, 1)
    out = torch.empty(src.shape, dtype=dtype, device=src.device)
    if src.numel():
        grid = (triton.cdiv(n_rows, BLOCK_ROWS), pieces)
        _store_rows[grid](src, out, n_rows, d, BLOCK_R=BLOCK_ROWS, BLOCK_D=triton.next_power_of_2(d))
    return out


def attention(q, k, v, is_causal=False, **features):
    s = conforming.scores(q, k, is_causal, features.get("scale"), features.get("window"),
                          features.get("softcap"), features.get("causal_alignment", "top_left"))
    o32 = conforming.attend(s, conforming.up(q), v)  # in the accumulator dtype
    return _written(o32, q.dtype)


def attention_with_lse(q, k, v, is_causal=False, **features):
    _, lse = conforming.attention_with_lse(q, k, v, is_causal, **features)
    return attention(q, k, v, is_causal, **features), lse
