"""Past 2^31 elements: a call whose tensors hold more elements than an int32 can count.

A kernel that computes a slice's offset as ``slice * n * d`` in 32-bit integers (a Triton program
id times a stride, both int32, is int32) reads and writes the wrong memory once a tensor passes
2^31 elements: garbage, another slice's values, or an illegal memory access. Ordinary cases never get
there (a float16 q of 2^31 elements is 4 GB), so no grid or fuzz case can see it; this check builds
one such call on purpose. It is not in :data:`properties.ALL_CHECKS` (every grid case would then
allocate gigabytes): ``tests/test_large_offsets.py`` runs it on a few cases on the GPU, and on the
CPU with a small ``elements`` against a module whose offsets wrap there.
"""

from __future__ import annotations

from types import ModuleType

import torch

from properties import _common
from properties.case import Case
from properties.kernels import NotApplicable, default_device, require_case

__all__ = ["INT32_ELEMENTS", "check_large_offsets", "large_call_bytes"]

INT32_ELEMENTS = 2**31
"""The first element count an int32 offset cannot reach."""

TENSORS = 8
"""Tensors of q's size alive at once: q, k, v, o, the upstream gradient, dq, dk, dv."""


def _slices(case: Case, elements: int) -> int:
    """Leading slices of ``case``'s shape enough for q, k and v each to pass ``elements``, and the
    last slice to start past it."""
    return elements // (min(case.n_q, case.n_k) * case.head_dim) + 2


def large_call_bytes(case: Case, elements: int = INT32_ELEMENTS) -> int:
    """The memory :func:`check_large_offsets` allocates for ``case`` (its inputs, output and
    gradients; not what the kernel allocates itself)."""
    bits = torch.finfo(getattr(torch, case.dtype)).bits
    return TENSORS * _slices(case, elements) * max(case.n_q, case.n_k) * case.head_dim * bits // 8


def check_large_offsets(kernel: ModuleType, case: Case, device=None, *,
                        elements: int = INT32_ELEMENTS) -> None:
    """With q, k and v each holding more than ``elements`` (2^31) elements, the first leading slice
    and the last (which starts past 2^31) are within the error model of the oracle, outputs, lse and
    gradients, and every slice between them, whose upstream gradient is 0, gets gradients of exactly
    0 (a write that wraps lands there). ``case`` gives the shape of one slice (its ``leading`` is
    replaced by one dim of as many slices as it takes); its values are ``randn`` in its dtype.

    :class:`NotApplicable` when the device lacks the memory (:func:`large_call_bytes`, plus half
    of it for the kernel's own buffers, such as a float32 ``dq``).
    """
    device = torch.device(device or default_device())
    require_case(kernel, case, device)
    dtype = getattr(torch, case.dtype)
    n_q, n_k, d = case.n_q, case.n_k, case.head_dim
    slices = _slices(case, elements)
    large = case.replace(leading=(slices,), kv_heads=None)
    need = large_call_bytes(case, elements) * 3 // 2
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        if free < need:
            raise NotApplicable(f"check_large_offsets needs {need / 2**30:.1f} GiB free on {device}, "
                                f"has {free / 2**30:.1f} GiB")
    ctx = _common.context("check_large_offsets", kernel, large)
    f = large.features()
    gen = torch.Generator(device).manual_seed(case.seed)

    def randn(n: int) -> torch.Tensor:
        return torch.randn(slices, n, d, generator=gen, device=device, dtype=dtype)

    q, k, v = randn(n_q), randn(n_k), randn(n_k)
    ends = (0, slices - 1)  # the last slice starts past `elements` in every tensor
    o, lse = _common.forward(kernel, q, k, v, large.is_causal, **f)
    for s in ends:
        where = f"{ctx}, leading slice {s} of {slices}"
        _common.assert_forward_matches_oracle(o[s], None if lse is None else lse[s], q[s], k[s], v[s],
                                              large.is_causal, where, **f)
    del o, lse

    do = torch.zeros_like(q)
    for s in ends:
        do[s] = torch.randn(n_q, d, generator=gen, device=device, dtype=dtype)
    leaves = [t.requires_grad_() for t in (q, k, v)]
    got = torch.autograd.grad(kernel.attention(*leaves, large.is_causal, **f), leaves, do)
    q, k, v = (t.detach() for t in leaves)
    names = ("dq", "dk", "dv")
    for name, g in zip(names, got):
        low, high = g[1:-1].aminmax()  # no temporary the size of g (4 GiB on the GPU cases)
        if bool(low != 0) or bool(high != 0):
            inner = g[1:-1].reshape(slices - 2, -1).abs().amax(-1)
            first = int(inner.nonzero()[0]) + 1
            raise AssertionError(
                f"gradient {name}: {ctx}: leading slice {first} of {slices} has an upstream gradient of "
                f"0 yet gets |{name}| up to {float(inner[first - 1]):.3e} (bound: exactly 0; a write "
                "past 2^31 elements that wrapped lands in another slice)")
    for s in ends:
        _common.assert_gradients_match_oracle([g[s] for g in got], q[s], k[s], v[s], do[s], large.is_causal,
                                              f"{ctx}, leading slice {s} of {slices}", **f)
