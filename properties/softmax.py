"""The attention probabilities: rows are non-negative and sum to one; the lse is their normalizer.

A kernel exposes no probability matrix, so :func:`recover_probabilities` reads it back through the
kernel itself: with ``v`` made of one-hot columns, output column ``c`` is column ``c`` of ``P``.
"""

from __future__ import annotations

import math
from types import ModuleType

import torch

from oracle.dense import dense_scores
from properties import _common
from properties import error_model as em
from properties.case import Case
from properties.kernels import default_device, gated, require_lse


def recover_probabilities(kernel: ModuleType, q, k, is_causal: bool, case: Case) -> torch.Tensor:
    """``P`` (float64, ``[..., n_q, n_k]``) as the kernel applies it, ``d`` key columns per call.

    Call ``c`` sets ``v[..., c0 + j, j] = 1`` for ``j < d``, so output column ``j`` is ``P[..., c0 + j]``.
    """
    *lead, n_k, d = k.shape
    columns = []
    for c0 in range(0, n_k, d):
        width = min(d, n_k - c0)
        onehot = torch.zeros((*lead, n_k, d), dtype=q.dtype)
        onehot[..., c0 + torch.arange(width), torch.arange(width)] = 1
        v = _common.place(onehot, case, q.device, "v")
        with torch.no_grad():
            o = kernel.attention(q, k, v, is_causal, **case.features())
        columns.append(o[..., :width].double())
    return torch.cat(columns, dim=-1)


@gated
def check_rows_normalized(kernel: ModuleType, case: Case, device=None) -> None:
    """Recovered probabilities are >= 0 (exactly), each row sums to 1 (within
    :func:`~properties.error_model.probability_sum_bound`), and are exactly 0 for every key the row
    does not see (causal mask, window); a row that sees no key sums to exactly 0."""
    q, k, _ = case.make_qkv(device or default_device())
    ctx = _common.context("check_rows_normalized", kernel, case)
    p = recover_probabilities(kernel, q, k, case.is_causal, case)
    axes = ("row", "key")
    em.assert_within_bound("probabilities are finite", p, torch.zeros_like(p), math.inf,
                           "any finite value", context=ctx, axes=axes)
    negative = p < 0
    if bool(negative.any()):
        em.assert_bit_equal("probabilities are non-negative", torch.where(negative, p, 0.0),
                            torch.zeros_like(p), context=ctx, axes=axes)
    seen = _common.visible(case, p.device)
    if not bool(seen.all()):
        em.assert_bit_equal("probabilities are 0 for keys the row does not see (mask, window)",
                            p.masked_fill(seen, 0.0), torch.zeros_like(p), context=ctx, axes=axes)
    bound = em.probability_sum_bound(q.dtype, case.n_k)
    how = (f"probability_sum_bound({str(q.dtype).removeprefix('torch.')}, n_k={case.n_k}): "
           "2 roundings to the dtype + float32 summation of n_k terms")
    sums = p.sum(-1)
    em.assert_within_bound("probability rows sum to 1 (0 for a row that sees no key)", sums,
                           seen.any(-1).double().expand(sums.shape), bound, how, context=ctx,
                           axes=("row",))


@gated
def check_lse_normalizes_rows(kernel: ModuleType, case: Case, device=None) -> None:
    """``sum_j exp(s_ij - lse_i) = 1`` with ``s`` the float64 scaled (and capped) scores and ``lse``
    the kernel's; a row that sees no key has ``lse = -inf`` exactly.

    If ``|lse - lse*| <= B`` (the error model's lse bound) the sum is ``exp(lse* - lse)``, within
    ``expm1(B)`` of 1.
    """
    attention_with_lse = require_lse(kernel)
    q, k, v = case.make_qkv(device or default_device())
    f = case.features()
    ctx = _common.context("check_lse_normalizes_rows", kernel, case)
    with torch.no_grad():
        _, lse = attention_with_lse(q, k, v, case.is_causal, **f)
    sees = _common.visible(case, lse.device).any(-1).expand(lse.shape)
    if not bool(sees.all()):
        em.assert_bit_equal("the lse of a row that sees no key is -inf", lse.masked_fill(sees, -math.inf),
                            torch.full_like(lse, -math.inf), context=ctx, axes=("row",))
    s = dense_scores(q.double(), k.double(), case.is_causal, **f)
    sums = torch.exp(s - lse.double().masked_fill(~sees, 0.0).unsqueeze(-1)).sum(-1)
    b, how = _common.lse_bound(q, k, case.is_causal, **f)
    em.assert_within_bound("exp(s - lse) rows sum to 1", sums, sees.double(), math.expm1(b),
                           f"expm1(lse bound {b:.3e}); lse bound = {how}", context=ctx, axes=("row",))
