"""Where the output may lie, what degenerate keys give, and what huge scores must not break.

- convex hull: ``o_i = sum_j P_ij v_j`` with ``P_ij >= 0`` summing to 1, so each output element lies
  between the smallest and largest value of its column over the keys row ``i`` sees;
- a single visible key gets all the weight: ``o_i = v_j``, within the error model (not bit-for-bit:
  see :func:`check_single_key`);
- identical keys get equal weights: ``o_i`` is the mean of the values row ``i`` sees;
- large logits: a kernel that subtracts the running max never exponentiates a positive number,
  so scores of 1e4 must give no NaN or inf and still meet the error model.
"""

from __future__ import annotations

from types import ModuleType

import torch

from oracle.dense import dense_attention, dense_scores
from properties import _common
from properties import error_model as em
from properties.case import Case
from properties.kernels import kernel_name
from properties.oracle_agreement import default_device


def check_convex_hull(kernel: ModuleType, case: Case, device=None) -> None:
    """Every ``o[i, c]`` lies in ``[min_j v[j, c], max_j v[j, c]]`` over visible keys ``j``, widened by
    ``probability_sum_bound x max |v|`` (rows of recovered weights may sum to 1 +- that bound)."""
    q, k, v = case.make_qkv(device or default_device())
    ctx = _common.context("check_convex_hull", kernel, case)
    o, _ = _common.forward(kernel, q, k, v, case.is_causal)
    v64 = v.double()
    if case.is_causal:
        # Row i sees keys 0..min(i, n_k - 1): running extremes along the keys, then one per row.
        lo, hi = v64.cummin(-2).values, v64.cummax(-2).values
        last = torch.arange(case.n_q, device=v.device).clamp(max=case.n_k - 1)
        lo, hi = lo[..., last, :], hi[..., last, :]
    else:
        lo = v64.amin(-2, keepdim=True).expand(o.shape)
        hi = v64.amax(-2, keepdim=True).expand(o.shape)
    slack = em.probability_sum_bound(q.dtype, case.n_k) * float(v.abs().max())
    o64 = o.double()
    # Distance outside [lo, hi] (0 inside), compared with the slack; NaN stays NaN and fails.
    outside = torch.maximum(lo - o64, o64 - hi).clamp(min=0).where(~o64.isnan(), o64)
    em.assert_within_bound(
        "output lies in the convex hull of the visible values", outside, torch.zeros_like(outside),
        slack, f"probability_sum_bound x max|v| = {slack:.3e}", context=ctx,
    )


def check_single_key(kernel: ModuleType, case: Case, device=None) -> None:
    """With one key, every row returns that key's value row, and its lse is that key's score.

    Within the error model, not bit-for-bit: ``exp(0) / 1`` is exact in our kernel, but a kernel that
    computes ``exp2(s * c - m * c)`` with a fused multiply-add (as CUDA flash kernels do) gets a weight
    of 1 +- 1 ulp, and is right. SDPA's float32 backend on an H200 returned such 1-ulp outputs. The
    same-dtype dense reference is exact here, so the bound is the error model's floor: a few units in
    the last place, far below what a real bug (a padding key in the softmax, a lost normalizer) gives.
    """
    case = case.replace(n_k=1)
    q, k, v = case.make_qkv(device or default_device())
    ctx = _common.context("check_single_key", kernel, case)
    o, lse = _common.forward(kernel, q, k, v, case.is_causal)
    with torch.no_grad():
        o_ref, _ = dense_attention(q, k, v, case.is_causal, compute_dtype=None)
    em.assert_within_error_model(
        em.Quantity("a single key returns its value row", em.OUTPUT.factor), o,
        v.double().expand(o.shape), o_ref, dtype=q.dtype, **em.output_scales(q, k, v), context=ctx,
    )
    if lse is not None:
        s = dense_scores(q.double(), k.double(), case.is_causal)[..., 0]
        b, how = _common.lse_bound(q, k, case.is_causal)
        em.assert_within_bound("the lse of a single key is its score", lse, s, b, how, context=ctx,
                               axes=("row",))


