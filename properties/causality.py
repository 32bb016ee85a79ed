"""Causal masking: what row ``i`` computes depends on keys and values ``j <= i`` only, exactly.

Both checks run every case as causal (``case.replace(is_causal=True)``), so each case of a grid or
a fuzzer tests the mask. Exactness: a hidden key's score is replaced by ``-inf`` before the
exponential, so its probability is exactly 0 and it adds exactly 0 to every sum; nothing about a
hidden key can reach a visible row unless the mask is wrong or applied late.
"""

from __future__ import annotations

from types import ModuleType

import torch

from properties import _common
from properties import error_model as em
from properties.case import Case
from properties.oracle_agreement import default_device


def _perturbed_future(case: Case, t: int, device):
    """k and v of ``case`` with every position ``j > t`` replaced by other (larger) values."""
    q, k, v = case.make_qkv("cpu")
    gen = torch.Generator().manual_seed(case.seed + 104729)
    k2, v2 = k.clone(), v.clone()
    for t2 in (k2, v2):
        t2[..., t + 1 :, :] = (4 * torch.randn(t2[..., t + 1 :, :].shape, generator=gen)).to(t2.dtype)
    return _common.place(k2, case, device, "k"), _common.place(v2, case, device, "v")


def check_causal_future_ignored(kernel: ModuleType, case: Case, device=None) -> None:
    """Changing keys and values at ``j > t`` leaves output rows (and lse) ``i <= t`` bit-identical."""
    case = case.replace(is_causal=True)
    device = device or default_device()
    ctx = _common.context("check_causal_future_ignored", kernel, case)
    t = _common.rows_to_keep(case)
    q, k, v = case.make_qkv(device)
    k2, v2 = _perturbed_future(case, t, device)
    o, lse = _common.forward(kernel, q, k, v, True)
    o2, lse2 = _common.forward(kernel, q, k2, v2, True)
    note = f" (rows <= {t} after changing keys and values > {t})"
    # Rows > t may change; they are copied from the first run so that indices stay absolute.
    later = torch.arange(case.n_q, device=o.device) > t
    em.assert_bit_equal("causal output ignores future keys" + note,
                        torch.where(later[:, None], o, o2), o, context=ctx)
    if lse is not None:
        em.assert_bit_equal("causal lse ignores future keys" + note, torch.where(later, lse, lse2),
                            lse, context=ctx, axes=("row",))


def check_causal_gradients_ignore_future(kernel: ModuleType, case: Case, device=None) -> None:
    """With the upstream gradient zero on rows ``> t``, ``dk`` and ``dv`` are exactly 0 at keys ``> t``."""
    case = case.replace(is_causal=True)
    device = device or default_device()
    ctx = _common.context("check_causal_gradients_ignore_future", kernel, case)
    t = _common.rows_to_keep(case)
    q, k, v = (x.detach().requires_grad_() for x in case.make_qkv(device))
    do = case.make_grad_out("cpu").clone()
    do[..., t + 1 :, :] = 0
    do = _common.place(do, case, device, "do")
    o = kernel.attention(q, k, v, True)
    dk, dv = torch.autograd.grad(o, (k, v), do)
    visible = torch.arange(case.n_k, device=dk.device) <= t
    for name, g in (("dk", dk), ("dv", dv)):
        em.assert_bit_equal(f"causal {name} is 0 at keys > {t} when the upstream gradient is 0 "
                            f"on rows > {t}", g.masked_fill(visible[:, None], 0), torch.zeros_like(g),
                            context=ctx, axes=("key", "col"))
