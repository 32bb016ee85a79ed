"""Determinism: the same inputs give the same bits, forward and backward, on every call.

A kernel that splits a reduction across programs and combines the parts with atomics, or reads
memory another program is still writing (a race), returns different bits from run to run; the
error model cannot see that, because each run is accurate on its own.
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
