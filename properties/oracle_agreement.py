"""Checks that compare a kernel with the float64 oracle, within the error model.

Each check takes a kernel module and a :class:`~properties.case.Case`, runs both, and raises an
``AssertionError`` that names the check, the kernel, the case, the worst element and the bound.
"""

from __future__ import annotations

from types import ModuleType

import torch

from properties import _common
from properties.case import Case
from properties.kernels import default_device, gated, require_lse

__all__ = ["check_gradients_match_oracle", "check_lse_matches_oracle", "check_output_matches_oracle",
           "default_device"]


@gated
def check_output_matches_oracle(kernel: ModuleType, case: Case, device=None) -> None:
    """The output ``o`` is within the error model of the float64 oracle."""
    q, k, v = case.make_qkv(device or default_device())
    f = case.features()
    with torch.no_grad():
        o = kernel.attention(q, k, v, case.is_causal, **f)
    _common.assert_output_matches_oracle(o, q, k, v, case.is_causal,
                                         _common.context("check_output_matches_oracle", kernel, case), **f)


@gated
def check_lse_matches_oracle(kernel: ModuleType, case: Case, device=None) -> None:
    """The row log-sum-exp is float32, shaped ``q.shape[:-1]``, and within the error model
    (``-inf`` exactly, for a row that sees no key). The contract makes the lse a float32 output
    whatever the inputs' dtype, so its reference is computed in float32 (16-bit inputs upcast) and
    its floor is float32's (:func:`properties.error_model.lse_reference_dtype`)."""
    attention_with_lse = require_lse(kernel)
    q, k, v = case.make_qkv(device or default_device())
    f = case.features()
    with torch.no_grad():
        _, lse = attention_with_lse(q, k, v, case.is_causal, **f)
    _common.assert_lse_matches_oracle(lse, q, k, v, case.is_causal,
                                      _common.context("check_lse_matches_oracle", kernel, case), **f)


@gated
def check_gradients_match_oracle(kernel: ModuleType, case: Case, device=None) -> None:
    """``dq, dk, dv`` for a random upstream gradient are within the error model of the oracle's,
    and so is the output of the call autograd recorded: a kernel may take another path when its
    inputs require grad (one that saves what its backward needs), and the contract promises the
    same attention either way, which :func:`check_output_matches_oracle` (no grad) cannot see."""
    q, k, v = case.make_qkv(device or default_device())
    do = case.make_grad_out(q.device)
    context = _common.context("check_gradients_match_oracle", kernel, case)

    f = case.features()
    leaves = [t.detach().requires_grad_() for t in (q, k, v)]
    o = kernel.attention(*leaves, case.is_causal, **f)
    got = torch.autograd.grad(o, leaves, do)
    _common.assert_gradients_match_oracle(got, q, k, v, do, case.is_causal, context, o=o.detach(), **f)
