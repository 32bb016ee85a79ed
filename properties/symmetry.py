"""Symmetries of attention: what transforming the inputs does to the output, for any kernel.

``attention(q, k, v) = softmax(scale q k^T) v`` is affine in ``v`` with rows of weights summing to
one, blind to a common shift of the keys (it cancels in the softmax, moving the lse by
``scale q_i . u``), blind to the order of the key-value pairs, and row-wise in the queries and the
leading dims. Where a transformed input would round, it is first put on a grid that the dtype holds
exactly (:func:`properties.error_model.exact_grid_spacing`), so each identity holds exactly in
exact arithmetic and the only slack is each kernel call's own error-model bound.
"""

from __future__ import annotations

import math
from types import ModuleType

import torch

from oracle.dense import softmax_scale
from properties import _common
from properties import error_model as em
from properties.case import Case
from properties.kernels import default_device, gated


def _on_grid(t: torch.Tensor, spacing: float) -> torch.Tensor:
    return (torch.round(t.double() / spacing) * spacing).to(t.dtype)


def _power_of_two_above(x: float, dtype: torch.dtype) -> float:
    """The least power of two ``>= x``, and at least the dtype's smallest normal number.

    The floor is the dtype's own: a fixed one (it was float16's ``2^-14``) sits far above the
    elements of a ``large`` case's k (``2^-40``) or a ``tiny`` case's v in float32, so a shift sized
    from it was not "a few times the largest element" but millions of times it, and the grid of
    that size rounded every element of k (or v) to 0.
    """
    return 2.0 ** math.ceil(math.log2(max(x, torch.finfo(dtype).smallest_normal)))


@gated
def check_value_affine(kernel: ModuleType, case: Case, device=None) -> None:
    """``attention(q, k, a v + b) = a attention(q, k, v) + b`` for ``a = -2`` and ``b`` a constant.

    The weights of each row sum to one, so a constant added to every value passes through; the
    sign flip and doubling pass through by linearity.
    """
    device = device or default_device()
    ctx = _common.context("check_value_affine", kernel, case)
    q, k, v = case.make_qkv("cpu")
    top = _power_of_two_above(float(v.abs().max()), v.dtype)
    if 4 * top <= torch.finfo(q.dtype).max:
        a, b = -2.0, 0.75 * top
    else:  # values near the top of the dtype: negation is all that stays representable
        a, b = -1.0, 0.0
    # On this grid, v and a v + b (|a v + b| <= 2.75 top) are exact in the dtype.
    g = em.exact_grid_spacing(q.dtype, 4 * top)
    v = _on_grid(v, g)
    v2 = (a * v.double() + b).to(q.dtype)
    q, k = _common.place(q, case, device, "q"), _common.place(k, case, device, "k")
    v, v2 = (_common.place(t, case, device, "v") for t in (v, v2))
    f = case.features()
    o, _ = _common.forward(kernel, q, k, v, case.is_causal, **f)
    o2, _ = _common.forward(kernel, q, k, v2, case.is_causal, **f)
    b_right, how_right = _common.output_bound(q, k, v, case.is_causal, **f)
    b_left, how_left = _common.output_bound(q, k, v2, case.is_causal, **f)
    bound = em.two_sided_bound(b_left, b_right, coefficient=a)
    # A row that sees no key is 0 whatever v is: b does not reach it.
    sees = _common.visible(case, o.device).any(-1)[:, None]
    em.assert_within_bound(
        f"value affine equivariance (a={a:g}, b={b:g})", o2, a * o.double() + b * sees, bound,
        f"bound of K(a v + b) [{how_left}] + |a| x bound of K(v) [{how_right}]", context=ctx,
    )


KEY_SHIFT = 4
"""The translation vector's elements are up to this many times the largest key element."""


@gated
def check_key_translation(kernel: ModuleType, case: Case, device=None) -> None:
    """Adding one vector ``u`` to every key leaves ``o`` unchanged and moves ``lse_i`` by
    ``scale q_i . u`` (run without softcap, which is not shift-invariant; with the case's softmax
    scale, window and alignment)."""
    device = device or default_device()
    if case.softcap:
        case = case.replace(softcap=None)
    ctx = _common.context("check_key_translation", kernel, case)
    q, k, v = case.make_qkv("cpu")
    # u is up to SHIFT times the largest key element, so the scores move by tens of units: a
    # kernel that subtracts the row max must not care, one that clamps or saturates scores will.
    top = _power_of_two_above(float(k.abs().max()), k.dtype)
    g = em.exact_grid_spacing(q.dtype, (1 + KEY_SHIFT) * top)
    gen = torch.Generator().manual_seed(case.seed + 15485863)
    u = (torch.rand(k.shape[-1], generator=gen, dtype=torch.float64) * 2 - 1) * KEY_SHIFT * top
    k, u = _on_grid(k, g), _on_grid(u.to(k.dtype), g)
    k2 = (k.double() + u.double()).to(k.dtype)  # exact: on the grid, |k + u| <= (1 + SHIFT) top
    q, v = _common.place(q, case, device, "q"), _common.place(v, case, device, "v")
    k, k2 = (_common.place(t, case, device, "k") for t in (k, k2))
    f = case.features()
    o, lse = _common.forward(kernel, q, k, v, case.is_causal, **f)
    o2, lse2 = _common.forward(kernel, q, k2, v, case.is_causal, **f)
    b_left, how_left = _common.output_bound(q, k2, v, case.is_causal, **f)
    b_right, _ = _common.output_bound(q, k, v, case.is_causal, **f)
    em.assert_within_bound(
        "key translation leaves the output unchanged", o2, o, em.two_sided_bound(b_left, b_right),
        f"bound of K(k + u) + bound of K(k); each = {how_left}", context=ctx,
    )
    if lse is None:
        return
    scale = softmax_scale(q.shape[-1], case.softmax_scale)
    shift = (q.double() @ u.double().to(q.device)) * scale
    l_left, how_l = _common.lse_bound(q, k2, case.is_causal, **f)
    l_right, _ = _common.lse_bound(q, k, case.is_causal, **f)
    em.assert_within_bound(
        "key translation shifts the lse by scale q.u", lse2, lse.double() + shift,
        em.two_sided_bound(l_left, l_right), f"lse bound of K(k + u) + lse bound of K(k); each = {how_l}",
        context=ctx, axes=("row",),
    )


