"""Gradients beyond the oracle comparison of all three at once.

Agreement with the oracle's autograd is :func:`properties.oracle_agreement.check_gradients_match_oracle`.
:func:`check_gradcheck_float64` needs no oracle at all, only the kernel's own forward: its backward
must be the derivative of its forward. It needs float64 (finite differences in lower precision are
noise), so a kernel that rejects float64 inputs (``TypeError``/``ValueError``) is
:class:`NotApplicable`. :func:`check_gradients_with_frozen_inputs` asks for the gradients of only
some inputs, as autograd does when the others are frozen.
"""

from __future__ import annotations

from types import ModuleType

import torch
from torch.autograd.gradcheck import GradcheckError

from properties import _common
from properties.case import Case
from properties.kernels import NotApplicable, default_device, gated, kernel_name

GRADCHECK_SIZES = {"n_q": 5, "n_k": 7, "head_dim": 4}
"""Gradcheck perturbs each input element twice: the case is cut to at most these sizes (and one
leading slice), keeping its causality, layout, distribution and seed. Its ``scale`` is set to 1:
finite differences with one step ``eps`` for every input need inputs of order one (a ``large``
case has q near 1e6 and k near 1e-6, where no single step works)."""

# gradcheck's own defaults, named here so that the failure message can quote them: float64 finite
# differences of an O(1) function, not a bound of this suite's error model.
EPS, ATOL, RTOL = 1e-6, 1e-5, 1e-3


def _worst_jacobian_entry(fn, inputs) -> str:
    """Where the analytical Jacobian (the kernel's backward) is furthest from central differences."""
    names = ("q", "k", "v")
    analytical = torch.autograd.functional.jacobian(fn, inputs)
    worst = (-1.0, "")
    for i, x in enumerate(inputs):
        flat = x.detach().reshape(-1)
        for e in range(flat.numel()):
            def shifted(delta, e=e, i=i):
                xs = [t.detach().clone() for t in inputs]
                xs[i].reshape(-1)[e] += delta
                with torch.no_grad():
                    return fn(*xs)
            numerical = (shifted(EPS) - shifted(-EPS)) / (2 * EPS)
            got = analytical[i].reshape(numerical.numel(), -1)[:, e].reshape(numerical.shape)
            excess = (got - numerical).abs() - (ATOL + RTOL * numerical.abs())
            j = int(excess.reshape(-1).argmax())
            if float(excess.reshape(-1)[j]) > worst[0]:
                out_idx = tuple(int(t) for t in torch.unravel_index(torch.tensor(j), numerical.shape))
                in_idx = tuple(int(t) for t in torch.unravel_index(torch.tensor(e), x.shape))
                worst = (float(excess.reshape(-1)[j]),
                         f"d o{list(out_idx)} / d {names[i]}{list(in_idx)}: backward "
                         f"{float(got.reshape(-1)[j]):.6g}, finite differences "
                         f"{float(numerical.reshape(-1)[j]):.6g}")
    return worst[1]


@gated
def check_gradcheck_float64(kernel: ModuleType, case: Case, device=None) -> None:
    """``torch.autograd.gradcheck`` of the kernel in float64 on a small cut of the case (with its
    features; a grouped-query case keeps two query heads on one kv head)."""
    device = device or default_device()
    dtypes = getattr(kernel, "SUPPORTED_DTYPES", None)
    if dtypes is not None and torch.float64 not in tuple(dtypes):
        raise NotApplicable(f"kernel module {kernel_name(kernel)} does not declare float64 "
                            "(SUPPORTED_DTYPES), and gradcheck needs it")
    gqa = "gqa" in case.needs()
    small = case.replace(**{key: min(getattr(case, key), size) for key, size in GRADCHECK_SIZES.items()},
                         leading=(2,) if gqa else (1,) if case.leading else (), scale=1.0,
                         kv_heads=1 if gqa else None)
    ctx = _common.context("check_gradcheck_float64", kernel, case) + f" (cut to {small})"
    q, k, v = (_common.place(t.double(), small, device, name).requires_grad_()
               for name, t in zip("qkv", small.make_qkv("cpu")))
    f = small.features()
    try:
        with torch.no_grad():
            kernel.attention(q, k, v, small.is_causal, **f)
    except (TypeError, ValueError) as exc:
        raise NotApplicable(f"kernel module {kernel_name(kernel)} does not take float64 ({exc})") from exc
    fn = lambda *a: kernel.attention(*a, small.is_causal, **f)
    mismatch = None
    # A gradcheck that disagrees is this check's finding below; any other exception of the kernel's
    # calls or backwards inside it is one too, named as the check's (not the kernel's bare error).
    with _common.crash_is_failure(ctx, "a call of the kernel or its backward inside gradcheck"):
        try:
            torch.autograd.gradcheck(fn, (q, k, v), eps=EPS, atol=ATOL, rtol=RTOL)
        except GradcheckError as exc:
            mismatch = exc
    if mismatch is not None:
        first = str(mismatch).strip().splitlines()[0].rstrip(",")
        raise AssertionError(
            f"gradcheck in float64: {ctx}: {first}; worst at {_worst_jacobian_entry(fn, (q, k, v))}; "
            f"bound = gradcheck's atol {ATOL:g} + rtol {RTOL:g} x |finite difference| (eps {EPS:g})"
        ) from None


FROZEN = ((0,), (1,), (2,), (1, 2))
"""The inputs that require grad, by position in (q, k, v), in each call of
:func:`check_gradients_with_frozen_inputs`: each alone, then k and v (a frozen query)."""


@gated
def check_gradients_with_frozen_inputs(kernel: ModuleType, case: Case, device=None) -> None:
    """With only some of q, k, v requiring grad (q alone: keys and values from a frozen encoder or
    a cache; k and v without q; each alone), the gradient of each input that requires grad is within
    the error model of the oracle's, as when all three do (the contract: differentiable in q, k, v,
    in any of them alone). Autograd then tells the backward which gradients it needs
    (``ctx.needs_input_grad``), and a kernel that skips the work of the others may skip or take a
    different path for part of what it does return; with all three requiring grad, as in
    :func:`~properties.oracle_agreement.check_gradients_match_oracle`, nothing is skipped."""
    q, k, v = case.make_qkv(device or default_device())
    do = case.make_grad_out(q.device)
    f = case.features()
    oracle = _common.oracle_gradients(q, k, v, do, case.is_causal, **f)
    for wanted in FROZEN:
        names = " and ".join("qkv"[i] for i in wanted)
        context = (_common.context("check_gradients_with_frozen_inputs", kernel, case)
                   + f" (only {names} requiring grad)")
        got = _common.gradients_with(lambda *a: kernel.attention(*a, case.is_causal, **f), (q, k, v),
                                     wanted, do, context)
        _common.assert_gradients_match_oracle(got, q, k, v, do, case.is_causal, context,
                                              oracle=oracle, **f)
