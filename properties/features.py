"""Invariants of the contract's features: grouped-query heads, windows, alignment, softcap, scale.

Each check needs a feature (``FEATURES`` in ``properties/kernels.py``) and is :class:`NotApplicable`
for a module that does not declare it; a case that does not use the feature is given it (as the
causal checks make a case causal), so every case of a grid or a fuzzer tests it. Which identities
are exact and which are within the error model, and why:

- GQA: a grouped call reads the same kv head for every query head of a group, so it equals the call
  with k and v repeated per group: bit for bit for a ``BATCH_INVARIANT`` module (each head is
  computed on its own), else within the two-sided error model. Gradients: ``dk`` and ``dv`` of a
  grouped call sum over the group, in an order of the kernel's own, so they are compared with the
  repeated call's summed over the group within the error model.
- Window extremes and alignment on square problems: the contract says masks are exact, and these
  are the same masks written two ways, so bit for bit (outputs, lse and gradients).
- Rows that see no key: exactly ``o = 0``, ``lse = -inf``, zero gradients, and no NaN anywhere.
- Softcap: every capped score lies in ``(-c, c)``, so within a row every probability is at least
  ``exp(-2c)`` times the row's largest (up to rounding, :func:`softcap_ratio_bound`); and as ``c``
  grows the capped call tends to the uncapped one (within both calls' bounds and the cap's own
  effect, ``|s - c tanh(s / c)| <= |s|^3 / (3 c^2)``).
- Scale: ``scale s`` on ``q`` equals ``scale s / r`` on ``r q`` for a power of two ``r`` (exact in
  every dtype), within the two-sided error model; the default scale equals ``1 / sqrt(d)`` passed
  explicitly, likewise.
"""

from __future__ import annotations

import math
from types import ModuleType

import torch

from oracle.dense import expand_kv
from properties import _common
from properties import error_model as em
from properties.case import Case
from properties.kernels import NotApplicable, default_device, features, gated
from properties.softmax import recover_probabilities


def _grads(kernel: ModuleType, case: Case, q, k, v, do, **features) -> list[torch.Tensor]:
    leaves = [t.detach().requires_grad_() for t in (q, k, v)]
    o = kernel.attention(*leaves, case.is_causal, **features)
    return list(torch.autograd.grad(o, leaves, do))


def _run(kernel: ModuleType, case: Case, q, k, v, do, **features) -> dict[str, torch.Tensor | None]:
    """``o, lse, dq, dk, dv`` of one call (``lse`` None for a module without ``attention_with_lse``)."""
    o, lse = _common.forward(kernel, q, k, v, case.is_causal, **features)
    dq, dk, dv = _grads(kernel, case, q, k, v, do, **features)
    return {"o": o, "lse": lse, "dq": dq, "dk": dk, "dv": dv}


def bits_by_row_col(ctx: str):
    """The default ``compare`` of :func:`_assert_same_bits`: bit equality, a dense element named by
    (row, col), an lse element by row."""
    def compare(label: str, key: str, got: torch.Tensor, want: torch.Tensor) -> None:
        em.assert_bit_equal(label, got, want, context=ctx, axes=("row",) if key == "lse" else ("row", "col"))
    return compare


def _assert_same_bits(name: str, got: dict, want: dict, ctx: str, again=None, compare=None) -> None:
    """Bit-for-bit ``got == want``. On a difference, ``again()`` (the call that made ``want``, made
    once more) tells a mask that differs from a kernel that is not deterministic (the contract
    requires both; the message says which it is). ``compare(label, key, got, want)`` raises where
    one result differs; the default names a dense element by (row, col), packed checks pass one
    that names it by sequence (:mod:`properties.varlen`)."""
    compare = compare or bits_by_row_col(ctx)
    try:
        for key, value in want.items():
            if value is not None:
                compare(f"{name}, {key}", key, got[key], value)
    except AssertionError as error:
        if again is None:
            raise
        rerun = again()
        unstable = [key for key, value in want.items()
                    if value is not None and not torch.equal(rerun[key], value)]
        why = (f"; the same call repeated differs too (in {', '.join(unstable)}): the kernel is not "
               "deterministic on this case (check_deterministic), so this says nothing of its masks"
               if unstable else "; the same call repeated gives the same bits: the two calls differ")
        raise AssertionError(f"{error}{why}") from None


