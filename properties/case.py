"""``Case``: one attention problem, described in a line that rebuilds it exactly.

A case holds shapes, dtype, causality, memory layout, value distribution and a seed; its tensors are
drawn from the seed (never element by element), so ``str(case)`` is all a person needs to replay a
failure: ``Case.parse(str(case)) == case``, and the same line gives the same tensors on any machine
(they are drawn on the CPU, then moved).
"""

from __future__ import annotations

import ast
import math
from dataclasses import asdict, dataclass, fields

import torch

DTYPES = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32}

LAYOUTS = ("contiguous", "seq_first", "heads_last", "strided", "offset", "broadcast_kv")
"""How q, k, v (and the upstream gradient) sit in memory; every one but the first is non-contiguous
except by accident, and none is copied by a correct kernel:

- ``contiguous``: row-major ``[..., n, d]``;
- ``seq_first``: stored ``[n, ..., d]`` and viewed as ``[..., n, d]`` (a transposed batch);
- ``heads_last``: stored ``[..., n, h, d]`` and viewed ``[..., h, n, d]`` (the usual output of a
  projection followed by ``.view(b, n, h, d).transpose(1, 2)``);
- ``strided``: every other row and column of a larger buffer whose other elements are NaN, so a
  kernel that ignores a stride reads NaN and fails loudly;
- ``offset``: a view that starts 37 elements into a NaN-filled buffer (nonzero storage offset);
- ``broadcast_kv``: k and v share one slice across the first leading dim (stride 0, ``expand``).
"""

DISTRIBUTIONS = ("normal", "uniform")
"""How values are drawn before ``scale`` multiplies them: standard normal, or uniform on [-1, 1)."""


@dataclass(frozen=True)
class Case:
    """One attention call: ``q [*leading, n_q, head_dim]``, ``k, v [*leading, n_k, head_dim]``."""

    n_q: int
    n_k: int
    head_dim: int = 64
    leading: tuple[int, ...] = (2,)
    dtype: str = "float32"
    is_causal: bool = False
    layout: str = "contiguous"
    distribution: str = "normal"
    scale: float = 1.0
    seed: int = 0

    def __post_init__(self) -> None:
        if self.dtype not in DTYPES:
            raise ValueError(f"dtype must be one of {sorted(DTYPES)}, got {self.dtype!r}")
        if self.layout not in LAYOUTS:
            raise ValueError(f"layout must be one of {LAYOUTS}, got {self.layout!r}")
        if self.distribution not in DISTRIBUTIONS:
            raise ValueError(f"distribution must be one of {DISTRIBUTIONS}, got {self.distribution!r}")
        object.__setattr__(self, "leading", tuple(self.leading))

    def __str__(self) -> str:
        args = ", ".join(f"{f.name}={getattr(self, f.name)!r}" for f in fields(self))
        return f"Case({args})"

    @classmethod
    def parse(cls, line: str) -> Case:
        """Rebuild a case from ``str(case)`` (literal keyword arguments only; nothing is evaluated)."""
        call = ast.parse(line.strip(), mode="eval").body
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == "Case"):
            raise ValueError(f"expected a line like 'Case(n_q=1, n_k=1, ...)', got {line!r}")
        return cls(**{kw.arg: ast.literal_eval(kw.value) for kw in call.keywords})

    def replace(self, **changes) -> Case:
        return Case(**{**asdict(self), **changes})

    @property
    def torch_dtype(self) -> torch.dtype:
        return DTYPES[self.dtype]

    def make_qkv(self, device: torch.device | str) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """q, k, v for this case, on ``device``, in the case's dtype and layout."""
        gen = torch.Generator().manual_seed(self.seed)
        q = self._draw((*self.leading, self.n_q, self.head_dim), gen)
        k = self._draw((*self.leading, self.n_k, self.head_dim), gen)
        v = self._draw((*self.leading, self.n_k, self.head_dim), gen)
        if self.layout == "broadcast_kv" and self.leading:
            k, v = (t[:1].expand_as(t) for t in (k, v))
            return arrange(q, self.layout, device), _place(k, device), _place(v, device)
        return tuple(arrange(t, self.layout, device) for t in (q, k, v))

    def make_grad_out(self, device: torch.device | str) -> torch.Tensor:
        """An upstream gradient ``do`` for the output, in the case's layout."""
        gen = torch.Generator().manual_seed(self.seed + 7919)
        do = torch.randn((*self.leading, self.n_q, self.head_dim), generator=gen)
        return arrange(do.to(self.torch_dtype), self.layout, device)

    def _draw(self, shape: tuple[int, ...], gen: torch.Generator) -> torch.Tensor:
        if self.distribution == "normal":
            t = torch.randn(shape, generator=gen)
        else:
            t = torch.rand(shape, generator=gen) * 2 - 1
        return (t * self.scale).to(self.torch_dtype)


def _place(t: torch.Tensor, device: torch.device | str) -> torch.Tensor:
    """Move an expanded tensor without materializing the broadcast."""
    if 0 in t.stride()[:-2]:
        base = t[:1].contiguous().to(device)
        return base.expand(t.shape)
    return t.to(device)


def arrange(t: torch.Tensor, layout: str, device: torch.device | str) -> torch.Tensor:
    """``t`` (row-major, on the CPU) as a view with the same values in the given ``layout``."""
    if layout in ("contiguous", "broadcast_kv"):
        return t.contiguous().to(device)
    if layout == "seq_first":
        return t.movedim(-2, 0).contiguous().to(device).movedim(0, -2)
    if layout == "heads_last":
        if t.dim() < 3:
            return t.contiguous().to(device)
        return t.transpose(-3, -2).contiguous().to(device).transpose(-3, -2)
    if layout == "strided":
        big = torch.full((*t.shape[:-2], 2 * t.shape[-2], 2 * t.shape[-1]), math.nan, dtype=t.dtype)
        big[..., ::2, ::2] = t
        return big.to(device)[..., ::2, ::2]
    if layout == "offset":
        flat = torch.full((t.numel() + 37 + 11,), math.nan, dtype=t.dtype)
        flat[37 : 37 + t.numel()] = t.reshape(-1)
        return flat.to(device)[37 : 37 + t.numel()].view(t.shape)
    raise ValueError(f"unknown layout {layout!r}")
