"""What every kernel shares: how a score is made (scale, softcap) and which keys a query sees.

The features of the contract (``properties/kernels.py``) reduce, for the kernels, to five numbers
resolved once per call on the host (:func:`resolve`):

- the softmax ``scale`` (``1/sqrt(d)`` by default) and the ``softcap`` ``c`` (0: off). A score is
  ``s = scale * q.k``, or ``c * tanh(scale * q.k / c)`` with a softcap; inside the kernels it lives
  in base 2 (times log2(e)), as the online softmax uses ``exp2``;
- a band of visible keys: query ``i`` sees key ``j`` iff ``i + lo_diag <= j <= i + hi_diag``,
  either bound possibly absent. With ``c_i = i`` (top-left) or ``i + n_k - n_q`` (bottom-right),
  ``window=(left, right)`` gives ``lo_diag = (n_k - n_q) - left`` and ``hi_diag = (n_k - n_q) +
  right`` (bottom-right; without the ``n_k - n_q`` top-left), and ``is_causal`` caps ``right`` at 0.
  Causal attention is the band with ``hi_diag = 0`` and no lower bound, so one mask serves both.
  ``n_k - n_q`` is per sequence for packed input, so the kernels add it themselves
  (``BOTTOM_RIGHT``); the host passes ``left`` and ``right``.

A band can leave a row with no key at all (a window past the keys, bottom-right with
``n_q > n_k``): the kernels then store ``o = 0`` and ``lse = -inf`` and no gradient flows, which
``EMPTY_ROWS`` switches on where it can happen (see :func:`Features.empty_rows`).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import triton
import triton.language as tl
from triton.language.extra import libdevice

import flash._runtime  # (sets TRITON_INTERPRET before the kernels are decorated)

LOG2E = 1.4426950408889634  # log2(e): exp(x) = exp2(x * LOG2E)
PLAN_FIELDS = tl.constexpr(5)
"""Columns of a split-KV plan table (:func:`flash.decode.split_plans`): splits, keys per split,
first key, end of the keys, first partial slot. Here because the forward reads the table too."""


class Features(NamedTuple):
    """The contract's features resolved for the kernels (see the module docstring)."""

    scale: float
    """The softmax scale."""
    softcap: float
    """The softcap ``c``; 0 when off."""
    left: int
    """How many keys before ``c_i`` a query sees; -1: all of them."""
    right: int
    """How many keys after ``c_i`` a query sees; -1: all of them (0 when causal)."""
    bottom_right: bool
    """Whether ``c_i = i + n_k - n_q`` (else ``c_i = i``)."""

    def empty_rows(self, varlen: bool, n_q: int, n_k: int) -> bool:
        """Whether a row may see no key: a lower window bound, or a bottom-right diagonal that
        starts below the first key (``n_q > n_k``; for packed input any sequence may). The
        forward's guard is bit-neutral for rows that see keys; the backward guards always (see
        :mod:`flash.backward_triton`)."""
        return self.left != -1 or (self.bottom_right and (varlen or n_q > n_k))

    def kernel_args(self, varlen: bool, n_q: int, n_k: int) -> dict[str, object]:
        """The keyword arguments every kernel of this package takes for these features."""
        return dict(
            # Without a softcap the kernels multiply q.k by qk_scale = scale log2(e); with one,
            # they take tanh(q.k * qk_scale) * cap_log2 = log2(e) c tanh(scale q.k / c).
            qk_scale=self.scale / self.softcap if self.softcap else self.scale * LOG2E,
            cap_log2=self.softcap * LOG2E,
            win_left=self.left,
            win_right=self.right,
            SOFTCAP=bool(self.softcap),
            HAS_LEFT=self.left != -1,
            HAS_RIGHT=self.right != -1,
            BOTTOM_RIGHT=self.bottom_right,
            EMPTY_ROWS=self.empty_rows(varlen, n_q, n_k),
        )


