"""The one error model: how far from the float64 oracle a correct kernel may be.

The rule (flash-attention's and FlagAttention's suites use it): a kernel's worst error against the
float64 oracle may be at most ``factor`` times the worst error of a PyTorch reference computed
*in the precision the contract gives the output* (:func:`oracle.dense.dense_attention` with
``compute_dtype=None`` for ``o`` and the gradients, which are in the inputs' dtype; in float32 for the
lse, which the contract makes float32 whatever the inputs, :func:`lse_reference_dtype`), plus a floor:

    max |kernel - oracle|  <=  factor * max |reference - oracle|  +  floor
    floor = u(dtype) * rounded + ACCUMULATOR_ULPS * u(float32) * (1 + 2 S) * magnitude
            + inherited + u(dtype) x_min(dtype)

(``dtype`` the output's: the lse's is float32.) Why each piece:

- ``max |reference - oracle|`` measures what the dtype alone costs on *these* inputs: longer rows,
  larger scores and wider head dims all raise it, so the bound follows the case instead of being a
  fixed ``atol`` that is loose for one shape and tight for another. Why the output's precision and
  not the inputs': until issue #19 the lse's reference was computed in the input dtype, so a
  float16 lse was held to float16 accuracy (the correct kernels used at most 1.6e-4 of that bound on
  the CPU grids), and a kernel that kept its running max, its running sum or the lse itself in
  float16 (``tests/broken/{m,l,lse}_in_input_dtype.py``) passed every check. ``o`` and the gradients
  stay with the inputs' dtype: PyTorch's own composite attention computes its scores in it (its
  float16 scores cost ``u |S|`` in every probability), and the bound must pass it.
- ``factor`` (:data:`OUTPUT`, :data:`LSE`, :data:`GRADIENT`) is the slack for doing the same math in
  another order (tiles, online rescaling, ``exp2``). 2 for the forward, as flash-attention uses.
  Gradients have their own constant because a backward accumulates across tiles in an order of its
  own; it is 2 as well today, and any change must say here what measurement asked for it.
- the floor covers cases where the reference happens to be (nearly) exact, such as a single key,
  where any ``factor`` times zero would demand bit-exactness. ``u(dtype)`` is the unit roundoff of
  the output dtype (2^-11 fp16, 2^-8 bf16, 2^-24 fp32): rounding to it costs that much, relative to
  ``rounded``, the size of what the kernel rounds (by default ``magnitude``, below). The second term
  is the kernel's float32 arithmetic, which any dtype goes through: ``exp2`` on a GPU is an
  approximation good to about 2 ulp, the division by ``l`` and the base-2 rescaling add one each, so
  :data:`ACCUMULATOR_ULPS` = 8 ulp of float32 (about 5e-7, relative). On float32 inputs that term
  is what lets a kernel be a few ulp worse than PyTorch's exact ``exp``; measured on an H100,
  float32 errors of the Triton kernel were up to 3.4x the reference's at ~1e-6.
- ``u(dtype) x_min(dtype)`` (:func:`underflow`) is what storing a result below the dtype's
  smallest normal number ``x_min`` costs, absolute: half a subnormal spacing (float16: 3e-8).
- ``S`` (:func:`score_magnitude`) is the size of the scores' *rounding*: a score is a dot product,
  rounded relative to ``scale * sum_c |q_ic| |k_jc|``, not to the score itself (which can be small
  by cancellation), and ``exp2(s - m)``, ``exp2(s - lse)`` in a backward, and the lse all carry that
  absolute error ``e``. A shift ``e`` in the scores moves every probability by a factor within
  ``exp(+-2 e)``, hence ``2 S``. The fuzzer found both cases this term exists for: float32
  gradients with outlier values (scores ~10: dv off by 2.9e-6 against a floor of 1.6e-6 without
  it), and q scaled so scores reach 1e4 (lse off by 12 ulp of the score). For ordinary unit-scale
  inputs ``S`` is 5 to 10, so float32 bounds are ~1e-5 relative; bf16/fp16 bounds are ruled by
  the reference's error and barely move.
- ``magnitude`` is the scale every error term is relative to, chosen by the caller: for the output,
  ``max |v|`` (the output is a convex combination of rows of v, so its errors scale with v); for the
  lse, 1 with ``S`` raised to ``max |lse|`` (an absolute error e in the lse is a relative error e in
  every probability, so the lse's floor is absolute, and grows with the size of the scores); for a
  gradient, the size of the terms it sums, which can be far larger than the gradient itself:
  ``dS = P * (dP - D)`` is a difference of two numbers of size ``|do_i| |v_j|`` that cancel exactly
  when a row sees one key (then ``dq = dk = 0`` and any rounding is all error).
  :func:`gradient_magnitudes` gives ``scale |do| |v| max|k|`` for dq, ``scale |do| |v| max|q|`` for
  dk (``|x|`` the largest row 2-norm, bounding every dot product by Cauchy-Schwarz) and ``max|do|``
  for dv, or, where the oracle's probabilities are at hand (every dense check; not the packed
  ones), the size of the operands themselves where that is smaller (:func:`gradient_terms`: the
  dot products in absolute values, weighted by ``P``), each raised to the oracle gradient's own
  largest element where that is bigger.
- ``rounded`` and ``inherited``, for dq and dk where the probabilities are at hand
  (:func:`gradient_terms`): a kernel may round ``dS`` to the input dtype before its products (flash
  does, as the reference does), which costs ``u(dtype)`` relative to the terms ``|dS| |k|``
  themselves, not to the operands of the subtraction that made them (0 where it cancels, as with one
  key); and it computes ``D`` from ``o`` as stored, inheriting ``o``'s rounding, which the reference
  (whose softmax backward sums ``dP P``) never does.

What measurement set the bounds, and how sharp each is: ``python -m fuzz sensitivity`` (the
headroom of every correct kernel, the largest fraction of its bound it uses over the grids and a
fuzz sample, and the smallest error each check detects), in ``docs/sensitivity-cpu.md``, with the
before and after of issue #19 in ``docs/sensitivity.md``. Issue #19 changed two things, by that
measurement (``grid / sample``, the largest over flash, its dense backward, the mock, the dense
oracle, tests.conforming, SDPA and SDPA's math backend on the CPU, float16): the lse's reference
and floor (0.00016 / 0.00047 -> 0.092 / 0.2, as float32's 0.13 / 0.16; an lse rounded through
float16 was detected on none of the threshold cases, now on all); and the dq and dk floors, whose
``u(dtype)`` term multiplied the Cauchy-Schwarz size of the operands (dq 0.11 -> 0.29, dk
0.11 -> 0.41 on the grid; the sample's 0.33 and 0.42 were set by subnormal values, where the
underflow term rules; the smallest relative error detected went from 22 u to 4.7 u for dq). With
them ``tests/broken/{delta,p}_in_input_dtype.py`` fail. bfloat16, measured on the references and on
flash's arithmetic emulated in PyTorch: at most 0.26 (o), 0.21 (lse), 0.32, 0.34, 0.52 (dq, dk, dv).
Left as they were, and why: the float16 output (0.24: not loose); the float32 floors of ``o``, dq
and dk, which correct kernels use up to 0.046, 0.077 and 0.1 of on the CPU: their
``ACCUMULATOR_ULPS (1 + 2 S)`` is the size the lse needs (flash used 0.46 of it on
``Case(33, 257, 256, (2,), 'float32', False, distribution='outliers', scale=30.0, seed=12)``, and the
fuzzer's lse 12 ulp of the score off at scores of 1e4 is 0.75 of it), and a row split between two
keys passes the same score error to ``o`` and the gradients (an absolute error ``e`` in the scores of
a row split evenly between two keys moves ``o`` by ``e |v_1 - v_2| / 4``: the o floor must carry the
scores' rounding the lse's does, though no grid case realizes it). The H200 (flash, bfloat16 too,
``docs/sensitivity-h200.md``, 2026-12-01) agrees: float32 ``o``, dq, dk at 0.059, 0.043, 0.023;
16-bit outputs and gradients at 0.21-0.39; the 16-bit lse at 0.10 and 0.12, which the table marks
loose and which stay: 16-bit inputs give the lse exact float32 products and the same float32 sum
and bound as float32 inputs, whose row (0.14) meets the rule. A coefficient of their own for
float32 ``o``, dq, dk was not tried: it would need the GPU suite twice on the new bounds, and that
table's grid and 20-case sample are where it would come from.

The reference's error is measured only where the reference is finite: a same-dtype reference can
overflow (fp16 scores past 65504) where the kernel, accumulating in float32, must not.
Non-finite kernel values where the oracle is finite are always a failure, reported on their own; so
is anything but the same infinity where the oracle is infinite (the lse of a row that sees no key
is exactly ``-inf``). Where the exact value lies beyond the output dtype's range (a float16 gradient
of 7e4: the fuzzer drew one on an H200, ``large`` values with a softmax scale of 6), no kernel can
store it, and both sides are compared clamped to that range (:func:`saturated`).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import NamedTuple

import torch

from oracle.dense import expand_kv, softmax_scale

UNIT_ROUNDOFF: dict[torch.dtype, float] = {
    torch.float16: 2.0**-11,
    torch.bfloat16: 2.0**-8,
    torch.float32: 2.0**-24,
    torch.float64: 2.0**-53,
}
"""Unit roundoff u = 2^-p of each dtype (p = significand bits): the relative cost of one rounding."""

ACCUMULATOR_ULPS = 8.0
"""Ulps of float32 allowed for the kernel's own fp32 arithmetic (exp2, rescaling, division)."""

