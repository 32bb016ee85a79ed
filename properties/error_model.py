"""The one error model: how far from the float64 oracle a correct kernel may be.

The rule (flash-attention's and FlagAttention's suites use it): a kernel's worst error against the
float64 oracle may be at most ``factor`` times the worst error of a PyTorch reference computed
*in the kernel's own dtype* (:func:`oracle.dense.dense_attention` with ``compute_dtype=None``),
plus a floor:

    max |kernel - oracle|  <=  factor * max |reference - oracle|  +  floor
    floor = (u(dtype) + ACCUMULATOR_ULPS * u(float32)) * magnitude

Why each piece:

- ``max |reference - oracle|`` measures what the dtype alone costs on *these* inputs: longer rows,
  larger scores and wider head dims all raise it, so the bound follows the case instead of being a
  fixed ``atol`` that is loose for one shape and tight for another.
- ``factor`` (:data:`OUTPUT`, :data:`LSE`, :data:`GRADIENT`) is the slack for doing the same math in
  another order (tiles, online rescaling, ``exp2``). 2 for the forward, as flash-attention uses.
  Gradients have their own constant because a backward accumulates across tiles in an order of its
  own; it is 2 as well today, and any change must say here what measurement asked for it.
- the floor covers cases where the reference happens to be (nearly) exact, such as a single key,
  where any ``factor`` times zero would demand bit-exactness. ``u(dtype)`` is the unit roundoff of
  the output dtype (2^-11 fp16, 2^-8 bf16, 2^-24 fp32): storing a result costs that much, relative.
  The second term is the kernel's float32 arithmetic, which any dtype goes through: ``exp2`` on a
  GPU is an approximation good to about 2 ulp, the division by ``l`` and the base-2 rescaling add
  one each, so :data:`ACCUMULATOR_ULPS` = 8 ulp of float32 (about 5e-7, relative). On float32
  inputs that term is what lets a kernel be a few ulp worse than PyTorch's exact ``exp``; measured
  on an H100, float32 errors of the Triton kernel were up to 3.4x the reference's at ~1e-6.
- ``magnitude`` is the scale every error term is relative to, chosen by the caller: for the output,
  ``max |v|`` (the output is a convex combination of rows of v, so its errors scale with v); for the
  lse, ``max |lse| + 1`` (an absolute error e in the lse is a relative error e in every probability,
  hence the 1); for a gradient, the size of the terms it sums, which can be far larger than the
  gradient itself: ``dS = P * (dP - D)`` is a difference of two numbers of size ``|do_i| |v_j|``
  that cancel exactly when a row sees one key (then ``dq = dk = 0`` and any rounding is all error).
  :func:`gradient_magnitudes` gives ``scale |do| |v| max|k|`` for dq, ``scale |do| |v| max|q|`` for
  dk (``|x|`` the largest row 2-norm, bounding every dot product by Cauchy-Schwarz) and ``max|do|``
  for dv, each raised to the oracle gradient's own largest element where that is bigger.

The reference's error is measured only where the reference is finite: a same-dtype reference can
overflow (fp16 scores past 65504) where the kernel, accumulating in float32, must not.
Non-finite kernel values where the oracle is finite are always a failure, reported on their own.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

UNIT_ROUNDOFF: dict[torch.dtype, float] = {
    torch.float16: 2.0**-11,
    torch.bfloat16: 2.0**-8,
    torch.float32: 2.0**-24,
    torch.float64: 2.0**-53,
}
"""Unit roundoff u = 2^-p of each dtype (p = significand bits): the relative cost of one rounding."""

ACCUMULATOR_ULPS = 8.0
"""Ulps of float32 allowed for the kernel's own fp32 arithmetic (exp2, rescaling, division)."""


@dataclass(frozen=True)
class Quantity:
    """One compared quantity: its name and its factor over the same-dtype reference's error."""

    name: str
    factor: float


OUTPUT = Quantity("output o", 2.0)
LSE = Quantity("log-sum-exp", 2.0)
GRADIENT = Quantity("gradient", 2.0)