def resolve(
    head_dim: int, is_causal: bool, scale: float | None = None,
    window: tuple[int, int] | None = None, softcap: float | None = None,
    causal_alignment: str = "top_left",
) -> Features:
    """The :class:`Features` of a call whose arguments :func:`flash.checks.check_features` passed."""
    left, right = (-1, -1) if window is None else (int(window[0]), int(window[1]))
    if is_causal:
        right = 0 if right == -1 else min(right, 0)
    return Features(
        scale=1.0 / math.sqrt(head_dim) if scale is None else float(scale),
        softcap=float(softcap or 0.0),
        left=left,
        right=right,
        bottom_right=causal_alignment == "bottom_right",
    )


_INTERPRET: tl.constexpr = tl.constexpr(flash._runtime.INTERPRET)


@triton.jit
def _fast_divide(x, y):
    """``x / y`` to 2 ulp for ``|y|`` in ``[2^-126, 2^126]``: one reciprocal and one product
    (``div.approx.f32``), where ``/`` compiles to ``div.full.f32``, the same 2 ulp over every
    ``y`` for six instructions more (range checks and scalings). The interpreter has no
    libdevice: there, ``/``."""
    if _INTERPRET:
        quotient = x / y
    else:
        quotient = libdevice.fast_dividef(x, y)
    return quotient


@triton.jit
def _rounded_product(x, y):
    """``x * y`` rounded to float32 on its own (``mul.rn.f32``), never fused into what follows.

    A score feeds both the row max ``m`` and ``exp2(s - m)``; the compiler would contract
    ``s * scale - m`` into one FMA whose product is not rounded, so the row's largest key got
    ``exp2`` of its score's rounding error instead of ``exp2(0) = 1``: NaN from base-2 scores of
    about ``2^31`` (docs/findings.md, finding 20). Rounded once, the max and the exponent see the
    same score. The interpreter rounds every product anyway (and has no libdevice): there, ``*``."""
    if _INTERPRET:
        product = x * y
    else:
        product = libdevice.mul_rn(x, y)
    return product


@triton.jit
def lse_base2(lse):
    """The saved lse (natural log) in base 2, for the backward's ``P = exp2(s - lse)``; past
    ``2^24`` raised by 4 float32 units of itself.

    That lse is rounded a few times (``m + log2 l``, stored in natural log, scaled back), so it may
    fall up to about 3 float32 units of itself below the row's largest score: harmless while a
    unit is small, but past base-2 lse of about ``2^30`` (a unit of 128) that key's ``exp2``
    overflowed to inf, then the gradients to NaN (docs/findings.md, finding 20). Raised past every
    such error, no ``P`` exceeds 1 there. Below ``2^24`` a unit is at most 1, so ``P`` stays under
    ``2^4`` and nothing changes. One add per row, where a cap on each ``P`` cost an instruction
    per score. -inf (a row that sees no key) and NaN pass as they are."""
    lse2 = lse * 1.4426950408889634
    size = tl.abs(lse2)
    big = (size > 16777216.0) & (size < float("inf"))  # past 2^24, finite
    pad = tl.where(big, size * 4.76837158203125e-07, 0.0)  # 4 units: 2^-21 of the size
    return lse2 + pad


@triton.jit
def tanh(x):
    """tanh to a few float32 ulp *relative*, for every ``x`` (the interpreter has no tanh).

    A relative error matters: with a softcap far above the scores, ``c tanh(s / c)`` is ``s`` to
    first order, and an absolute error ``u`` of tanh would move every score by ``c u``.
    ``x P(x^2) / Q(x^2)``, ``P`` and ``Q`` of degree 4 with ``P(0) = Q(0) = 1`` (so tiny ``x`` get
    ``x``), fitted to tanh's relative error on ``[0, 9]`` (float64 error 2.1e-8), ``x`` clamped to
    ``[-9, 9]``; odd, so no sign handling. Measured in numpy float32, with FMAs and the division
    as a rounded reciprocal times the numerator: at most 5.2 ulp, 3.4 ulp at the 99.9th percentile;
    in the interpreter, which rounds each product and sum apart, 6.13 ulp (``tests/test_tanh.py``).
    Its division's reciprocal is its one special-function instruction: the former ``(1 - e) /
    (1 + e)`` with ``e = exp(-2|x|)`` took an ``exp2`` as well, a third per score beside the
    softmax's, on a unit that retires 16 per clock per SM on Hopper against 128 float32 FMAs
    (``benchmarks/score_sass.py`` counts them; docs/speed.md, "The softcap's cost, counted").
    """
    # Beyond 9, float32 tanh is 1 (1 - tanh(9) = 3e-8). NaN stays NaN, as in torch.tanh: by
    # default the GPU's min and max return the other operand.
    x = tl.clamp(x, -9.0, 9.0, propagate_nan=tl.PropagateNan.ALL)
    z = x * x
    p = 1.335468979846155e-08 * z + 2.060911174339708e-05
    p = p * z + 0.0034955902956426144
    p = p * z + 0.13381028175354004
    p = p * z + 1.0
    q = 7.776572488182865e-07 * z + 0.0003285638231318444
    q = q * z + 0.02587699145078659
    q = q * z + 0.4671434462070465
    q = q * z + 1.0
    return _fast_divide(x * p, q)  # q in [1, 416]


