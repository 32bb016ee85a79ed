"""Where the output may lie, what degenerate keys give, and what huge scores must not break.

- convex hull: ``o_i = sum_j P_ij v_j`` with ``P_ij >= 0`` summing to 1, so each output element lies
  between the smallest and largest value of its column over the keys row ``i`` sees;
- a single visible key gets all the weight: ``o_i = v_j``, within the error model (not bit-for-bit:
  see :func:`check_single_key`);
- identical keys get equal weights: ``o_i`` is the mean of the values row ``i`` sees;
- large logits: a kernel that subtracts the running max never exponentiates a positive number,
  so scores of 1e4 must give no NaN or inf and still meet the error model;
- extreme scores (1e10, 1e30): a forward still without NaN or inf, and its lse still accurate.
"""

from __future__ import annotations

import math
from types import ModuleType

import torch

from oracle.dense import dense_attention, dense_scores, expand_kv
from properties import _common
from properties import error_model as em
from properties.case import Case
from properties.kernels import default_device, gated


@gated
def check_convex_hull(kernel: ModuleType, case: Case, device=None) -> None:
    """Every ``o[i, c]`` lies in ``[min_j v[j, c], max_j v[j, c]]`` over visible keys ``j``, widened by
    ``probability_sum_bound x max |v|`` (rows of recovered weights may sum to 1 +- that bound); a row
    that sees no key is 0 (its hull is taken as ``[0, 0]``)."""
    q, k, v = case.make_qkv(device or default_device())
    ctx = _common.context("check_convex_hull", kernel, case)
    o, _ = _common.forward(kernel, q, k, v, case.is_causal, **case.features())
    _assert_in_hull(o, q, v, case, ctx)


def _assert_in_hull(o, q, v, case: Case, ctx: str) -> None:
    """:func:`check_convex_hull`'s comparison of one call's ``o``; NaN and inf fail it."""
    v64 = expand_kv(q, v).double()
    lo, hi = _visible_extremes(v64, _common.visible(case, v.device))
    slack = em.probability_sum_bound(q.dtype, case.n_k) * float(v.abs().max())
    o64 = o.double()
    # Distance outside [lo, hi] (0 inside), compared with the slack; NaN stays NaN and fails (and
    # an infinite o is infinitely far outside).
    outside = torch.maximum(lo - o64, o64 - hi).clamp(min=0).where(~o64.isnan(), o64)
    em.assert_within_bound(
        "output lies in the convex hull of the visible values", outside, torch.zeros_like(outside),
        slack, f"probability_sum_bound x max|v| = {slack:.3e}", context=ctx,
    )