@gated
def check_key_value_permutation(kernel: ModuleType, case: Case, device=None) -> None:
    """Permuting keys and values together leaves the output unchanged (run non-causal and without a
    window: masks are tied to key positions)."""
    case = case.replace(is_causal=False, window=None, causal_alignment="top_left")
    device = device or default_device()
    ctx = _common.context("check_key_value_permutation", kernel, case)
    q, k, v = case.make_qkv(device)
    perm = torch.randperm(case.n_k, generator=torch.Generator().manual_seed(case.seed + 1)).to(device)
    k2, v2 = k[..., perm, :], v[..., perm, :]
    f = case.features()
    o, _ = _common.forward(kernel, q, k, v, False, **f)
    o2, _ = _common.forward(kernel, q, k2, v2, False, **f)
    b_left, how = _common.output_bound(q, k2, v2, False, **f)
    b_right, _ = _common.output_bound(q, k, v, False, **f)
    em.assert_within_bound(
        "joint key/value permutation leaves the output unchanged", o2, o,
        em.two_sided_bound(b_left, b_right), f"bound of K(permuted) + bound of K; each = {how}",
        context=ctx,
    )


@gated
def check_query_permutation(kernel: ModuleType, case: Case, device=None) -> None:
    """Permuting the queries permutes the output rows (run non-causal and without a window: masks
    are tied to row positions)."""
    case = case.replace(is_causal=False, window=None, causal_alignment="top_left")
    device = device or default_device()
    ctx = _common.context("check_query_permutation", kernel, case)
    q, k, v = case.make_qkv(device)
    perm = torch.randperm(case.n_q, generator=torch.Generator().manual_seed(case.seed + 2)).to(device)
    f = case.features()
    o, _ = _common.forward(kernel, q, k, v, False, **f)
    o2, _ = _common.forward(kernel, q[..., perm, :], k, v, False, **f)
    b_left, how = _common.output_bound(q[..., perm, :], k, v, False, **f)
    b_right, _ = _common.output_bound(q, k, v, False, **f)
    em.assert_within_bound(
        "query permutation permutes the output rows", o2, o[..., perm, :],
        em.two_sided_bound(b_left, b_right), f"bound of K(permuted) + bound of K; each = {how}",
        context=ctx,
    )


@gated
def check_batch_independent(kernel: ModuleType, case: Case, device=None) -> None:
    """Each leading-dim slice computed alone (as a rank-2 call) agrees with its part of the batched
    result (first and last slice): bit-for-bit for a kernel module that declares
    ``BATCH_INVARIANT = True`` (``flash`` does: each slice is its own programs), else within the
    two-sided error model.

    Why not bit-for-bit for every kernel: one built on batched BLAS need not be; measured: the mock
    on the CPU, ``Case(n_q=65, n_k=65, head_dim=16, leading=(2,))`` float32, differs from its
    slice-alone call in 58 of 1040 elements by one ulp (a batch-2 ``bmm`` rounds differently from
    a batch-1 one).
    """
    device = device or default_device()
    ctx = _common.context("check_batch_independent", kernel, case)
    q, k, v = case.make_qkv(device)
    f = case.features()
    o, lse = _common.forward(kernel, q, k, v, case.is_causal, **f)
    n = math.prod(case.leading)
    group = case.leading[-1] // case.kv_leading[-1] if case.leading else 1
    for flat in sorted({0, n - 1}):
        idx = kv = ()
        if case.leading:
            idx = tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), case.leading))
            kv = (*idx[:-1], idx[-1] // group)  # a query head's kv head (grouped-query attention)
        o1, lse1 = _common.forward(kernel, q[idx], k[kv], v[kv], case.is_causal, **f)
        where = f" (slice {idx} alone vs batched)"
        if getattr(kernel, "BATCH_INVARIANT", False):
            em.assert_bit_equal("batch independence" + where, o1, o[idx], context=ctx)
            if lse is not None:
                em.assert_bit_equal("batch independence, lse" + where, lse1, lse[idx], context=ctx,
                                    axes=("row",))
            continue
        b, how = _common.output_bound(q[idx], k[kv], v[kv], case.is_causal, **f)
        em.assert_within_bound("batch independence" + where, o1, o[idx], em.two_sided_bound(b, b),
                               f"twice the slice's bound, {how}", context=ctx)
        if lse is not None:
            b, how = _common.lse_bound(q[idx], k[kv], case.is_causal, **f)
            em.assert_within_bound("batch independence, lse" + where, lse1, lse[idx],
                                   em.two_sided_bound(b, b), f"twice the slice's lse bound, {how}",
                                   context=ctx, axes=("row",))