@gated
def check_gqa_matches_repeated_kv(kernel: ModuleType, case: Case, device=None) -> None:
    """A grouped-query call equals the call with k and v repeated per group (``repeat_interleave``):
    outputs and lse bit for bit for a ``BATCH_INVARIANT`` module, else within the two-sided error
    model; ``dq`` likewise, and ``dk``, ``dv`` equal the repeated call's summed over each group,
    within the error model. A case without grouped heads is given 4 query heads (or its own number,
    if a multiple of 4) on half as many kv heads: at least two kv heads, so that a wrong kv head for
    a query head shows."""
    device = device or default_device()
    if "gqa" not in case.needs():
        heads = case.leading[-1] if case.leading and case.leading[-1] % 4 == 0 else 4
        case = _common.transformed(kernel, case, device, leading=(*case.leading[:-1], heads),
                                   kv_heads=heads // 2)
    ctx = _common.context("check_gqa_matches_repeated_kv", kernel, case)
    f = case.features()
    q, k, v = case.make_qkv(device)
    do = case.make_grad_out(device)
    k2, v2 = expand_kv(q, k), expand_kv(q, v)
    grouped, repeated = _run(kernel, case, q, k, v, do, **f), _run(kernel, case, q, k2, v2, do, **f)
    group = case.leading[-1] // case.kv_heads
    for key in ("dk", "dv"):  # the repeated call's kv gradients, summed over each group
        # in float64: a float16 sum of the group's gradients can overflow where the exact sum does
        # not, and its roundings are not in the bound below. Where one head's gradient is itself
        # past the dtype's range (stored as an infinity, as it should be), the repeated call does
        # not tell the group's sum, which may be in range: no claim there (NaN is compared with
        # nothing); check_gradients_match_oracle holds those elements to the oracle. Both were
        # false alarms of the CPU report of 2026-12-01 (float16, `large` values), on flash too.
        g = repeated[key].double().unflatten(-3, (case.kv_heads, group))
        repeated[key] = g.sum(-3).masked_fill(~torch.isfinite(g).all(-3), math.nan)
    # One oracle forward and backward per call for the bounds of its o and its gradients.
    output_g, bounds_g = _common.output_and_gradient_bounds(q, k, v, do, case.is_causal, **f)
    output_r, bounds_r = _common.output_and_gradient_bounds(q, k2, v2, do, case.is_causal, **f)
    if getattr(kernel, "BATCH_INVARIANT", False):
        _assert_same_bits("grouped heads = k, v repeated per group", grouped,
                          {"o": repeated["o"], "lse": repeated["lse"]}, ctx)
    else:
        (b_g, how), (b_r, _) = output_g, output_r
        em.assert_within_bound("grouped heads = k, v repeated per group, o", grouped["o"], repeated["o"],
                               em.two_sided_bound(b_g, b_r), f"bound of each call; each = {how}",
                               context=ctx)
        if grouped["lse"] is not None:
            b_g, how = _common.lse_bound(q, k, case.is_causal, **f)
            b_r, _ = _common.lse_bound(q, k2, case.is_causal, **f)
            em.assert_within_bound("grouped heads = k, v repeated per group, lse", grouped["lse"],
                                   repeated["lse"], em.two_sided_bound(b_g, b_r),
                                   f"lse bound of each call; each = {how}", context=ctx, axes=("row",))
    for key, (b_g, how), (b_r, _), terms in zip(("dq", "dk", "dv"), bounds_g, bounds_r, (1, group, group)):
        # A kv head's gradient in the repeated call is a sum of `group` heads' gradients, each
        # within the repeated call's bound of the exact value; the exact sum is the grouped call's.
        em.assert_within_bound(f"grouped heads = k, v repeated per group, {key}", grouped[key],
                               repeated[key], em.two_sided_bound(b_g, b_r, coefficient=terms),
                               f"grouped call's {key} bound + {terms} x the repeated call's; grouped = {how}",
                               context=ctx)


@gated
def check_window_extremes_exact(kernel: ModuleType, case: Case, device=None) -> None:
    """``window=(-1, -1)`` is no window, and ``window=(-1, 0)`` without ``is_causal`` is
    ``is_causal=True`` with no window: outputs, lse and gradients bit for bit (the contract's masks
    are exact; these are the same mask written two ways)."""
    device = device or default_device()
    plain = _common.transformed(kernel, case, device, window=(-1, -1)).replace(window=None)
    ctx = _common.context("check_window_extremes_exact", kernel, case)
    q, k, v = plain.make_qkv(device)
    do = plain.make_grad_out(device)
    f = plain.features()
    want = _run(kernel, plain, q, k, v, do, **f)
    got = _run(kernel, plain, q, k, v, do, **f, window=(-1, -1))
    _assert_same_bits("window=(-1, -1) = no window", got, want, ctx,
                      again=lambda: _run(kernel, plain, q, k, v, do, **f))
    causal, open_ = plain.replace(is_causal=True), plain.replace(is_causal=False)
    want = _run(kernel, causal, q, k, v, do, **f)
    got = _run(kernel, open_, q, k, v, do, **f, window=(-1, 0))
    _assert_same_bits("window=(-1, 0) = is_causal", got, want, ctx,
                      again=lambda: _run(kernel, causal, q, k, v, do, **f))


@gated
def check_bottom_right_square_exact(kernel: ModuleType, case: Case, device=None) -> None:
    """With ``n_q == n_k``, ``causal_alignment="bottom_right"`` is ``"top_left"`` bit for bit (the same
    mask): outputs, lse and gradients, run causal (and with the case's window, if any)."""
    device = device or default_device()
    n = max(case.n_q, case.n_k)
    square = _common.transformed(kernel, case, device, n_q=n, n_k=n, is_causal=True,
                                 causal_alignment="bottom_right")
    ctx = _common.context("check_bottom_right_square_exact", kernel, square)
    top = square.replace(causal_alignment="top_left")
    q, k, v = square.make_qkv(device)
    do = square.make_grad_out(device)
    _assert_same_bits("bottom-right = top-left when n_q == n_k",
                      _run(kernel, square, q, k, v, do, **square.features()),
                      _run(kernel, top, q, k, v, do, **top.features()), ctx,
                      again=lambda: _run(kernel, top, q, k, v, do, **top.features()))


def with_empty_rows(kernel: ModuleType, case: Case, device) -> Case:
    """``case`` if some of its rows see no key, else a case built from it in which some do: bottom-right
    causal with ``n_q > n_k`` (the first ``n_q - n_k`` rows see nothing) where the module declares
    it, else a window ``(2, 1)``, top-left, with ``n_q >= n_k + 4`` (rows past ``n_k + 1`` see
    nothing)."""
    if not bool(_common.visible(case, "cpu").any(-1).all()):
        return case
    n_q = max(case.n_q, case.n_k + 4)
    if "bottom_right" in features(kernel):
        return _common.transformed(kernel, case, device, n_q=n_q, is_causal=True,
                                   causal_alignment="bottom_right", window=None)
    return _common.transformed(kernel, case, device, n_q=n_q, window=(2, 1), causal_alignment="top_left")


@gated
def check_empty_rows(kernel: ModuleType, case: Case, device=None) -> None:
    """A row that sees no key has ``o = 0`` and ``lse = -inf`` exactly, gets ``dq = 0`` exactly, and
    sends no gradient back (an upstream gradient on those rows alone gives ``dk = dv = 0``); no
    value anywhere is NaN. Needs ``"bottom_right"`` or ``"window"`` (:func:`with_empty_rows`)."""
    device = device or default_device()
    if not {"bottom_right", "window"} & features(kernel):
        raise NotApplicable("rows that see no key need a window or bottom-right alignment, and the "
                            "module declares neither (FEATURES)")
    case = with_empty_rows(kernel, case, device)
    ctx = _common.context("check_empty_rows", kernel, case)
    empty = ~_common.visible(case, device).any(-1)  # [n_q]
    q, k, v = case.make_qkv(device)
    f = case.features()
    do = case.make_grad_out("cpu").clone()
    got = _run(kernel, case, q, k, v, _common.place(do, case, device, "do"), **f)
    for key, value in got.items():
        if value is not None and bool(value.isnan().any()):
            em.assert_bit_equal(f"no NaN in {key}", value.isnan(), torch.zeros_like(value.isnan()),
                                context=ctx, axes=("row",) if key == "lse" else ("row", "col"))
    note = f" ({int(empty.sum())} rows see no key)"
    for key in ("o", "dq"):
        rows = got[key].masked_fill(~empty[:, None], 0)
        em.assert_bit_equal(f"{key} of a row that sees no key is 0" + note, rows, torch.zeros_like(rows),
                            context=ctx)
    if got["lse"] is not None:
        lse = got["lse"].masked_fill(~empty, -math.inf)
        em.assert_bit_equal("lse of a row that sees no key is -inf" + note, lse,
                            torch.full_like(lse, -math.inf), context=ctx, axes=("row",))
    do[..., ~empty.cpu(), :] = 0
    _, dk, dv = _grads(kernel, case, q, k, v, _common.place(do, case, device, "do"), **f)
    for key, g in (("dk", dk), ("dv", dv)):
        em.assert_bit_equal(f"{key} is 0 when only rows that see no key have an upstream gradient" + note,
                            g, torch.zeros_like(g), context=ctx, axes=("key", "col"))


def softcap_ratio_bound(dtype: torch.dtype, softcap: float) -> tuple[float, float]:
    """``(relative, absolute)`` slack of ``P_ij >= exp(-2c) max_j P_ij`` on recovered probabilities.

    Each recovered probability went through two roundings to the dtype (see
    :func:`~properties.error_model.probability_sum_bound`), ``2 u`` relative on either side, hence
    ``4 u``; the capped scores are float32 numbers of size up to ``c``, and ``exp`` adds ulps:
    :data:`~properties.error_model.ACCUMULATOR_ULPS` of float32 times ``1 + 2c``. A probability
    below the dtype's smallest normal number is rounded absolutely, by up to that number (twice).
    """
    u = em.UNIT_ROUNDOFF[dtype]
    relative = 4 * u + em.ACCUMULATOR_ULPS * em.UNIT_ROUNDOFF[torch.float32] * (1 + 2 * softcap)
    return relative, 2 * torch.finfo(dtype).smallest_normal


SOFTCAP_BITE = 2.0
"""A case without a softcap is given ``c = SOFTCAP_BITE``: scores of unit-scale data reach several
units, so a cap of 2 changes most of them."""

SOFTCAP_LARGE = 1e3
"""For the limit, ``c = SOFTCAP_LARGE x`` the scores' size: the cap then moves no score by more than
``|s| / (3 x 10^6)``."""


@gated
def check_softcap(kernel: ModuleType, case: Case, device=None) -> None:
    """With ``softcap=c``, every visible probability of a row is at least ``exp(-2c)`` times the row's
    largest (capped scores lie in ``(-c, c)``); and with ``c`` a thousand times the scores' size, the
    capped output is the uncapped one, within both calls' bounds and the cap's own effect."""
    device = device or default_device()
    if not case.softcap:
        case = _common.transformed(kernel, case, device, softcap=SOFTCAP_BITE)
    ctx = _common.context("check_softcap", kernel, case)
    q, k, v = case.make_qkv(device)
    c = case.softcap
    p = recover_probabilities(kernel, q, k, case.is_causal, case)
    seen = _common.visible(case, p.device)
    top = p.amax(-1, keepdim=True)
    relative, absolute = softcap_ratio_bound(q.dtype, c)
    floor = top * math.exp(-2 * c) * (1 - relative) - absolute
    short = (floor - p).clamp(min=0).masked_fill(~seen, 0.0)
    em.assert_within_bound(
        f"softcap {c:g}: visible probabilities >= exp(-2c) x the row's largest", short,
        torch.zeros_like(short), 0.0,
        f"exp(-2c) x max_j P_ij x (1 - {relative:.2e}) - {absolute:.2e} (softcap_ratio_bound)",
        context=ctx, axes=("row", "key"),
    )
    # The limit c -> infinity: the uncapped call.
    s_max = em.score_magnitude(q, k, scale=case.softmax_scale)
    large = max(SOFTCAP_LARGE * s_max, 1.0)
    shift = s_max**3 / (3 * large**2)  # the cap moves no score by more than this
    f = case.features()
    f_large, f_none = {**f, "softcap": large}, {key: x for key, x in f.items() if key != "softcap"}
    o_large, _ = _common.forward(kernel, q, k, v, case.is_causal, **f_large)
    o_none, _ = _common.forward(kernel, q, k, v, case.is_causal, **f_none)
    b_large, how = _common.output_bound(q, k, v, case.is_causal, **f_large)
    b_none, _ = _common.output_bound(q, k, v, case.is_causal, **f_none)
    effect = math.expm1(2 * shift) * float(v.abs().max())
    em.assert_within_bound(
        f"softcap {large:.3g} (1e3 x the scores' size) = no softcap", o_large, o_none,
        em.two_sided_bound(b_large, b_none) + effect,
        f"bound of each call + the cap's effect expm1(2 x {shift:.2e}) x max|v|; each = {how}", context=ctx,
    )


@gated
def check_scale_matches_prescaled_q(kernel: ModuleType, case: Case, device=None) -> None:
    """``scale=s`` on ``q`` equals ``scale=s / r`` on ``r q``, with ``r`` the power of two nearest
    ``s sqrt(d)`` (so ``r q`` is the pre-scaled q, exactly: multiplying by a power of two rounds
    nothing), within the two-sided error model; and ``scale=None`` equals ``scale=1/sqrt(d)``."""
    device = device or default_device()
    if case.softmax_scale is None:
        case = _common.transformed(kernel, case, device, softmax_scale=0.3)
    ctx = _common.context("check_scale_matches_prescaled_q", kernel, case)
    q, k, v = case.make_qkv("cpu")
    s, d = case.softmax_scale, case.head_dim
    # r > 0 whatever the sign of s (s / r keeps it); for s = 0 any r will do (both calls weigh every
    # visible key alike).
    r = 2.0 ** round(math.log2(abs(s) * math.sqrt(d))) if s else 2.0
    r = 2.0 if r == 1.0 else r
    q2 = q * r
    if not (bool(torch.isfinite(q2).all()) and torch.equal(q2 / r, q)):
        r = 1 / r  # q near the top (or bottom) of its dtype: pre-scale the other way
        q2 = q * r
    q, q2 = (_common.place(t, case, device, "q") for t in (q, q2))
    k, v = _common.place(k, case, device, "k"), _common.place(v, case, device, "v")
    f = case.features()
    for (qa, fa), (qb, fb), what in (
        ((q, f), (q2, {**f, "scale": s / r}), f"scale {s:g} on q = scale {s / r:g} on {r:g} q"),
        ((q, {**f, "scale": 1 / math.sqrt(d)}), (q, {key: x for key, x in f.items() if key != "scale"}),
         "scale 1/sqrt(d) = scale None"),
    ):
        o_a, _ = _common.forward(kernel, qa, k, v, case.is_causal, **fa)
        o_b, _ = _common.forward(kernel, qb, k, v, case.is_causal, **fb)
        b_a, how = _common.output_bound(qa, k, v, case.is_causal, **fa)
        b_b, _ = _common.output_bound(qb, k, v, case.is_causal, **fb)
        em.assert_within_bound(what, o_b, o_a, em.two_sided_bound(b_a, b_b),
                               f"bound of each call; each = {how}", context=ctx)