SUM_ULPS = 2.0
"""Ulps of float32, times the square root of the number of terms, allowed for one long float32 sum
(:func:`floor`'s ``terms``).

A kernel may accumulate a sum of ``n`` terms one after the other in float32 (FlashAttention's
``dv += P^T do`` over query tiles, a ``tl.dot`` on IEEE float32 that adds one product at a time),
while the float32 reference (a BLAS matmul) sums in blocks or pairs: its error grows like
``log n``, the sequential sum's like ``sqrt(n) u`` times the partial sums (Higham and Mary's
probabilistic bound, *SIAM J. Sci. Comput.* 41, 2019). Found by the H200 suite (2026-12-01,
``test_fuzz_varlen_gpu``): a float32 ``dv`` summed over 4032 queries of one key, off by 2.46e-4
at a value of 81.9 (magnitude 101), against a bound of 1.84e-4 (twice the reference's 1.3e-5,
plus a floor of 1.57e-4 with no length in it): 0.64 ``sqrt(n) u`` times the magnitude. 2 leaves
three times that. In 16-bit dtypes the term is far below the dtype's own roundoff up to millions of
terms; in float32 it doubles a bound at ``n`` = 16384 (256 ulp against ``ACCUMULATOR_ULPS (1 + 2S)``).
"""

