"""Masks: what row ``i`` computes depends on the keys and values it sees only, exactly.

The causal checks run every case as causal (``is_causal=True``), the window check every case with a
window, so each case of a grid or a fuzzer tests the mask; both follow the case's causal alignment.
Exactness: a hidden key's score is replaced by ``-inf`` before the exponential, so its probability
is exactly 0 and it adds exactly 0 to every sum; nothing about a hidden key can reach a row that
does not see it unless the mask is wrong or applied late. A set of rows ``R`` and the keys ``J`` that
no row of ``R`` sees are therefore tested together: changing ``k_J, v_J`` leaves ``o_R, lse_R``
unchanged, and an upstream gradient that is zero outside ``R`` gives ``dk_J = dv_J = 0``.
"""

from __future__ import annotations

from types import ModuleType

import torch

from properties import _common
from properties import error_model as em
from properties.case import Case
from properties.kernels import default_device, gated


def _unseen_keys(case: Case, rows: torch.Tensor) -> torch.Tensor:
    """``[n_k]`` bool: the keys that no row in ``rows`` (``[n_q]`` bool) sees."""
    return ~(_common.visible(case, "cpu") & rows[:, None]).any(0)


def _perturbed_keys(case: Case, hidden: torch.Tensor, device):
    """k and v of ``case`` with every key position in ``hidden`` (``[n_k]`` bool) replaced by other
    (larger) values."""
    _, k, v = case.make_qkv("cpu")
    gen = torch.Generator().manual_seed(case.seed + 104729)
    k2, v2 = k.clone(), v.clone()
    for t in (k2, v2):
        t[..., hidden, :] = (4 * torch.randn(t[..., hidden, :].shape, generator=gen)).to(t.dtype)
    return _common.place(k2, case, device, "k"), _common.place(v2, case, device, "v")


def assert_rows_ignore_unseen_keys(
    kernel: ModuleType, case: Case, rows: torch.Tensor, device, ctx: str, what: str
) -> None:
    """Changing every key no row in ``rows`` sees leaves those rows' ``o`` and ``lse`` bit-identical."""
    hidden = _unseen_keys(case, rows)
    q, k, v = case.make_qkv(device)
    k2, v2 = _perturbed_keys(case, hidden, device)
    f = case.features()
    o, lse = _common.forward(kernel, q, k, v, case.is_causal, **f)
    o2, lse2 = _common.forward(kernel, q, k2, v2, case.is_causal, **f)
    note = f" ({_describe(rows)} after changing the {int(hidden.sum())} keys none of them sees)"
    # Other rows may change; they are copied from the first run so that indices stay absolute.
    others = ~rows.to(o.device)
    em.assert_bit_equal(f"{what}: output ignores unseen keys" + note,
                        torch.where(others[:, None], o, o2), o, context=ctx)
    if lse is not None:
        em.assert_bit_equal(f"{what}: lse ignores unseen keys" + note, torch.where(others, lse, lse2),
                            lse, context=ctx, axes=("row",))


def assert_unseen_keys_get_no_gradient(
    kernel: ModuleType, case: Case, rows: torch.Tensor, device, ctx: str, what: str
) -> None:
    """With the upstream gradient zero outside ``rows``, ``dk`` and ``dv`` are exactly 0 at every key
    that no row in ``rows`` sees."""
    hidden = _unseen_keys(case, rows)
    q, k, v = (x.detach().requires_grad_() for x in case.make_qkv(device))
    do = case.make_grad_out("cpu").clone()
    do[..., ~rows, :] = 0
    do = _common.place(do, case, device, "do")
    o = kernel.attention(q, k, v, case.is_causal, **case.features())
    dk, dv = torch.autograd.grad(o, (k, v), do)
    seen = ~hidden.to(dk.device)
    for name, g in (("dk", dk), ("dv", dv)):
        em.assert_bit_equal(f"{what}: {name} is 0 at the {int(hidden.sum())} keys that no row of "
                            f"{_describe(rows)} sees, when the upstream gradient is 0 on the other rows",
                            g.masked_fill(seen[:, None], 0), torch.zeros_like(g), context=ctx,
                            axes=("key", "col"))


def _describe(rows: torch.Tensor) -> str:
    idx = rows.nonzero().flatten().tolist()
    if not idx:
        return "no rows"
    return f"rows {idx[0]}..{idx[-1]}" if idx == list(range(idx[0], idx[-1] + 1)) else f"rows {idx}"


def _first_rows(case: Case) -> torch.Tensor:
    """Rows ``i <= t`` for the split row ``t`` of :func:`_common.rows_to_keep`."""
    return torch.arange(case.n_q) <= _common.rows_to_keep(case)


@gated
def check_causal_future_ignored(kernel: ModuleType, case: Case, device=None) -> None:
    """Changing the keys and values that rows ``i <= t`` do not see (the future, ``j > c_t``) leaves
    those output rows (and their lse) bit-identical."""
    device = device or default_device()
    case = _common.transformed(kernel, case, device, is_causal=True)
    ctx = _common.context("check_causal_future_ignored", kernel, case)
    assert_rows_ignore_unseen_keys(kernel, case, _first_rows(case), device, ctx, "causal")


@gated
def check_causal_gradients_ignore_future(kernel: ModuleType, case: Case, device=None) -> None:
    """With the upstream gradient zero on rows ``> t``, ``dk`` and ``dv`` are exactly 0 at the keys
    that rows ``<= t`` do not see."""
    device = device or default_device()
    case = _common.transformed(kernel, case, device, is_causal=True)
    ctx = _common.context("check_causal_gradients_ignore_future", kernel, case)
    assert_unseen_keys_get_no_gradient(kernel, case, _first_rows(case), device, ctx, "causal")


def default_window(case: Case) -> tuple[int, int]:
    """A window for a case that has none: about a quarter of the keys to the left and an eighth to the
    right, so that the middle rows miss keys on both sides."""
    return (max(1, case.n_k // 4), max(0, case.n_k // 8))


@gated
def check_window_hides_keys(kernel: ModuleType, case: Case, device=None) -> None:
    """Keys outside a row's window have no influence, exactly: changing the keys and values that the
    middle rows do not see leaves their outputs and lse bit-identical, and with the upstream
    gradient zero on the other rows, those keys get ``dk = dv = 0`` exactly.

    A case without a window is given :func:`default_window`. The rows tested are a block in the
    middle (a third of the rows), so keys before and after the block's windows are both changed.
    """
    device = device or default_device()
    if case.window is None:
        case = _common.transformed(kernel, case, device, window=default_window(case))
    ctx = _common.context("check_window_hides_keys", kernel, case)
    i = torch.arange(case.n_q)
    rows = (i >= case.n_q // 3) & (i <= max(case.n_q // 3, (2 * case.n_q) // 3 - 1))
    assert_rows_ignore_unseen_keys(kernel, case, rows, device, ctx, "window")
    assert_unseen_keys_get_no_gradient(kernel, case, rows, device, ctx, "window")
