"""Checks that compare a kernel with the float64 oracle, within the error model.

Each check takes a kernel module and a :class:`~properties.case.Case`, runs both, and raises an
``AssertionError`` that names the check, the kernel, the case, the worst element and the bound.
"""

from __future__ import annotations

from types import ModuleType

import torch

from oracle.dense import dense_attention
from properties import _common
from properties import error_model as em
from properties.case import Case
from properties.kernels import default_device, gated, kernel_name, require_lse

__all__ = ["check_gradients_match_oracle", "check_lse_matches_oracle", "check_output_matches_oracle",
           "default_device"]


def _context(check: str, kernel: ModuleType, case: Case) -> str:
    return f"{check} failed for kernel {kernel_name(kernel)} on {case}"


@gated
def check_output_matches_oracle(kernel: ModuleType, case: Case, device=None) -> None:
    """The output ``o`` is within the error model of the float64 oracle."""
    q, k, v = case.make_qkv(device or default_device())
    f = case.features()
    with torch.no_grad():
        o = kernel.attention(q, k, v, case.is_causal, **f)
        o64, _ = dense_attention(q, k, v, case.is_causal, **f)
        o_ref, _ = dense_attention(q, k, v, case.is_causal, compute_dtype=None, **f)
    em.assert_within_error_model(
        em.OUTPUT, o, o64, o_ref, dtype=q.dtype, **em.output_scales(q, k, v, scale=case.softmax_scale),
        context=_context("check_output_matches_oracle", kernel, case),
    )


@gated
def check_lse_matches_oracle(kernel: ModuleType, case: Case, device=None) -> None:
    """The row log-sum-exp is float32, shaped ``q.shape[:-1]``, and within the error model
    (``-inf`` exactly, for a row that sees no key). The contract makes the lse a float32 output
    whatever the inputs' dtype, so its reference is computed in float32 (16-bit inputs upcast) and
    its floor is float32's (:func:`properties.error_model.lse_reference_dtype`)."""
    attention_with_lse = require_lse(kernel)
    q, k, v = case.make_qkv(device or default_device())
    f = case.features()
    context = _context("check_lse_matches_oracle", kernel, case)
    with torch.no_grad():
        _, lse = attention_with_lse(q, k, v, case.is_causal, **f)
        _, lse64 = dense_attention(q, k, v, case.is_causal, **f)
        _, lse_ref = dense_attention(q, k, v, case.is_causal,
                                     compute_dtype=em.lse_reference_dtype(q.dtype), **f)
    if lse.dtype != em.LSE_DTYPE:
        raise AssertionError(f"log-sum-exp: {context}: dtype {lse.dtype}, expected {em.LSE_DTYPE}")
    em.assert_within_error_model(
        em.LSE, lse, lse64, lse_ref, dtype=em.LSE_DTYPE,
        **em.lse_scales(q, k, lse64, scale=case.softmax_scale), context=context, axes=("row",),
    )


@gated
def check_gradients_match_oracle(kernel: ModuleType, case: Case, device=None) -> None:
    """``dq, dk, dv`` for a random upstream gradient are within the error model of the oracle's."""
    q, k, v = case.make_qkv(device or default_device())
    do = case.make_grad_out(q.device)
    context = _context("check_gradients_match_oracle", kernel, case)

    f = case.features()
    leaves = [t.detach().requires_grad_() for t in (q, k, v)]
    got = torch.autograd.grad(kernel.attention(*leaves, case.is_causal, **f), leaves, do)
    oracle = _common.oracle_gradients(q, k, v, do, case.is_causal, **f)
    lengths = em.sum_lengths(q.shape[-2], k.shape[-2], em.group_of(q, k))
    for i, name in enumerate(("dq", "dk", "dv")):
        em.assert_within_error_model(
            em.Quantity(f"gradient {name}", em.GRADIENT.factor), got[i], oracle.want[i], oracle.ref[i],
            dtype=q.dtype, magnitude=oracle.magnitudes[i], scores=oracle.scores, terms=lengths[i],
            context=context, rounded=oracle.rounded[i], inherited=oracle.inherited[i],
        )