def check_identical_keys(kernel: ModuleType, case: Case, device=None) -> None:
    """With every key equal to the first, each row is the mean of the values it sees (the float64
    mean is the oracle; the same-dtype dense reference sets the error-model bound)."""
    device = device or default_device()
    q, k, v = case.make_qkv(device)
    k = _common.place(k[..., :1, :].expand(k.shape).cpu(), case, device, "k")
    ctx = _common.context("check_identical_keys", kernel, case)
    o, _ = _common.forward(kernel, q, k, v, case.is_causal)
    v64 = v.double()
    if case.is_causal:
        counts = torch.arange(1, case.n_k + 1, device=v.device, dtype=torch.float64)
        means = v64.cumsum(-2) / counts[:, None]
        mean = means[..., torch.arange(case.n_q, device=v.device).clamp(max=case.n_k - 1), :]
    else:
        mean = v64.mean(-2, keepdim=True).expand(o.shape)
    with torch.no_grad():
        o_ref, _ = dense_attention(q, k, v, case.is_causal, compute_dtype=None)
    em.assert_within_error_model(
        em.Quantity("identical keys give the mean of the values", em.OUTPUT.factor), o, mean, o_ref,
        dtype=q.dtype, **em.output_scales(q, k, v), context=ctx,
    )


LARGE_SCORE = 1e4
"""Target largest |score| for float32 and bfloat16 (whose exponent range is float32's)."""


def large_score(dtype: torch.dtype) -> float:
    """1e4, or for float16 ``max / 64`` (about 1e3): the scaled q must stay well inside the dtype,
    and the same-dtype reference's scores must not overflow before its softmax."""
    return min(LARGE_SCORE, torch.finfo(dtype).max / 64)


def check_large_logits_stable(kernel: ModuleType, case: Case, device=None) -> None:
    """q scaled so that scores reach toward :func:`large_score` (k too, if q alone would leave the
    dtype): no NaN or inf, and o (and lse) within the error model."""
    device = device or default_device()
    q, k, v = case.make_qkv("cpu")
    # The size of the scores' rounding (em.score_magnitude), not the largest score, is set to the
    # target: scaling
    # up a score that is small only by cancellation (q nearly orthogonal to k) would amplify the
    # dot product's rounding, an ill-conditioning no kernel can avoid. Scores then reach a good
    # fraction of the target (about a third for normal data).
    factor = large_score(q.dtype) / max(em.score_magnitude(q, k), 1e-30)
    # Scale q, and k for what q cannot take, keeping both a factor 4 inside the dtype's range.
    room = torch.finfo(q.dtype).max / 4
    f_q = min(factor, room / max(float(q.abs().max()), 1e-30))
    f_k = min(factor / f_q, room / max(float(k.abs().max()), 1e-30))
    q = (q.double() * f_q).to(q.dtype)
    k = (k.double() * f_k).to(k.dtype)
    target = large_score(q.dtype)
    case_line = (f"{case} with q scaled by {f_q:.4g} and k by {f_k:.4g} (|scores| <= {target:g}: "
                 "scale sum |q||k| <= that)")
    ctx = f"check_large_logits_stable failed for kernel {kernel_name(kernel)} on {case_line}"
    q, k = _common.place(q, case, device, "q"), _common.place(k, case, device, "k")
    v = case.make_qkv(device)[2]
    o, lse = _common.forward(kernel, q, k, v, case.is_causal)
    with torch.no_grad():
        o64, lse64 = dense_attention(q, k, v, case.is_causal)
        o_ref, lse_ref = dense_attention(q, k, v, case.is_causal, compute_dtype=None)
    # The error model's floor grows with em.score_magnitude: at scores of 1e4 the scores' own
    # rounding, not the dtype of the output, sets what a correct kernel can do.
    em.assert_within_error_model(em.OUTPUT, o, o64, o_ref, dtype=q.dtype, **em.output_scales(q, k, v),
                                 context=ctx)
    if lse is not None:
        em.assert_within_error_model(em.LSE, lse, lse64, lse_ref, dtype=q.dtype,
                                     **em.lse_scales(q, k, lse64), context=ctx, axes=("row",))
