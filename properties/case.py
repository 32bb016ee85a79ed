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

from oracle.dense import ALIGNMENTS

DTYPES = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32}

LAYOUTS = ("contiguous", "seq_first", "heads_last", "strided", "offset", "gapped", "column_slice",
           "broadcast_kv", "mixed")
"""How q, k, v (and the upstream gradient) sit in memory; every one but the first is non-contiguous
except by accident, and none is copied by a correct kernel:

- ``contiguous``: row-major ``[..., n, d]``;
- ``seq_first``: stored ``[n, ..., d]`` and viewed as ``[..., n, d]`` (a transposed batch);
- ``heads_last``: stored ``[..., n, h, d]`` and viewed ``[..., h, n, d]`` (the usual output of a
  projection followed by ``.view(b, n, h, d).transpose(1, 2)``);
- ``strided``: every other row and column of a larger buffer whose other elements are NaN, so a
  kernel that ignores a stride reads NaN and fails loudly;
- ``offset``: a view that starts 37 elements into a NaN-filled buffer (nonzero storage offset);
- ``gapped``: rows contiguous, but each ``[n, d]`` slice followed by 3 NaN elements, so slices
  start at odd element offsets from an aligned base: a kernel that assumes aligned slice starts
  (to load 16-byte vectors) reads misaligned;
- ``column_slice``: rows contiguous and each followed by 16 NaN elements, the last row too: the
  slice ``[..., :d]`` of a wider buffer, as q, k and v cut from a fused projection's output are.
  A kernel that loads past ``d`` (a head dim padded to a power of two) reads NaN; one that stores
  there (to pad a row in place) writes over memory the caller owns;
- ``broadcast_kv``: k and v share one slice across the first leading dim (stride 0, ``expand``),
  and so does the upstream gradient (as autograd hands one over: ``o.sum()``'s is stride 0 in
  every dim);
- ``mixed``: q, k, v and the upstream gradient each in a different one of the layouts above
  (:data:`MIXED`), so a kernel that addresses one tensor with another's strides is caught.
"""

COLUMN_SLICE_GAP = 16
"""NaN elements after each row of the ``column_slice`` layout: the first 16 a kernel reads or writes
past a row's end (all of them for a head dim padded to the next multiple of 16)."""

MIXED = {"q": "heads_last", "k": "seq_first", "v": "strided", "do": "offset"}
"""The layout of each tensor under the ``mixed`` layout."""

DISTRIBUTIONS = ("normal", "uniform", "large", "tiny", "outliers", "ties", "equal_scores")
"""How q, k and v are drawn from the seed, and what ``scale`` means for each:

- ``normal``: standard normal times ``scale``;
- ``uniform``: uniform on [-1, 1) times ``scale``;
- ``large``: q and v uniform on [-1, 1) times ``scale``, k uniform divided by ``scale``. With a large
  ``scale`` the inputs reach toward both ends of the dtype's exponent range while the scores stay
  of order 1, so the problem stays well conditioned and the exact output (up to ``scale``) and
  gradients (``dk`` grows like ``scale**2``) stay representable. The fuzzer picks ``scale`` per
  dtype so that holds; a larger one can overflow the inputs or gradients, which no kernel can fix;
- ``tiny``: standard normal times ``scale`` for a ``scale`` far below 1 (down to the smallest normal
  number, so some values are subnormal): the scores are nearly 0 and every row nearly uniform;
- ``outliers``: standard normal, with about one element in 64 of each tensor (chosen by the seed)
  multiplied by ``scale``: a few huge activations, hence a few very large scores in some rows;
- ``ties``: q and v standard normal times ``scale``; the rows of k are drawn from a pool of three
  distinct rows, so every row of scores repeats three values and its maximum is tied;
- ``equal_scores``: q and v standard normal times ``scale``; every row of k is the same row, so all
  scores of a query row are equal and its output is the mean of the v rows it sees.

``normal`` and ``uniform`` draw q, then k, then v from one generator, so their lines replay the same
tensors as before the other distributions existed.
"""

OUTLIER_RATE = 1 / 64
"""The fraction of elements the ``outliers`` distribution multiplies by ``scale``."""

TIE_POOL = 3
"""How many distinct key rows the ``ties`` distribution repeats."""


FEATURE_FIELDS = ("kv_heads", "softmax_scale", "window", "softcap", "causal_alignment")
"""The fields of a case that use a feature of the extended contract (``properties/kernels.py``); a
line leaves out those at their defaults, so a plain case reads as it did before they existed."""