LSE_DTYPE = torch.float32
"""The lse's dtype, whatever the inputs' (the contract, ``properties/kernels.py``): its floor is
float32's, and its reference is computed in float32 (:func:`lse_reference_dtype`)."""


def lse_reference_dtype(dtype: torch.dtype) -> torch.dtype:
    """The precision the lse's same-precision reference is computed in, for inputs of ``dtype``:
    float32, the lse's own dtype (16-bit inputs upcast: their products are exact in float32 and
    the contract's lse is a float32 sum of them), or the inputs' where that is finer (float64)."""
    return torch.promote_types(dtype, LSE_DTYPE)


@dataclass(frozen=True)
class Quantity:
    """One compared quantity: its name and its factor over the same-dtype reference's error."""

    name: str
    factor: float


OUTPUT = Quantity("output o", 2.0)
LSE = Quantity("log-sum-exp", 2.0)
GRADIENT = Quantity("gradient", 2.0)


def scale_size(q: torch.Tensor, scale: float | None) -> float:
    """``|scale|``, the softmax scale (``None``: ``1 / sqrt(d)``) as a size: every bound here is
    made of magnitudes, and a negative scale makes scores and gradients as large as its opposite."""
    return abs(softmax_scale(q.shape[-1], scale))


def gradient_magnitudes(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, do: torch.Tensor,
    oracle_grads: tuple[torch.Tensor, torch.Tensor, torch.Tensor], *, scale: float | None = None,
    probabilities: torch.Tensor | None = None, output: torch.Tensor | None = None,
) -> tuple[float, float, float]:
    """Floor magnitudes for ``dq, dk, dv`` (see the module docstring for the reasoning); ``scale``
    is the softmax scale (``None``: ``1 / sqrt(d)``).

    Given the float64 ``probabilities`` ``P`` (``[..., h_q, n_q, n_k]``, 0 at hidden keys) and
    ``output`` ``o``, each magnitude is the smaller of that bound and the size of the operands
    themselves (:func:`gradient_terms`).
    """

    def row_norm(t: torch.Tensor) -> float:
        return float(t.double().norm(dim=-1).max())

    def elem(t: torch.Tensor) -> float:
        return float(t.double().abs().max())

    dp = scale_size(q, scale) * row_norm(do) * row_norm(v)
    terms = [dp * elem(k), dp * elem(q), elem(do)]
    if probabilities is not None and output is not None:
        operands = gradient_terms(q, k, v, do, probabilities, output, scale=scale).operands
        terms = [min(old, new) for old, new in zip(terms, operands)]
    return tuple(max(term, elem(g)) for term, g in zip(terms, oracle_grads))


class GradientTerms(NamedTuple):
    """:func:`gradient_terms`: for ``(dq, dk, dv)``, the size of the operands of the terms the
    gradient sums; for ``(dq, dk)``, the size of the terms themselves, and what reading the stored
    ``o`` adds (``dv = P^T do`` reads no ``o``, and its terms are its operands)."""

    operands: tuple[float, float, float]
    terms: tuple[float, float]
    inherited: tuple[float, float]