def _visible_extremes(v: torch.Tensor, seen: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per row ``i`` and column ``c``, the min and max of ``v[..., j, c]`` over the keys ``j`` that
    ``seen[i]`` marks (``[..., n_q, d]`` each; 0 for a row that sees no key).

    Rows are taken in chunks so that the ``[..., rows, n_k, d]`` intermediate stays near 2^25
    elements (a 4k x 4k GPU case would otherwise need gigabytes).
    """
    chunk = max(1, 2**25 // max(1, v.numel()))  # each row's intermediate has v's size
    inf = torch.tensor(float("inf"), dtype=v.dtype, device=v.device)
    los, his = [], []
    for start in range(0, seen.shape[0], chunk):
        mask = seen[start : start + chunk, :, None]  # [rows, n_k, 1]
        vals = v.unsqueeze(-3)  # [..., 1, n_k, d]
        lo = torch.where(mask, vals, inf).amin(-2)
        hi = torch.where(mask, vals, -inf).amax(-2)
        empty = ~mask.any(-2)  # [rows, 1]
        los.append(lo.masked_fill(empty, 0.0))
        his.append(hi.masked_fill(empty, 0.0))
    return torch.cat(los, -2), torch.cat(his, -2)


@gated
def check_single_key(kernel: ModuleType, case: Case, device=None) -> None:
    """With one key, every row that sees it returns that key's value row, and its lse is that key's
    (scaled, capped) score; a row that does not see it (a window, or bottom-right alignment with
    ``n_q > 1``) returns 0 and an lse of ``-inf``.

    Within the error model, not bit-for-bit: ``exp(0) / 1`` is exact in our kernel, but a kernel that
    computes ``exp2(s * c - m * c)`` with a fused multiply-add (as CUDA flash kernels do) gets a weight
    of 1 +- 1 ulp, and is right. SDPA's float32 backend on an H200 returned such 1-ulp outputs. The
    same-dtype dense reference is exact here, so the bound is the error model's floor: a few units in
    the last place, far below what a real bug (a padding key in the softmax, a lost normalizer) gives.
    """
    device = device or default_device()
    case = _common.transformed(kernel, case, device, n_k=1)
    q, k, v = case.make_qkv(device)
    f = case.features()
    ctx = _common.context("check_single_key", kernel, case)
    o, lse = _common.forward(kernel, q, k, v, case.is_causal, **f)
    sees = _common.visible(case, o.device)[:, 0]
    with torch.no_grad():
        o_ref, _ = dense_attention(q, k, v, case.is_causal, compute_dtype=None, **f)
    want = (expand_kv(q, v).double() * sees[:, None]).expand(o.shape)
    em.assert_within_error_model(
        em.Quantity("a single key returns its value row", em.OUTPUT.factor), o, want, o_ref,
        dtype=q.dtype, **em.output_scales(q, k, v, scale=case.softmax_scale), context=ctx,
    )
    if lse is not None:
        s = dense_scores(q.double(), k.double(), case.is_causal, **f)[..., 0]
        b, how = _common.lse_bound(q, k, case.is_causal, **f)
        em.assert_within_bound("the lse of a single key is its score", lse, s, b, how, context=ctx,
                               axes=("row",))


@gated
def check_identical_keys(kernel: ModuleType, case: Case, device=None) -> None:
    """With every key equal to the first, each row is the mean of the values it sees (0 if it sees
    none); the float64 mean is the oracle, the same-dtype dense reference sets the error-model bound.
    Softcap and scale change nothing here: equal scores stay equal."""
    device = device or default_device()
    q, k, v = case.make_qkv(device)
    k = _common.place(k[..., :1, :].expand(k.shape).cpu(), case, device, "k")
    f = case.features()
    ctx = _common.context("check_identical_keys", kernel, case)
    o, _ = _common.forward(kernel, q, k, v, case.is_causal, **f)
    seen = _common.visible(case, v.device).double()  # [n_q, n_k]
    counts = seen.sum(-1, keepdim=True).clamp(min=1)
    mean = torch.matmul(seen / counts, expand_kv(q, v).double())
    with torch.no_grad():
        o_ref, _ = dense_attention(q, k, v, case.is_causal, compute_dtype=None, **f)
    em.assert_within_error_model(
        em.Quantity("identical keys give the mean of the values", em.OUTPUT.factor), o,
        mean.expand(o.shape), o_ref, dtype=q.dtype, **em.output_scales(q, k, v, scale=case.softmax_scale),
        context=ctx,
    )


LARGE_SCORE = 1e4
"""Target largest |score| for float32 and bfloat16 (whose exponent range is float32's)."""


def large_score(dtype: torch.dtype) -> float:
    """1e4, or for float16 ``max / 64`` (about 1e3): the scaled q must stay well inside the dtype,
    and the same-dtype reference's scores must not overflow before its softmax."""
    return min(LARGE_SCORE, torch.finfo(dtype).max / 64)


@gated
def check_large_logits_stable(kernel: ModuleType, case: Case, device=None) -> None:
    """q scaled so that scores reach toward :func:`large_score` (k too, if q alone would leave the
    dtype): no NaN or inf, and o (and lse) within the error model."""
    device = device or default_device()
    q, k, v = case.make_qkv("cpu")
    # The size of the scores' rounding (em.score_magnitude), not the largest score, is set to the
    # target: scaling up a score that is small only by cancellation (q nearly orthogonal to k)
    # would amplify the dot product's rounding, an ill-conditioning no kernel can avoid. Scores
    # then reach a good fraction of the target (about a third for normal data). The dot products
    # q.k themselves (before the softmax scale) must stay inside the dtype too: with a tiny softmax
    # scale, reaching the target would overflow them, which no kernel can help.
    dots = em.score_magnitude(q, k, scale=1.0)  # one n_q x n_k product: the scaled size is a multiple
    size = dots * em.scale_size(q, case.softmax_scale)
    room = torch.finfo(q.dtype).max / 4
    f_q = f_k = 1.0  # a zero size (scale 0, q or k all zero, no rows): no factor moves the scores
    if size > 0:
        factor = min(large_score(q.dtype) / size, room / dots)
        # Scale q, and k for what q cannot take, keeping both a factor 4 inside the dtype's range.
        f_q = min(factor, room / float(q.abs().max()))
        f_k = min(factor / f_q, room / float(k.abs().max()))
    q = (q.double() * f_q).to(q.dtype)
    k = (k.double() * f_k).to(k.dtype)
    target = large_score(q.dtype)
    ctx = (_common.context("check_large_logits_stable", kernel, case) + f" with q scaled by {f_q:.4g} "
           f"and k by {f_k:.4g} (|scores| <= {target:g}: scale sum |q||k| <= that)")
    q, k = _common.place(q, case, device, "q"), _common.place(k, case, device, "k")
    v = case.make_qkv(device)[2]
    f = case.features()
    o, lse = _common.forward(kernel, q, k, v, case.is_causal, **f)
    # The error model's floor grows with em.score_magnitude: at scores of 1e4 the scores' own
    # rounding, not the dtype of the output, sets what a correct kernel can do.
    _common.assert_forward_matches_oracle(o, lse, q, k, v, case.is_causal, ctx, **f)


EXTREME_SCORES = (1e10, 1e30)
"""Largest |scaled score| :func:`check_extreme_scores_finite` drives float32 and bfloat16 calls to:
past ``1.5e9``, where exp2 of a fused ``s * scale - m`` overflows (docs/findings.md, finding 20),
and near float32's top, with a factor of about ``2^28`` left for a kernel's change of base."""


@gated
def check_extreme_scores_finite(kernel: ModuleType, case: Case, device=None) -> None:
    """q and k scaled alike (:func:`extreme_inputs`) so that the largest |scaled score| reaches each
    of :data:`EXTREME_SCORES`: ``o`` finite and in the convex hull of the visible values (as
    :func:`check_convex_hull`; nearer than that no kernel can be held, as the scores' own rounding
    then spans many units) and ``lse`` within the error model (a row's largest score to a few
    float32 units of its size). The forward only: the contract promises no gradient at such scores
    (``properties/kernels.py``). A float16 case runs as float32 (same shapes, layout and seed):
    float16 scores stop near :func:`large_score`'s 1e3, where :func:`check_large_logits_stable`
    holds them.
    """
    device = device or default_device()
    if case.dtype == "float16":
        case = _common.transformed(kernel, case, device, dtype="float32")
    f = case.features()
    for target in EXTREME_SCORES:
        q, k, v, how = extreme_inputs(case, target, device)
        ctx = _common.context("check_extreme_scores_finite", kernel, case) + f" with {how}"
        o, lse = _common.forward(kernel, q, k, v, case.is_causal, **f)
        _assert_in_hull(o, q, v, case, ctx)
        if lse is not None:
            _common.assert_lse_matches_oracle(lse, q, k, v, case.is_causal, ctx, **f)


def extreme_inputs(case: Case, target: float, device) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, str]:
    """``(q, k, v, how)``: the case's inputs on ``device``, q and k scaled alike so that the largest
    |scaled score| (before any softcap) is about ``target``, each kept a factor 4 inside its dtype;
    ``how`` says by what, for a message.

    Alike, so that neither ends near the dtype's top: a q there overflows even a correct backward's
    ``dk = scale dS^T q``, whose exact value is about 0 but whose rounding is not (``dS = 0`` for a
    single key). Scores that cannot move (scale 0, q or k all zero) stay as they are."""
    q0, k0, v0 = case.make_qkv("cpu")
    scores = dense_scores(q0.double(), k0.double(), False, scale=case.features().get("scale"))
    peak = float(scores.abs().max()) if scores.numel() else 0.0
    f_q = f_k = 1.0
    if peak > 0:
        room = torch.finfo(q0.dtype).max / 4
        top_q, top_k = float(q0.abs().max()), float(k0.abs().max())
        f_q = min(math.sqrt(target / peak * top_k / top_q), room / top_q)
        f_k = min(target / peak / f_q, room / top_k)
    q = _common.place((q0.double() * f_q).to(q0.dtype), case, device, "q")
    k = _common.place((k0.double() * f_k).to(k0.dtype), case, device, "k")
    v = _common.place(v0, case, device, "v")
    return q, k, v, f"q scaled by {f_q:.4g} and k by {f_k:.4g} (largest |score| about {target:g})"
