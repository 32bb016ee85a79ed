"""``VarlenCase``: one packed variable-length attention problem, in a line that rebuilds it exactly.

Like :class:`~properties.case.Case`, a varlen case holds only a description (per-sequence lengths,
heads, head dim, dtype, causality, layout, value distribution, seed, and the features of the
extended contract); its tensors are drawn from the seed, never element by element, with
:data:`properties.case.DISTRIBUTIONS` (the packed q is drawn as a case's ``[heads, total_q, d]`` q
would be, k and v with ``kv_heads`` heads), so ``VarlenCase.parse(str(case)) == case`` and the same
line gives the same tensors on any machine. A line leaves out the feature fields at their defaults
(:data:`properties.case.FEATURE_FIELDS`), so a line written before they existed reads, and draws,
as it did.

A sequence may have no queries (``n_q = 0``, any ``n_k >= 0``): it produces nothing, and its keys
must get zero gradients. A sequence with queries needs at least one key, and a case needs at least
one query in all (otherwise there is nothing to check).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import NamedTuple

import torch

from properties.case import (
    DISTRIBUTIONS,
    DTYPES,
    Case,
    arrange,
    case_line,
    check_features,
    feature_kwargs,
    features_used,
    parse_line,
)

VARLEN_LAYOUTS = ("contiguous", "heads_first", "strided", "column_slice", "mixed")
"""How the packed q, k, v (and the upstream gradient) sit in memory, each viewed ``[total, heads, d]``:

- ``contiguous``: row-major ``[total, heads, d]`` (the output of a QKV projection, reshaped);
- ``heads_first``: stored ``[heads, total, d]`` and viewed ``[total, heads, d]``;
- ``strided``: every other element, in every dim, of a larger buffer whose other elements are NaN,
  so a kernel that ignores any one stride reads NaN and fails loudly;
- ``column_slice``: each head's row of ``d`` followed by 16 NaN elements, the last one too
  (:data:`properties.case.COLUMN_SLICE_GAP`): q, k, v cut from a wider buffer, as from a fused
  projection's output, so a kernel that loads past ``d`` reads NaN and one that stores there
  writes over the caller's memory;
- ``mixed``: q, k, v and the upstream gradient each in a different one of the above
  (:data:`VARLEN_MIXED`), so a kernel that addresses one tensor with another's strides is caught.