def gradient_magnitudes(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, do: torch.Tensor,
    oracle_grads: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
) -> tuple[float, float, float]:
    """Floor magnitudes for ``dq, dk, dv`` (see the module docstring for the reasoning)."""

    def row_norm(t: torch.Tensor) -> float:
        return float(t.double().norm(dim=-1).max())

    def elem(t: torch.Tensor) -> float:
        return float(t.double().abs().max())

    scale = q.shape[-1] ** -0.5
    dp = scale * row_norm(do) * row_norm(v)
    terms = (dp * elem(k), dp * elem(q), elem(do))
    return tuple(max(term, elem(g)) for term, g in zip(terms, oracle_grads))


def floor(dtype: torch.dtype, magnitude: float) -> float:
    """The error every correct kernel is allowed regardless of the reference (see module docstring)."""
    return (UNIT_ROUNDOFF[dtype] + ACCUMULATOR_ULPS * UNIT_ROUNDOFF[torch.float32]) * magnitude


def max_abs_error(x: torch.Tensor, oracle: torch.Tensor) -> float:
    """``max |x - oracle|`` in float64, over the positions where both are finite (0.0 if none)."""
    both = torch.isfinite(x) & torch.isfinite(oracle)
    if not bool(both.any()):
        return 0.0
    return float((x.double() - oracle.double()).abs()[both].max())


def error_bound(
    quantity: Quantity, reference: torch.Tensor, oracle: torch.Tensor, *, dtype: torch.dtype,
    magnitude: float,
) -> tuple[float, str]:
    """The bound for ``quantity`` and a one-line account of how it was made."""
    ref_err = max_abs_error(reference, oracle)
    fl = floor(dtype, magnitude)
    bound = quantity.factor * ref_err + fl
    how = (
        f"{quantity.factor:g} x reference error {ref_err:.3e} + floor {fl:.3e} "
        f"({str(dtype).removeprefix('torch.')}, magnitude {magnitude:.3g})"
    )
    return bound, how


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
    context: str,
    axes: tuple[str, ...] = ("row", "col"),
) -> None:
    """Raise ``AssertionError`` unless ``actual`` is within the error model of ``oracle``.

    Args:
        quantity: what is compared (its name and factor).
        actual: the kernel's result; ``oracle``: float64 oracle; ``reference``: same-dtype reference.
        dtype: the kernel's input dtype (whose roundoff sets the floor).
        magnitude: the scale of the floor (see module docstring).
        context: names the kernel and the case, for the message.
        axes: names of the trailing axes, for locating the worst element.
    """
    if actual.shape != oracle.shape:
        raise AssertionError(
            f"{quantity.name}: {context}: shape {tuple(actual.shape)}, expected {tuple(oracle.shape)}"
        )
    shape = tuple(oracle.shape)
    bad = ~torch.isfinite(actual) & torch.isfinite(oracle)
    if bool(bad.any()):
        first = int(bad.reshape(-1).nonzero()[0])
        raise AssertionError(
            f"{quantity.name}: {context}: {int(bad.sum())} non-finite values where the oracle is "
            f"finite; first at {_index(first, shape, axes)}: "
            f"got {actual.reshape(-1)[first].item()}, oracle {oracle.reshape(-1)[first].item():.6g}"
        )
    bound, how = error_bound(quantity, reference, oracle, dtype=dtype, magnitude=magnitude)
    err = (actual.double() - oracle.double()).abs()
    err = torch.where(torch.isfinite(oracle), err, torch.zeros_like(err))
    worst = int(err.reshape(-1).argmax())
    worst_err = float(err.reshape(-1)[worst])
    if not worst_err <= bound:
        n_over = int((err > bound).sum())
        raise AssertionError(
            f"{quantity.name}: {context}: error {worst_err:.3e} exceeds bound {bound:.3e} "
            f"at {_index(worst, shape, axes)} (got {actual.reshape(-1)[worst].item():.6g}, "
            f"oracle {oracle.reshape(-1)[worst].item():.6g}); {n_over} of {err.numel()} elements "
            f"over; bound = {how}"
        )