@dataclass(frozen=True)
class Case:
    """One attention call: ``q [*leading, n_q, head_dim]``, ``k, v [*leading, n_k, head_dim]``.

    The features of the extended contract, each off by default:

    - ``kv_heads``: grouped-query attention, k and v have this many heads (the last leading dim),
      q has ``leading[-1]``, a multiple of it (``None``: as many as q);
    - ``softmax_scale``: the kernel's ``scale`` argument, any finite real (``None``: ``1 / sqrt(d)``;
      0 weighs every visible key alike, a negative one favours the least similar); not to be
      confused with ``scale``, the size of the drawn values;
    - ``window``: ``(left, right)``, ``-1`` unbounded; ``softcap``: ``c > 0`` caps, ``0`` is off as
      ``None`` is, but is passed to the kernel (the contract's two spellings of off);
    - ``causal_alignment``: ``"top_left"`` or ``"bottom_right"``.
    """

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
    kv_heads: int | None = None
    softmax_scale: float | None = None
    window: tuple[int, int] | None = None
    softcap: float | None = None
    causal_alignment: str = "top_left"

    def __post_init__(self) -> None:
        if self.dtype not in DTYPES:
            raise ValueError(f"dtype must be one of {sorted(DTYPES)}, got {self.dtype!r}")
        if self.layout not in LAYOUTS:
            raise ValueError(f"layout must be one of {LAYOUTS}, got {self.layout!r}")
        if self.distribution not in DISTRIBUTIONS:
            raise ValueError(f"distribution must be one of {DISTRIBUTIONS}, got {self.distribution!r}")
        object.__setattr__(self, "leading", tuple(self.leading))
        check_features(self, self.leading[-1] if self.leading else None)

    def features(self) -> dict:
        """The keyword arguments of the kernel call beyond ``is_causal`` (only those not at default)."""
        return feature_kwargs(self)

    def needs(self) -> frozenset[str]:
        """The contract's feature names this case uses (``properties.kernels.FEATURE_NAMES``)."""
        gqa = self.kv_heads is not None and bool(self.leading) and self.kv_heads != self.leading[-1]
        return features_used(self) | ({"gqa"} if gqa else set())

    @property
    def kv_leading(self) -> tuple[int, ...]:
        """The leading dims of k and v: ``leading`` with its last dim ``kv_heads`` under GQA."""
        if self.kv_heads is None or not self.leading:
            return self.leading
        return (*self.leading[:-1], self.kv_heads)

    def __str__(self) -> str:
        return case_line(self)

    @classmethod
    def parse(cls, line: str) -> Case:
        """Rebuild a case from ``str(case)`` (literal keyword arguments only; nothing is evaluated)."""
        return parse_line(cls, line, example="Case(n_q=1, n_k=1, ...)")

    def replace(self, **changes) -> Case:
        return Case(**{**asdict(self), **changes})

    @property
    def torch_dtype(self) -> torch.dtype:
        return DTYPES[self.dtype]

    def make_qkv(self, device: torch.device | str) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """q, k, v for this case, on ``device``, in the case's dtype and layout."""
        gen = torch.Generator().manual_seed(self.seed)
        q, k, v = (t.to(self.torch_dtype) for t in self._draw_qkv(gen))
        if self.layout == "broadcast_kv" and self.leading:
            k, v = (t[:1].expand_as(t) for t in (k, v))
            return arrange(q, self.layout, device), _place(k, device), _place(v, device)
        if self.layout == "mixed":
            return tuple(arrange(t, MIXED[name], device) for name, t in zip("qkv", (q, k, v)))
        return tuple(arrange(t, self.layout, device) for t in (q, k, v))

    def make_grad_out(self, device: torch.device | str) -> torch.Tensor:
        """An upstream gradient ``do`` for the output, in the case's layout."""
        gen = torch.Generator().manual_seed(self.seed + 7919)
        do = torch.randn((*self.leading, self.n_q, self.head_dim), generator=gen)
        if self.layout == "broadcast_kv" and self.leading:
            return _place(do.to(self.torch_dtype)[:1].expand_as(do), device)
        layout = MIXED["do"] if self.layout == "mixed" else self.layout
        return arrange(do.to(self.torch_dtype), layout, device)

    def _draw_qkv(self, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """q, k, v in float32, row-major, drawn from ``gen`` as :data:`DISTRIBUTIONS` describes."""
        q_shape = (*self.leading, self.n_q, self.head_dim)
        kv_shape = (*self.kv_leading, self.n_k, self.head_dim)
        kind, scale = self.distribution, self.scale
        if kind in ("normal", "tiny"):
            return tuple(torch.randn(s, generator=gen) * scale for s in (q_shape, kv_shape, kv_shape))
        if kind == "uniform":
            return tuple(_uniform(s, gen) * scale for s in (q_shape, kv_shape, kv_shape))
        if kind == "large":
            q, k, v = (_uniform(s, gen) for s in (q_shape, kv_shape, kv_shape))
            return q * scale, k / scale, v * scale
        if kind == "outliers":
            out = []
            for s in (q_shape, kv_shape, kv_shape):
                t = torch.randn(s, generator=gen)
                hit = torch.rand(s, generator=gen) < OUTLIER_RATE
                out.append(torch.where(hit, t * scale, t))
            return tuple(out)
        q = torch.randn(q_shape, generator=gen) * scale
        v = torch.randn(kv_shape, generator=gen) * scale
        pool = TIE_POOL if kind == "ties" else 1
        rows = torch.randn((*self.kv_leading, pool, self.head_dim), generator=gen) * scale
        pick = torch.randint(0, pool, (self.n_k,), generator=gen)
        return q, rows[..., pick, :], v


def case_line(case) -> str:
    """``ClassName(field=value, ...)`` of a dataclass case, as Python literals: every field, except
    the :data:`FEATURE_FIELDS` at their defaults (so lines written before they existed still read
    the same)."""
    args = ", ".join(f"{f.name}={getattr(case, f.name)!r}" for f in fields(case)
                     if f.name not in FEATURE_FIELDS or getattr(case, f.name) != f.default)
    return f"{type(case).__name__}({args})"


def check_features(case, heads: int | None) -> None:
    """Raise ``ValueError`` unless the feature fields of ``case`` are valid (``heads``: q's heads)."""
    if case.kv_heads is not None:
        if heads is None or case.kv_heads < 1 or heads % case.kv_heads:
            raise ValueError(f"kv_heads = {case.kv_heads} must be >= 1 and divide the query heads "
                             f"(the last leading dim), got {heads}")
    scale = case.softmax_scale
    if scale is not None and not math.isfinite(scale):
        raise ValueError(f"softmax_scale must be a finite number or None, got {scale!r}")
    if case.window is not None:
        object.__setattr__(case, "window", tuple(case.window))
        if len(case.window) != 2 or any(not isinstance(b, int) or b < -1 for b in case.window):
            raise ValueError(f"window must be (left, right), ints >= -1, or None; got {case.window!r}")
    if case.softcap is not None and not (math.isfinite(case.softcap) and case.softcap >= 0):
        raise ValueError(f"softcap must be >= 0 (0 or None: off), got {case.softcap!r}")
    if case.causal_alignment not in ALIGNMENTS:
        raise ValueError(f"causal_alignment must be one of {ALIGNMENTS}, got {case.causal_alignment!r}")


def feature_kwargs(case) -> dict:
    """The kernel call's feature keywords for ``case`` (a :class:`Case` or a varlen case)."""
    out = {}
    if case.softmax_scale is not None:
        out["scale"] = case.softmax_scale
    if case.window is not None:
        out["window"] = case.window
    if case.softcap is not None:  # 0 too: the contract's other spelling of off, passed as given
        out["softcap"] = case.softcap
    if case.causal_alignment != "top_left":
        out["causal_alignment"] = case.causal_alignment
    return out


def features_used(case) -> set[str]:
    """The feature names ``case`` uses, apart from GQA (which depends on the kind of case)."""
    kwargs = feature_kwargs(case)
    names = {"scale": "scale", "window": "window", "softcap": "softcap", "causal_alignment": "bottom_right"}
    return {names[key] for key in kwargs}


def parse_line(cls, line: str, *, example: str):
    """``cls`` rebuilt from its :func:`case_line` (literal keyword arguments only; nothing is run)."""
    wrong = ValueError(f"expected a line like {example!r} (the line a failure prints), got {line!r}")
    try:
        call = ast.parse(line.strip(), mode="eval").body
    except SyntaxError:
        raise wrong from None
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name)
            and call.func.id == cls.__name__ and not call.args):
        raise wrong
    try:
        return cls(**{kw.arg: ast.literal_eval(kw.value) for kw in call.keywords})
    except TypeError:  # a field missing or unknown
        raise wrong from None


def _uniform(shape: tuple[int, ...], gen: torch.Generator) -> torch.Tensor:
    return torch.rand(shape, generator=gen) * 2 - 1


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
    if layout == "column_slice":
        d = t.shape[-1]
        wide = torch.full((*t.shape[:-1], d + COLUMN_SLICE_GAP), math.nan, dtype=t.dtype)
        wide[..., :d] = t
        return wide.to(device)[..., :d]
    if layout == "gapped":
        n, d = t.shape[-2:]
        slices = t.numel() // (n * d)
        buffer = torch.full((slices, n * d + 3), math.nan, dtype=t.dtype)
        buffer[:, : n * d] = t.reshape(slices, n * d)
        return buffer.to(device)[:, : n * d].view(t.shape)
    raise ValueError(f"unknown layout {layout!r}")
