"""Determinism: the same inputs give the same bits, forward and backward, on every call.

A kernel that splits a reduction across programs and combines the parts with atomics, or reads
memory another program is still writing (a race), returns different bits from run to run; the
error model cannot see that, because each run is accurate on its own. And the backward of one
forward may run more than once (:func:`check_backward_repeatable`).
"""

from __future__ import annotations

from types import ModuleType

import torch

from properties import _common
from properties import error_model as em
from properties.case import Case
from properties.kernels import default_device, gated

RERUNS = {"cuda": 50, "cpu": 2}
"""Calls compared with the first: races on a GPU are rare per call, so 50; on the CPU the Triton
interpreter runs forward and backward at seconds per call, so 2 (3 calls in all)."""


def _run(kernel: ModuleType, q, k, v, do, is_causal: bool, features: dict):
    # Gradients through attention(): the contract lets attention_with_lse be forward-only.
    _, lse = _common.forward(kernel, q, k, v, is_causal, **features)
    leaves = [t.detach().requires_grad_() for t in (q, k, v)]
    o = kernel.attention(*leaves, is_causal, **features)
    grads = torch.autograd.grad(o, leaves, do)
    return {"o": o.detach(), "lse": lse, "dq": grads[0], "dk": grads[1], "dv": grads[2]}


@gated
def check_deterministic(kernel: ModuleType, case: Case, device=None) -> None:
    """Repeated forward and backward calls on the same inputs are bit-identical (torch.equal)."""
    device = torch.device(device or default_device())
    ctx = _common.context("check_deterministic", kernel, case)
    q, k, v = case.make_qkv(device)
    do = case.make_grad_out(device)
    first = _run(kernel, q, k, v, do, case.is_causal, case.features())
    reruns = RERUNS.get(device.type, RERUNS["cpu"])
    for run in range(1, reruns + 1):
        again = _run(kernel, q, k, v, do, case.is_causal, case.features())
        for name, want in first.items():
            if want is not None:
                em.assert_bit_equal(f"determinism of {name} (call {run + 1} vs call 1)", again[name],
                                    want, context=ctx, axes=("row",) if name == "lse" else ("row", "col"))


@gated
def check_backward_repeatable(kernel: ModuleType, case: Case, device=None) -> None:
    """The backward of one forward, run a second time (``retain_graph=True``: a second loss on the
    same activations, a gradient penalty) for another upstream gradient, gives bit for bit the
    gradients that upstream gradient gets through a fresh forward (the contract: calls are
    deterministic, and each backward of one forward gives its own gradients). A backward that
    changes what its forward saved (the lse turned to base 2 in place, a dq buffer kept from the
    forward and accumulated into) or keeps what it computed the first time (``rowsum(do * o)``,
    the gradients) gets the second one wrong, and one backward per forward, as every other check
    runs it, never shows that. On a difference, two fresh calls tell a kernel that is not
    deterministic (:func:`check_deterministic`) from one whose second backward differs."""
    device = torch.device(device or default_device())
    ctx = _common.context("check_backward_repeatable", kernel, case)
    q, k, v = case.make_qkv(device)
    do = case.make_grad_out(device)
    again = _common.another_upstream(do)
    f = case.features()

    def call(*qkv):
        return kernel.attention(*qkv, case.is_causal, **f)

    second = _common.second_backward(call, (q, k, v), do, again, ctx)
    fresh = _common.gradients_with(call, (q, k, v), (0, 1, 2), again, ctx)
    try:
        for name, got, want in zip(("dq", "dk", "dv"), second, fresh):
            em.assert_bit_equal(f"{name} of the second backward of one forward (another upstream gradient) "
                                "vs a fresh forward's", got, want, context=ctx)
    except AssertionError as error:
        why = _common.fresh_calls_say(lambda: _run(kernel, q, k, v, again, case.is_causal, f))
        raise AssertionError(f"{error}{why}") from None