"""

VARLEN_MIXED = {"q": "heads_first", "k": "contiguous", "v": "strided", "do": "heads_first"}
"""The layout of each tensor under the ``mixed`` layout."""


class VarlenInputs(NamedTuple):
    """The arguments of ``attention_varlen`` in order (so ``fn(*inputs, is_causal)`` calls it)."""

    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    cu_seqlens_q: torch.Tensor
    cu_seqlens_k: torch.Tensor
    max_seqlen_q: int
    max_seqlen_k: int


@dataclass(frozen=True)
class VarlenCase:
    """``batch = len(seqlens_q)`` sequences packed: ``q [sum(seqlens_q), heads, head_dim]``,
    ``k, v [sum(seqlens_k), kv_heads or heads, head_dim]``; sequence ``b`` has ``seqlens_q[b]``
    queries and ``seqlens_k[b]`` keys.

    The features are :class:`~properties.case.Case`'s, each off by default: ``kv_heads`` (k and v
    have this many heads, a divisor of ``heads``; ``None``: as many as q), ``softmax_scale``,
    ``window``, ``softcap`` and ``causal_alignment``. Alignment and windows apply per sequence:
    under ``"bottom_right"``, query ``i`` of sequence ``b`` has ``c_i = i + n_k(b) - n_q(b)``.
    """

    seqlens_q: tuple[int, ...]
    seqlens_k: tuple[int, ...]
    heads: int = 2
    head_dim: int = 64
    dtype: str = "float32"
    is_causal: bool = False
    layout: str = "contiguous"
    distribution: str = "normal"
    scale: float = 1.0
    seed: int = 0
    kv_heads: int | None = None
    softmax_scale: float | None = None
    window: tuple[int, int] | None = None
    softcap: float | None = None
    causal_alignment: str = "top_left"

    def __post_init__(self) -> None:
        object.__setattr__(self, "seqlens_q", tuple(self.seqlens_q))
        object.__setattr__(self, "seqlens_k", tuple(self.seqlens_k))
        if self.dtype not in DTYPES:
            raise ValueError(f"dtype must be one of {sorted(DTYPES)}, got {self.dtype!r}")
        if self.layout not in VARLEN_LAYOUTS:
            raise ValueError(f"layout must be one of {VARLEN_LAYOUTS}, got {self.layout!r}")
        if self.distribution not in DISTRIBUTIONS:
            raise ValueError(f"distribution must be one of {DISTRIBUTIONS}, got {self.distribution!r}")
        if len(self.seqlens_q) != len(self.seqlens_k) or not self.seqlens_q:
            raise ValueError(f"seqlens_q and seqlens_k must have one length per sequence (at least one), "
                             f"got {self.seqlens_q} and {self.seqlens_k}")
        for b, (n_q, n_k) in enumerate(zip(self.seqlens_q, self.seqlens_k)):
            if n_q < 0 or n_k < 0 or (n_q > 0 and n_k == 0):
                raise ValueError(f"sequence {b}: n_q = {n_q}, n_k = {n_k}; lengths must be >= 0, and a "
                                 "sequence with queries needs at least one key")
        if sum(self.seqlens_q) == 0:
            raise ValueError(f"no sequence has a query: seqlens_q {self.seqlens_q}")
        if self.heads < 1 or self.head_dim < 1:
            raise ValueError(f"heads and head_dim must be >= 1, got {self.heads} and {self.head_dim}")
        check_features(self, self.heads)

    def features(self) -> dict:
        """The keyword arguments of the kernel call beyond ``is_causal`` (only those not at default)."""
        return feature_kwargs(self)

    def needs(self) -> frozenset[str]:
        """The contract's feature names this case uses (``properties.kernels.FEATURE_NAMES``).

        Not ``"varlen"``: a check of packed batches asks for the entry points themselves
        (:func:`properties.kernels.require_varlen`)."""
        gqa = self.kv_heads is not None and self.kv_heads != self.heads
        return frozenset(features_used(self) | ({"gqa"} if gqa else set()))

    def __str__(self) -> str:
        return case_line(self)

    @classmethod
    def parse(cls, line: str) -> VarlenCase:
        """Rebuild a case from ``str(case)`` (literal keyword arguments only; nothing is evaluated)."""
        return parse_line(cls, line, example="VarlenCase(seqlens_q=(1,), ...)")

    def replace(self, **changes) -> VarlenCase:
        return VarlenCase(**{**asdict(self), **changes})

    @property
    def torch_dtype(self) -> torch.dtype:
        return DTYPES[self.dtype]

    @property
    def batch(self) -> int:
        return len(self.seqlens_q)

    def offsets(self) -> tuple[list[int], list[int]]:
        """``cu_seqlens_q`` and ``cu_seqlens_k`` as lists (``[0, n_0, n_0 + n_1, ...]``)."""
        return _cumsum(self.seqlens_q), _cumsum(self.seqlens_k)

    def draw(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """q, k, v and the upstream gradient ``do``: row-major ``[total, heads, d]`` (k and v with
        ``kv_heads`` heads, if set) on the CPU."""
        # The packed batch is drawn as one Case with the heads leading, so every distribution means
        # what it means for a Case (ties and equal scores are shared across the sequences).
        flat = Case(sum(self.seqlens_q), sum(self.seqlens_k), self.head_dim, (self.heads,), self.dtype,
                    False, "contiguous", self.distribution, self.scale, self.seed, kv_heads=self.kv_heads)
        q, k, v = (t.transpose(0, 1).contiguous() for t in flat.make_qkv("cpu"))
        gen = torch.Generator().manual_seed(self.seed + 7919)
        do = torch.randn((sum(self.seqlens_q), self.heads, self.head_dim), generator=gen)
        return q, k, v, do.to(self.torch_dtype)

    def place(self, t: torch.Tensor, name: str, device: torch.device | str) -> torch.Tensor:
        """Packed tensor ``name`` (q, k, v or do; row-major, on the CPU) in the case's layout."""
        layout = VARLEN_MIXED[name] if self.layout == "mixed" else self.layout
        return arrange_packed(t, layout, device)

    def make_qkv(self, device: torch.device | str) -> VarlenInputs:
        """q, k, v in the case's dtype and layout, ``cu_seqlens`` (int32) and the longest lengths."""
        q, k, v, _ = self.draw()
        cu_q, cu_k = self.offsets()
        return VarlenInputs(
            self.place(q, "q", device), self.place(k, "k", device), self.place(v, "v", device),
            torch.tensor(cu_q, dtype=torch.int32, device=device),
            torch.tensor(cu_k, dtype=torch.int32, device=device),
            max(self.seqlens_q), max(self.seqlens_k),
        )

    def make_grad_out(self, device: torch.device | str) -> torch.Tensor:
        """An upstream gradient ``do [total_q, heads, d]`` for the output, in the case's layout."""
        return self.place(self.draw()[3], "do", device)


def _cumsum(lengths: tuple[int, ...]) -> list[int]:
    out = [0]
    for n in lengths:
        out.append(out[-1] + n)
    return out


def arrange_packed(t: torch.Tensor, layout: str, device: torch.device | str) -> torch.Tensor:
    """``t [total, heads, d]`` (row-major, on the CPU) as a view with the same values in ``layout``."""
    if layout == "contiguous":
        return t.contiguous().to(device)
    if layout == "heads_first":
        return t.transpose(0, 1).contiguous().to(device).transpose(0, 1)
    if layout == "strided":
        big = torch.full(tuple(2 * s for s in t.shape), math.nan, dtype=t.dtype)
        big[::2, ::2, ::2] = t
        return big.to(device)[::2, ::2, ::2]
    if layout == "column_slice":
        return arrange(t, layout, device)
    raise ValueError(f"unknown packed layout {layout!r}")


def parse_case(line: str) -> Case | VarlenCase:
    """A ``Case(...)`` or ``VarlenCase(...)`` line, rebuilt (literal arguments only)."""
    if line.strip().startswith("VarlenCase("):
        return VarlenCase.parse(line)
    return Case.parse(line)
