"""What the speed benchmarks measure: shapes, grids, FLOP counts and the names they report under.

Shapes follow FlashAttention-2's benchmarks: ``batch * seq_len`` tokens are fixed (16k; 64k as
well in the full grid) and ``heads * head_dim = 2048``, so every length does comparable work per
token and a batch shrinks as the sequence grows (16 x 1024, 4 x 4096, 1 x 16384).

FLOPs (as Triton's fused-attention tutorial counts them): the forward is two matmuls,
``4 * batch * heads * seq_len**2 * head_dim``, halved for causal attention; forward+backward is
3.5 times the forward (the backward is five matmuls to the forward's two: 2.5x). TFLOP/s are these
FLOPs over the median time, whatever the backend actually computes (a dense causal backend
computes the masked half too, and is charged only for the visible half).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Literal

import torch

Pass = Literal["fwd", "fwd+bwd"]
PASSES: tuple[Pass, ...] = ("fwd", "fwd+bwd")

BACKWARD_FLOP_FACTOR = 3.5
"""Forward+backward FLOPs over forward FLOPs."""

TOKENS = 16384
"""``batch * seq_len`` of the quick grid (batch shrinks as the length grows, at least 1)."""
HIDDEN = 2048
"""``heads * head_dim``."""

DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}
SHORT_DTYPE = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}


@dataclass(frozen=True)
class Shape:
    """One benchmarked problem: q, k, v of shape ``[batch, heads, seq_len, head_dim]`` in ``dtype``."""

    dtype: str
    head_dim: int
    seq_len: int
    batch: int
    heads: int
    causal: bool

    @property
    def torch_dtype(self) -> torch.dtype:
        return DTYPES[self.dtype]

    @property
    def id(self) -> str:
        """The shape's part of a benchmark's name: ``bf16-d64-n1024-b16-h32-causal``."""
        mask = "causal" if self.causal else "full"
        return (f"{SHORT_DTYPE[self.dtype]}-d{self.head_dim}-n{self.seq_len}-b{self.batch}"
                f"-h{self.heads}-{mask}")

    @classmethod
    def parse(cls, shape_id: str) -> Shape:
        """The shape whose :attr:`id` is ``shape_id``."""
        dtype, d, n, b, h, mask = shape_id.split("-")
        long_dtype = {short: long for long, short in SHORT_DTYPE.items()}[dtype]
        return cls(long_dtype, int(d[1:]), int(n[1:]), int(b[1:]), int(h[1:]), mask == "causal")

    def flops(self, pass_: Pass) -> float:
        """FLOPs of one call (see the module docstring)."""
        forward = 4.0 * self.batch * self.heads * self.seq_len**2 * self.head_dim
        if self.causal:
            forward /= 2
        return forward * (BACKWARD_FLOP_FACTOR if pass_ == "fwd+bwd" else 1.0)

    def group(self, pass_: Pass) -> str:
        """pytest-benchmark group: every backend of one shape and pass is reported together."""
        mask = " causal" if self.causal else ""
        return (f"{pass_} {SHORT_DTYPE[self.dtype]} d={self.head_dim} n={self.seq_len} "
                f"b={self.batch} h={self.heads}{mask}")


def shape(dtype: str, head_dim: int, seq_len: int, causal: bool, *, tokens: int = TOKENS) -> Shape:
    """A shape of the grids: ``batch = tokens // seq_len`` (at least 1), ``heads = HIDDEN // head_dim``."""
    return Shape(dtype, head_dim, seq_len, max(1, tokens // seq_len), HIDDEN // head_dim, causal)


def _grid(dtypes, head_dims, lengths, tokens=(TOKENS,)) -> list[Shape]:
    product = itertools.product(dtypes, head_dims, tokens, lengths, (False, True))
    return [shape(dtype, d, n, causal, tokens=t) for dtype, d, t, n, causal in product]


def attention_grid(grid: str) -> list[Shape]:
    """Shapes of ``test_attention_speed.py``: ``quick`` (the gate's, 24 shapes) or ``full`` (112)."""
    if grid == "quick":
        return _grid(("bfloat16", "float16"), (64, 128), (1024, 4096, 16384))
    if grid == "full":
        return _grid(("bfloat16", "float16"), (64, 128), (1023, 1024, 2048, 4096, 4097, 8192, 16384),
                     tokens=(TOKENS, 4 * TOKENS))
    if grid == "cpu":
        return cpu_grid()
    raise ValueError(f"unknown grid {grid!r}: expected 'quick' or 'full'")


def baseline_grid(grid: str) -> list[Shape]:
    """Shapes of ``test_baseline_speed.py``: bfloat16 only in the quick grid (torch.compile is slow
    to compile, and fp16 runs the same PyTorch kernels); the full grid is the attention one."""
    if grid == "quick":
        return _grid(("bfloat16",), (64, 128), (1024, 4096, 16384))
    return attention_grid(grid)


def cpu_grid() -> list[Shape]:
    """Tiny shapes for ``--bench-allow-cpu`` (a developer's check of the plumbing, no GPU)."""
    return [Shape("float32", 32, n, 1, 2, causal) for n in (16, 80) for causal in (False, True)]