@triton.jit
def diagonal(n_q, n_k, BOTTOM_RIGHT: tl.constexpr):
    """``c_i - i``: 0 top-left, ``n_k - n_q`` bottom-right."""
    if BOTTOM_RIGHT:
        offset = n_k - n_q
    else:
        offset = n_q * 0
    return offset


@triton.jit
def as_vector(flag, like):
    """The scalar condition ``flag`` as a vector of bools shaped like ``like``.

    For a mask: under Triton 3.9 a vector of bools ``&`` a scalar bool is int32, which ``tl.load``
    and ``tl.store`` refuse as a mask ("mask has unsupported dtype"); a vector ``&`` a vector is bool.
    """
    return like * 0 + flag.to(tl.int32) != 0


@triton.jit
def visible(seen, rows, cols, lo_diag, hi_diag, HAS_LEFT: tl.constexpr, HAS_RIGHT: tl.constexpr):
    """``seen`` (the caller's length mask) and the band ``rows + lo_diag <= cols <= rows + hi_diag``
    (broadcast; each bound only if flagged)."""
    if HAS_RIGHT:
        seen = seen & (cols <= rows + hi_diag)
    if HAS_LEFT:
        seen = seen & (cols >= rows + lo_diag)
    return seen


@triton.jit
def key_range(first_row, last_row, n_k, lo_diag, hi_diag, BLOCK_K: tl.constexpr,
              HAS_LEFT: tl.constexpr, HAS_RIGHT: tl.constexpr):
    """``[lo, hi)``: the keys some row in ``[first_row, last_row]`` sees, ``lo`` tile-aligned.

    ``hi >= lo`` always (an empty range when no row sees a key)."""
    lo = n_k * 0
    hi = n_k
    if HAS_LEFT:
        # Clamp before dividing: integer division of negatives rounds differently in the compiler
        # (towards zero) and the interpreter (down).
        lo = (tl.maximum(first_row + lo_diag, 0) // BLOCK_K) * BLOCK_K
    if HAS_RIGHT:
        hi = tl.minimum(hi, tl.maximum(last_row + hi_diag + 1, 0))
    return lo, tl.maximum(hi, lo)


@triton.jit
def query_range(first_col, last_col, n_q, lo_diag, hi_diag, BLOCK_Q: tl.constexpr,
                HAS_LEFT: tl.constexpr, HAS_RIGHT: tl.constexpr):
    """``[lo, hi)``: the rows that see some key in ``[first_col, last_col]``, ``lo`` tile-aligned."""
    lo = n_q * 0
    hi = n_q
    if HAS_RIGHT:
        lo = (tl.maximum(first_col - hi_diag, 0) // BLOCK_Q) * BLOCK_Q
    if HAS_LEFT:
        hi = tl.minimum(hi, tl.maximum(last_col - lo_diag + 1, 0))
    return lo, tl.maximum(hi, lo)


@triton.jit
def unmasked_key_range(first_row, last_row, n_k, lo_diag, hi_diag, lo, hi, BLOCK_K: tl.constexpr,
                       HAS_LEFT: tl.constexpr, HAS_RIGHT: tl.constexpr):
    """``[full_lo, full_hi)``: the key tiles of ``[lo, hi)`` (from :func:`key_range`) that every row
    in ``[first_row, last_row]`` sees whole: before ``n_k``, from the last row's lower bound on and
    before the first row's upper bound. They need no mask; ``[lo, full_lo)`` and ``[full_hi, hi)``
    (the band's edges, the partial last tile) do. ``lo <= full_lo <= full_hi <= hi``, tile-aligned
    from ``lo``, each run possibly empty."""
    full_hi = (n_k // BLOCK_K) * BLOCK_K  # end of the key tiles that lie wholly before n_k
    if HAS_RIGHT:
        full_hi = tl.minimum(full_hi, (tl.maximum(first_row + hi_diag + 1, 0) // BLOCK_K) * BLOCK_K)
    full_lo = lo
    if HAS_LEFT:
        full_lo = tl.cdiv(tl.maximum(last_row + lo_diag, 0), BLOCK_K) * BLOCK_K
    full_lo = tl.minimum(tl.maximum(full_lo, lo), hi)
    full_hi = tl.minimum(tl.maximum(full_hi, full_lo), hi)
    return full_lo, full_hi


@triton.jit
def unmasked_query_range(first_col, last_col, n_q, lo_diag, hi_diag, lo, hi, BLOCK_Q: tl.constexpr,
                         HAS_LEFT: tl.constexpr, HAS_RIGHT: tl.constexpr):
    """``[full_lo, full_hi)``: the query tiles of ``[lo, hi)`` (from :func:`query_range`) whose every
    row sees every key in ``[first_col, last_col]``: rows before ``n_q``, from the last key's first
    row on (row ``i`` sees key ``j`` iff ``j - hi_diag <= i <= j - lo_diag``) and up to the first
    key's last row. As :func:`unmasked_key_range`, with the roles of rows and keys swapped."""
    full_hi = (n_q // BLOCK_Q) * BLOCK_Q  # end of the query tiles that lie wholly before n_q
    if HAS_LEFT:
        full_hi = tl.minimum(full_hi, (tl.maximum(first_col - lo_diag + 1, 0) // BLOCK_Q) * BLOCK_Q)
    full_lo = lo
    if HAS_RIGHT:
        full_lo = tl.cdiv(tl.maximum(last_col - hi_diag, 0), BLOCK_Q) * BLOCK_Q
    full_lo = tl.minimum(tl.maximum(full_lo, lo), hi)
    full_hi = tl.minimum(tl.maximum(full_hi, full_lo), hi)
    return full_lo, full_hi


@triton.jit
def scores(q, kt, qk_scale, cap_log2, SOFTCAP: tl.constexpr, INPUT_PRECISION: tl.constexpr,
           ROUNDED: tl.constexpr = True):
    """Base-2 scores ``q @ kt`` and, with a softcap, ``tanh(scale q.k / c)`` (else zeros)
    for the backward's derivative ``1 - tanh^2``.

    ``ROUNDED``: each score rounded on its own (:func:`_rounded_product`), as the forward needs for
    its row max; the backward subtracts a saved lse (:func:`lse_base2`), not a max of these
    scores, and lets the compiler fuse ``s - lse`` into the product (one FMA per score).

    tanh is :func:`tanh`, a few float32 ulp, for every dtype. The GPU's ``tanh.approx.f32`` (one
    instruction, what FlashAttention-2's softcap uses) was tried for 16-bit inputs on the H200
    (2026-12-02): the suite failed it, rightly under the contract, whose lse is a float32 result
    for every input dtype: a single key's lse off by 1.5e-5 where float32 allows 9.5e-6, and an
    lse 9.3e-5 off where the bound was 3.4e-5 (docs/speed.md, Decoding; its speed was not measured)."""
    s = tl.dot(q, kt, input_precision=INPUT_PRECISION)
    if SOFTCAP:
        t = tanh(s * qk_scale)
        x, factor = t, cap_log2
    else:
        t = s * 0.0
        x, factor = s, qk_scale
    if ROUNDED:
        s = _rounded_product(x, factor)
    else:
        s = x * factor
    return s, t