def gradient_terms(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, do: torch.Tensor, p: torch.Tensor,
    o: torch.Tensor, *, scale: float | None = None,
) -> GradientTerms:
    """The sizes a floor on ``dq`` and ``dk`` is made of, from the float64 probabilities ``p``
    (``[..., h_q, n_q, n_k]``, 0 at hidden keys) and output ``o``; ``q.dtype`` is the output dtype.

    ``dv_j = sum_i P_ij do_i``: its terms are ``sum_i P_ij |do_ic|``, which a kernel's float32 sum
    and its rounding of ``P`` to the input dtype (``flash``'s, the reference's) are relative to.
    ``dq_i = scale sum_j dS_ij k_j`` with ``dS_ij = P_ij (dP_ij - D_i)``, ``dP_ij = do_i . v_j`` and
    ``D_i = do_i . o_i`` (``dk_j = scale sum_i dS_ij q_i``; a kv head's ``dk`` sums the terms of its
    query heads). Three sizes, each the largest element:

    - ``operands``: the subtraction cancels (exactly, when a row sees one key), so float32 rounding is
      relative to its operands, each a dot product whose rounding is relative to the dot product of
      absolute values (Higham, *Accuracy and Stability of Numerical Algorithms*, section 3.1):
      ``scale sum_j P_ij (|do_i| . |v_j| + |do_i| . |o_i|) |k_jc|``;
    - ``terms``: a kernel may round ``dS`` to the input dtype before its product with k (or q), as
      ``flash`` does and the same-dtype reference does, which costs ``u(dtype)`` relative to
      ``scale sum_j |dS_ij| |k_jc|`` (the exact ``dS``: 0 where it cancels);
    - ``inherited``: a backward computes ``D`` from ``o`` as the forward stored it, rounded to the
      output dtype, so ``D_i`` is off by ``R_i = |do_i| . |fl(o_i) - o_i|`` (0 where ``o`` is a number
      of that dtype, as with one key), which reaches dq as ``scale sum_j P_ij R_i |k_jc|``. The
      reference never computes ``D`` from ``o`` (its softmax backward sums ``dP P``): where dq cancels
      to 0 (equal keys), this is an error of every correct kernel that the reference does not make.
    """
    kv_heads = k.shape[-3] if k.dim() >= 3 else None
    ka, va = expand_kv(q, k).double().abs(), expand_kv(q, v).double().abs()
    qa, p, o = q.double().abs(), p.double(), o.double()
    doa = do.double().abs()
    scale = scale_size(q, scale)

    def top(t: torch.Tensor, factor: float = scale) -> float:
        return factor * float(t.max()) if t.numel() else 0.0

    def group(t: torch.Tensor) -> torch.Tensor:  # grouped heads: a kv head sums its group's terms
        if kv_heads is None or kv_heads == q.shape[-3]:
            return t
        return t.unflatten(-3, (kv_heads, q.shape[-3] // kv_heads)).sum(-3)

    def sizes(w: torch.Tensor) -> tuple[float, float]:  # of scale w |k| (dq) and scale w^T |q| (dk)
        return top(torch.matmul(w, ka)), top(group(torch.matmul(w.transpose(-2, -1), qa)))

    # One n_q x n_k temporary at a time besides P (a 16k x 16k float64 matrix is 2 GB).
    w = torch.matmul(do.double(), expand_kv(q, v).double().transpose(-2, -1))  # dP
    terms = sizes(w.sub_((do.double() * o).sum(-1, keepdim=True)).mul_(p).abs_())  # |dS|
    w = torch.matmul(doa, va.transpose(-2, -1))
    operands = sizes(w.add_((doa * o.abs()).sum(-1, keepdim=True)).mul_(p))
    del w
    rounding = (doa * (o.to(q.dtype).double() - o).abs()).sum(-1, keepdim=True)  # R_i
    inherited = (top(rounding * torch.matmul(p, ka)),
                 top(group(torch.matmul(p.transpose(-2, -1), rounding * qa))))
    t_dv = top(group(torch.matmul(p.transpose(-2, -1), doa)), 1.0)
    return GradientTerms((*operands, t_dv), terms, inherited)


def floor(dtype: torch.dtype, magnitude: float, scores: float, terms: int = 1, *,
          rounded: float | None = None, inherited: float = 0.0) -> float:
    """The error every correct kernel is allowed regardless of the reference (see module docstring).

    ``scores`` is :func:`score_magnitude` of the inputs (``S`` in the module docstring); ``terms`` is
    the length of the longest sum behind one result (keys for o, the lse and dq; queries, times the
    group for grouped heads, for dk and dv), which :data:`SUM_ULPS` and :func:`underflow` charge
    for. The float32
    arithmetic costs ``ACCUMULATOR_ULPS`` ulps relative to ``magnitude``, the size of what it sums;
    rounding to ``dtype`` costs ``u(dtype)`` relative to ``rounded``, the size of what the kernel may
    round (``None``: ``magnitude``; for dq and dk, :func:`gradient_terms`), plus ``inherited``, what a
    gradient inherits from the stored output (:func:`gradient_terms`), the two together never more
    than ``u(dtype) magnitude``.
    """
    u = UNIT_ROUNDOFF[dtype]
    # Never more than u(dtype) x magnitude, the whole of it before issue #19: no bound grows.
    rounding = u * magnitude if rounded is None else min(u * rounded + inherited, u * magnitude)
    u32 = UNIT_ROUNDOFF[torch.float32]
    acc = ACCUMULATOR_ULPS * u32 * (1.0 + 2.0 * scores) + SUM_ULPS * u32 * math.sqrt(max(terms, 1))
    return rounding + acc * magnitude + underflow(dtype) * math.sqrt(max(terms, 1))


def sum_lengths(n_q: int, n_k: int, group: int = 1) -> tuple[int, int, int]:
    """:func:`floor`'s ``terms`` for ``dq, dk, dv``: dq sums over the keys, dk and dv over the
    queries of every head of the group."""
    return n_k, n_q * group, n_q * group


def group_of(q: torch.Tensor, k: torch.Tensor) -> int:
    """Query heads per kv head of a dense call (dim -3; 1 below rank 3)."""
    return q.shape[-3] // k.shape[-3] if q.dim() >= 3 and k.shape[-3] else 1


def underflow(dtype: torch.dtype) -> float:
    """What storing one result below the dtype's smallest normal number may cost: ``u`` times that
    number, absolute (gradual underflow: ``fl(x) = x (1 + d) + e``, ``|e| <= u x_min``; Higham, *Accuracy
    and Stability of Numerical Algorithms*, section 2.1). Half a subnormal spacing: 3.0e-8 in float16,
    negligible in bfloat16 and float32.

    Why the floor has it: a relative floor ``u x magnitude`` is below one subnormal spacing when the
    magnitude is, and then demands of a subnormal result more than the dtype can hold. Found by a CPU
    ``python -m fuzz report`` (2026-12-01) on SDPA's flash backend: a float16 ``dk`` of exact value
    -1.2e-8 (``tiny`` values, softmax scale 2) stored as 6.0e-8, one subnormal spacing off, against a
    bound of 6.7e-8 made of twice the reference's half-spacing error and a floor of 7.6e-9.

    :func:`floor` charges it ``sqrt(terms)`` times: a kernel may keep partial sums in the output
    dtype between blocks of its reduction, and each one that lands below ``x_min`` costs this much
    again (a random walk of such roundings, as :data:`SUM_ULPS` is for float32 sums). Found by a CPU
    ``python -m fuzz report`` (2026-12-01, after issue #19 made the 16-bit gradient floors of the
    size of what a kernel rounds, not of the Cauchy-Schwarz size of the operands, 55 times larger
    here): SDPA's CPU backward on ``tiny`` float16 values, ``Case(n_q=129, n_k=129, head_dim=16,
    leading=(1, 1), dtype='float16', distribution='tiny', scale=0.00390625)``, a subnormal ``dk``
    (4.9e-6 at most) off by 1.3e-7, 2.2 subnormal spacings, against 1.03e-7 (the reference: half a
    spacing). With ``sqrt(129)`` the term is 3.4e-7. It matters only where results are subnormal in
    float16 (it is below 1e-40 in bfloat16 and float32), so no bound on normal values moves.
    """
    return UNIT_ROUNDOFF[dtype] * torch.finfo(dtype).smallest_normal


def max_abs_error(x: torch.Tensor, oracle: torch.Tensor) -> float:
    """``max |x - oracle|`` in float64, over the positions where both are finite (0.0 if none)."""
    both = torch.isfinite(x) & torch.isfinite(oracle)
    if not bool(both.any()):
        return 0.0
    return float((x.double() - oracle.double()).abs()[both].max())


def saturated(actual: torch.Tensor, oracle: torch.Tensor, margin: float = 0.0
              ) -> tuple[torch.Tensor, torch.Tensor]:
    """``actual`` and ``oracle`` with both clamped to ``actual``'s dtype's range wherever the exact
    value may lie beyond it, else as they are: where ``|oracle| + margin`` passes the dtype's largest
    number. ``margin`` is 0 for the float64 oracle; for an ``oracle`` that is itself a kernel's result
    (a second call, or a sum of them) it is that result's bound.

    An exact value past the dtype's largest number (a gradient of 7e4 in float16, whose largest is
    65504) cannot be stored: a correct kernel rounds it to that number or to an infinity of its
    sign, and either is then as close as the dtype allows. Only where the exact value may be out of
    range is an infinite result accepted; a NaN never is.
    """
    if not actual.dtype.is_floating_point:
        return actual, oracle
    top = torch.finfo(actual.dtype).max
    over = torch.isfinite(oracle) & (oracle.double().abs() + margin > top)
    if not bool(over.any()):
        return actual, oracle
    return (torch.where(over, actual.double().clamp(-top, top), actual.double()),
            torch.where(over, oracle.double().clamp(-top, top), oracle.double()))


def assert_finite_where_expected(
    name: str, actual: torch.Tensor, expected: torch.Tensor, *, context: str,
    axes: tuple[str, ...] = ("row", "col"),
) -> None:
    """Raise ``AssertionError`` where ``actual`` is non-finite and ``expected`` finite, or where
    ``expected`` is infinite (the lse of a row that sees no key is ``-inf``) and ``actual`` is
    anything else: an infinity is exact, so no bound applies to it."""
    shape = tuple(expected.shape)
    for bad, what in ((~torch.isfinite(actual) & torch.isfinite(expected), "non-finite values where "
                       "finite ones were expected"),
                      (torch.isinf(expected) & (actual != expected), "values other than the "
                       "expected infinity")):
        if bool(bad.any()):
            first = int(bad.reshape(-1).nonzero()[0])
            raise AssertionError(
                f"{name}: {context}: {int(bad.sum())} {what}; first at {_index(first, shape, axes)}: "
                f"got {actual.reshape(-1)[first].item()}, expected {expected.reshape(-1)[first].item():.6g} "
                f"(bound: finite where the oracle is finite, and the oracle's infinity exactly)"
            )


def error_bound(
    quantity: Quantity, reference: torch.Tensor, oracle: torch.Tensor, *, dtype: torch.dtype,
    magnitude: float, scores: float, terms: int = 1, rounded: float | None = None,
    inherited: float = 0.0,
) -> tuple[float, str]:
    """The bound for ``quantity`` and a one-line account of how it was made (``rounded`` and
    ``inherited``: see :func:`floor`)."""
    ref_err = max_abs_error(reference, oracle)
    fl = floor(dtype, magnitude, scores, terms, rounded=rounded, inherited=inherited)
    bound = quantity.factor * ref_err + fl
    parts = [str(dtype).removeprefix("torch."), f"magnitude {magnitude:.3g}", f"scores {scores:.3g}"]
    if terms > 1:
        parts.append(f"{terms} terms")
    if rounded is not None:
        parts.append(f"rounded {rounded:.3g}")
    if inherited:
        parts.append(f"inherited from the stored o {inherited:.3g}")
    how = f"{quantity.factor:g} x reference error {ref_err:.3e} + floor {fl:.3e} ({', '.join(parts)})"
    return bound, how


class Margin(NamedTuple):
    """One call of :func:`assert_within_error_model`: the quantity, its worst error and its bound."""

    quantity: str
    error: float
    bound: float

    @property
    def fraction(self) -> float:
        """``error / bound``: at most 1 for a call that passed (0 for a zero bound met exactly)."""
        if self.bound > 0:
            return self.error / self.bound
        return 0.0 if self.error == 0 else math.inf


_margins: ContextVar[list[Margin] | None] = ContextVar("error_model_margins", default=None)


@contextmanager
def record_margins() -> Iterator[list[Margin]]:
    """Within the block, every :func:`assert_within_error_model` call that gets as far as its bound
    appends a :class:`Margin` (a failing one too, before it raises) to the list yielded. Outside
    such a block nothing is recorded."""
    margins: list[Margin] = []
    token = _margins.set(margins)
    try:
        yield margins
    finally:
        _margins.reset(token)


def _index(flat: int, shape: tuple[int, ...], names: tuple[str, ...]) -> str:
    """``flat`` index into ``shape`` as 'batch (0, 2), row 64, col 5'."""
    idx = []
    for size in reversed(shape):
        idx.append(flat % size)
        flat //= size
    idx.reverse()
    lead = tuple(idx[: len(shape) - len(names)])
    parts = [f"batch {lead}"] + [f"{n} {i}" for n, i in zip(names, idx[len(lead):])]
    return ", ".join(parts)


def assert_within_error_model(
    quantity: Quantity,
    actual: torch.Tensor,
    oracle: torch.Tensor,
    reference: torch.Tensor,
    *,
    dtype: torch.dtype,
    magnitude: float,
    scores: float,
    terms: int = 1,
    context: str,
    axes: tuple[str, ...] = ("row", "col"),
    rounded: float | None = None,
    inherited: float = 0.0,
) -> None:
    """Raise ``AssertionError`` unless ``actual`` is within the error model of ``oracle``.

    Args:
        quantity: what is compared (its name and factor).
        actual: the kernel's result; ``oracle``: float64 oracle; ``reference``: same-dtype reference.
        dtype: the kernel's input dtype (whose roundoff sets the floor).
        magnitude: the scale of the floor (see module docstring).
        scores: :func:`score_magnitude` of the inputs (for the lse, at least ``max |lse|``).
        terms: the length of the longest sum behind one element (:func:`floor`).
        context: names the kernel and the case, for the message.
        axes: names of the trailing axes, for locating the worst element.
        rounded, inherited: for dq and dk, what the kernel may round and what reading the stored
            output costs (:func:`floor`, :func:`gradient_terms`).
    """
    if actual.shape != oracle.shape:
        raise AssertionError(
            f"{quantity.name}: {context}: shape {tuple(actual.shape)}, expected {tuple(oracle.shape)}"
        )
    shape = tuple(oracle.shape)
    bound, how = error_bound(quantity, reference, oracle, dtype=dtype, magnitude=magnitude,
                             scores=scores, terms=terms, rounded=rounded, inherited=inherited)
    actual, oracle = saturated(actual, oracle)
    assert_finite_where_expected(quantity.name, actual, oracle, context=context, axes=axes)
    err = (actual.double() - oracle.double()).abs()
    err = torch.where(torch.isfinite(oracle), err, torch.zeros_like(err))
    worst = int(err.reshape(-1).argmax())
    worst_err = float(err.reshape(-1)[worst])
    if (record := _margins.get()) is not None:
        record.append(Margin(quantity.name, worst_err, bound))
    if not worst_err <= bound:
        n_over = int((err > bound).sum())
        raise AssertionError(
            f"{quantity.name}: {context}: error {worst_err:.3e} exceeds bound {bound:.3e} "
            f"at {_index(worst, shape, axes)} (got {actual.reshape(-1)[worst].item():.6g}, "
            f"oracle {oracle.reshape(-1)[worst].item():.6g}); {n_over} of {err.numel()} elements "
            f"over; bound = {how}"
        )


def probability_sum_bound(dtype: torch.dtype, n_k: int) -> float:
    """How far from 1 a row of *recovered* probabilities (or any convex weights) may sum.

    A kernel exposes its probabilities only through its output; with one-hot columns of ``v``,
    output element ``(i, j)`` is ``P_ij`` after two roundings to ``dtype`` (a kernel casts ``p`` to
    the dtype of ``v`` for the ``p @ v`` product, then stores ``o`` in it), each a relative error of
    ``u(dtype)``. Summing a row of non-negative terms whose total is 1, relative errors add to at
    most their largest, so those cost ``2 u(dtype)``. The denominator ``l`` is a float32 sum of
    ``n_k`` non-negative terms: in any order, that is within ``(n_k - 1) u(float32)`` of its exact
    value, relative (Higham, *Accuracy and Stability of Numerical Algorithms*, eq. 4.4), and
    ``exp2``, rescaling and division add :data:`ACCUMULATOR_ULPS`. A probability too small to be a
    normal number of ``dtype`` (below 6e-5 in float16) is rounded absolutely, not relatively, by
    up to ``smallest_normal * u(dtype)``, twice, for each of ``n_k`` terms. So::

        |sum_j P_ij - 1|  <=  2 u(dtype) + (ACCUMULATOR_ULPS + n_k) u(float32)
                              + 2 n_k smallest_normal(dtype) u(dtype)

    This is a worst case, not a typical one; it bounds the row sums of every kernel in the suite
    with no factor fitted to any of them.
    """
    u = UNIT_ROUNDOFF[dtype]
    # A probability below the dtype's smallest normal (fp16: 6e-5) is rounded to a subnormal,
    # an absolute error of up to smallest_normal * u each time, for each of n_k terms.
    underflow = 2 * n_k * torch.finfo(dtype).smallest_normal * u
    return 2 * u + (ACCUMULATOR_ULPS + n_k) * UNIT_ROUNDOFF[torch.float32] + underflow


def assert_within_bound(
    name: str,
    actual: torch.Tensor,
    expected: torch.Tensor,
    bound: float,
    how: str,
    *,
    context: str,
    axes: tuple[str, ...] = ("row", "col"),
) -> None:
    """Raise ``AssertionError`` unless ``|actual - expected| <= bound`` everywhere ``expected`` is finite.

    For checks whose bound is not "factor x reference error + floor" (a row sum, or two kernel
    results that each carry their own error); ``how`` says how ``bound`` was made, for the message.
    """
    if actual.shape != expected.shape:
        raise AssertionError(
            f"{name}: {context}: shape {tuple(actual.shape)}, expected {tuple(expected.shape)}"
        )
    shape = tuple(expected.shape)
    actual, expected = saturated(actual, expected, margin=bound)
    assert_finite_where_expected(name, actual, expected, context=context, axes=axes)
    err = (actual.double() - expected.double()).abs()
    err = torch.where(torch.isfinite(expected), err, torch.zeros_like(err))
    worst = int(err.reshape(-1).argmax())
    worst_err = float(err.reshape(-1)[worst])
    if not worst_err <= bound:
        raise AssertionError(
            f"{name}: {context}: error {worst_err:.3e} exceeds bound {bound:.3e} "
            f"at {_index(worst, shape, axes)} (got {actual.reshape(-1)[worst].item():.6g}, "
            f"expected {expected.reshape(-1)[worst].item():.6g}); {int((err > bound).sum())} of "
            f"{err.numel()} elements over; bound = {how}"
        )


def assert_bit_equal(
    name: str,
    actual: torch.Tensor,
    expected: torch.Tensor,
    *,
    context: str,
    axes: tuple[str, ...] = ("row", "col"),
) -> None:
    """Raise ``AssertionError`` unless ``torch.equal(actual, expected)``: an exact property, no bound.

    NaN is unequal to itself here, as in ``torch.equal``; the message names the first element that
    differs and how many do.
    """
    if actual.shape != expected.shape or actual.dtype != expected.dtype:
        raise AssertionError(
            f"{name}: {context}: got shape {tuple(actual.shape)} {actual.dtype}, expected "
            f"{tuple(expected.shape)} {expected.dtype} (bound: bit-for-bit equality)"
        )
    if torch.equal(actual, expected):
        return
    differ = (actual != expected).reshape(-1)
    first = int(differ.nonzero()[0])
    raise AssertionError(
        f"{name}: {context}: {int(differ.sum())} of {differ.numel()} elements differ; first at "
        f"{_index(first, tuple(expected.shape), axes)}: got {actual.reshape(-1)[first].item()!r}, "
        f"expected {expected.reshape(-1)[first].item()!r} (bound: bit-for-bit equality, torch.equal)"
    )


def two_sided_bound(bound_left: float, bound_right: float, *, coefficient: float = 1.0) -> float:
    """Bound on ``|K(x') - (a K(x) + b)|`` when an identity ``A(x') = a A(x) + b`` holds exactly.

    Both sides are kernel results, each within its own error-model bound of the exact attention
    (``bound_left`` for ``K(x')``, ``bound_right`` for ``K(x)``), so by the triangle inequality their
    difference is at most ``bound_left + |a| bound_right``. This holds only where the transformed
    input ``x'`` is exactly representable in the dtype; the checks build it so (see
    :func:`exact_grid_spacing`), and never add a rounding allowance instead.
    """
    return bound_left + abs(coefficient) * bound_right


def exact_grid_spacing(dtype: torch.dtype, limit: float) -> float:
    """A spacing ``g`` such that every multiple of ``g`` with magnitude ``<= limit`` is exact in ``dtype``.

    With ``limit <= 2^e``, the dtype's numbers in ``[2^(e-1), 2^e]`` are spaced ``2^e u(dtype)``,
    and every smaller magnitude has a finer spacing, so ``g = 2^e u(dtype)``. Values rounded to
    this grid can be added, negated and doubled (within ``limit``) without any rounding.
    """
    e = math.ceil(math.log2(limit)) if limit > 0 else 0
    # Below the smallest normal number the spacing stops shrinking: subnormals are spaced 2 u tiny.
    return max(2.0**e * UNIT_ROUNDOFF[dtype], 2 * UNIT_ROUNDOFF[dtype] * torch.finfo(dtype).smallest_normal)


def score_magnitude(q: torch.Tensor, k: torch.Tensor, *, scale: float | None = None) -> float:
    """``S = |scale| max_ij sum_c |q_ic| |k_jc|``: the size every score's rounding is relative to.

    A score is a dot product, and its rounding is relative to the sum of the absolute products,
    not to the score itself: when q is nearly orthogonal to k the score is small by cancellation and
    its error is not. ``S`` bounds every ``|score|`` too. Computed in float64 over all pairs
    (``n_q x n_k`` per leading index, as the oracle is).
    ``scale`` is the softmax scale (``None``: ``1 / sqrt(d)``); k may have fewer heads than q
    (grouped-query attention).
    """
    with torch.no_grad():
        sums = torch.matmul(q.double().abs(), expand_kv(q, k).double().abs().transpose(-2, -1))
    return float(sums.max()) * scale_size(q, scale) if sums.numel() else 0.0


def output_scales(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, scale: float | None = None
) -> dict[str, float]:
    """``magnitude`` and ``scores`` for a bound on an attention output (see the module docstring)."""
    return {"magnitude": float(v.abs().max()), "scores": score_magnitude(q, k, scale=scale),
            "terms": k.shape[-2]}


def lse_scales(
    q: torch.Tensor, k: torch.Tensor, lse_oracle: torch.Tensor, *, scale: float | None = None
) -> dict[str, float]:
    """``magnitude`` and ``scores`` for a bound on an lse: an absolute floor (magnitude 1) that grows
    with :func:`score_magnitude`, or with ``max |lse|`` where that is larger (over the rows that see
    a key: the others' lse is ``-inf``, exactly)."""
    finite = lse_oracle[torch.isfinite(lse_oracle)]
    top = float(finite.abs().max()) if finite.numel() else 0.0
    return {"magnitude": 1.0, "scores": max(score_magnitude(q, k, scale=scale), top), "terms": k.shape[-2]}
