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

GRIDS = ("quick", "targets", "full")
"""The grids ``--bench-grid`` takes (``cpu`` is ``--bench-allow-cpu``'s)."""

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


ODD_LENGTHS = {1023: 1024, 4097: 4096}
"""The ``targets`` grid's odd lengths, each with the neighbour it is held to (issue #16: within 10%)."""


def attention_grid(grid: str) -> list[Shape]:
    """Shapes of ``test_attention_speed.py``: ``quick`` (the gate's, 24 shapes), ``targets`` (40:
    the quick grid and, beside each 1024 and 4096 shape, the same at 1023 and 4097 with its batch,
    issue #16's grid; :mod:`benchmarks.report_speed` judges it) or ``full`` (112)."""
    if grid == "quick":
        return _grid(("bfloat16", "float16"), (64, 128), (1024, 4096, 16384))
    if grid == "targets":
        out = []
        for s in attention_grid("quick"):
            out += [Shape(s.dtype, s.head_dim, odd, s.batch, s.heads, s.causal)
                    for odd, even in ODD_LENGTHS.items() if even == s.seq_len]
            out.append(s)
        return out
    if grid == "full":
        return _grid(("bfloat16", "float16"), (64, 128), (1023, 1024, 2048, 4096, 4097, 8192, 16384),
                     tokens=(TOKENS, 4 * TOKENS))
    if grid == "cpu":
        return cpu_grid()
    raise ValueError(f"unknown grid {grid!r}: expected one of {GRIDS}")


def baseline_grid(grid: str) -> list[Shape]:
    """Shapes of ``test_baseline_speed.py``: bfloat16 only in the quick grid (torch.compile is slow
    to compile, and fp16 runs the same PyTorch kernels); the full grid is the attention one."""
    if grid == "quick":
        return _grid(("bfloat16",), (64, 128), (1024, 4096, 16384))
    return attention_grid(grid)


def cpu_grid() -> list[Shape]:
    """Tiny shapes for ``--bench-allow-cpu`` (a developer's check of the plumbing, no GPU)."""
    return [Shape("float32", 32, n, 1, 2, causal) for n in (16, 80) for causal in (False, True)]


@dataclass(frozen=True)
class DecodeShape:
    """One decoding step: q ``[batch, heads, 1, head_dim]`` (one new row per head), k and v
    ``[batch, kv_heads, n_k, head_dim]`` (the KV cache), in ``dtype``; no mask (the new row sees the
    whole cache). Its speed is the rate at which a call reads the cache, :attr:`kv_bytes` per call."""

    dtype: str
    head_dim: int
    n_k: int
    batch: int
    heads: int
    kv_heads: int

    @property
    def torch_dtype(self) -> torch.dtype:
        return DTYPES[self.dtype]

    @property
    def id(self) -> str:
        """The shape's part of a benchmark's name: ``decode-bf16-d128-k4096-b8-h32-kv8``."""
        return (f"decode-{SHORT_DTYPE[self.dtype]}-d{self.head_dim}-k{self.n_k}-b{self.batch}"
                f"-h{self.heads}-kv{self.kv_heads}")

    @classmethod
    def parse(cls, shape_id: str) -> DecodeShape:
        """The shape whose :attr:`id` is ``shape_id``."""
        _, dtype, d, n_k, b, h, kv = shape_id.split("-")
        long_dtype = {short: long for long, short in SHORT_DTYPE.items()}[dtype]
        return cls(long_dtype, int(d[1:]), int(n_k[1:]), int(b[1:]), int(h[1:]), int(kv[2:]))

    @property
    def kv_bytes(self) -> int:
        """Bytes of k and v a call must read: ``2 * batch * kv_heads * n_k * head_dim * itemsize``."""
        item = torch.finfo(self.torch_dtype).bits // 8
        return 2 * self.batch * self.kv_heads * self.n_k * self.head_dim * item

    def group(self) -> str:
        return (f"decode {SHORT_DTYPE[self.dtype]} d={self.head_dim} n_k={self.n_k} b={self.batch} "
                f"h={self.heads}/{self.kv_heads}")


def decode_grid(grid: str) -> list[DecodeShape]:
    """Shapes of ``test_decode_speed.py``: issue #16's decode step (b=8, h_q=32, h_kv=8, d=128,
    bfloat16) at 4k to 128k keys in every GPU grid; tiny float32 ones for ``cpu``."""
    if grid == "cpu":
        return [DecodeShape("float32", 32, n_k, 1, 4, 2) for n_k in (16, 80)]
    if grid not in GRIDS:
        raise ValueError(f"unknown grid {grid!r}: expected one of {GRIDS}")
    return [DecodeShape("bfloat16", 128, n_k, 8, 32, 8) for n_k in (4096, 16384, 32768, 131072)]
