"""Kernel module: PyTorch's ``scaled_dot_product_attention`` (SDPA), whatever backend it picks; and
the one implementation behind the modules that force a backend (``sdpa_flash``, ``sdpa_cudnn``,
``sdpa_efficient``, ``sdpa_math``: each is a :class:`Backend` given to :func:`attention_for`).

Features: the three that SDPA takes natively, no more. ``scale`` is SDPA's ``scale=``; ``gqa`` is
``enable_gqa=True``, passed when k and v have fewer heads than q; ``bottom_right`` is
``attn_mask=torch.nn.attention.bias.causal_lower_right(n_q, n_k)`` on a causal call with
``n_q != n_k`` (when ``n_q == n_k`` both alignments are one mask, and the call is the plain causal
one, so the two are the same call). SDPA has no window and no softcap argument; building them from a
boolean mask would test this adapter's mask, not SDPA, so no SDPA module declares them.

It has no ``attention_with_lse`` (SDPA does not return the lse), so tests that need one skip for
this module and say why. Inputs and the upstream gradient whose data are not 16-byte aligned are
copied first: see :func:`_aligned` for the SDPA failure that made this necessary. SDPA runs, forward
and backward, under ``torch.use_deterministic_algorithms(True)``: see :class:`_SDPA`.
SDPA has no packed-sequence API, so ``attention_varlen`` calls it once per sequence
(``[heads, n, d]`` views of the packed tensors; a sequence with no queries produces nothing) and
packs the results; it has no ``attention_varlen_with_lse`` either.

Why not one call on the padded batch with the varlen mask as a boolean ``attn_mask``: that is what
this adapter did first, and a 5-minute ``python -m fuzz run --kernel oracle.adapters.sdpa --profile
nightly`` on the CPU (torch 2.13) failed ``check_varlen_gradients_match_oracle`` on 25 of 601
examples. The shrunk case, ``VarlenCase(seqlens_q=(1, 129, 1), seqlens_k=(1, 129, 1), heads=3,
head_dim=16, dtype='float16', is_causal=True, ...)``, gave a ``dv`` error of 4.1e-3 (1.06 float16
ulp of 4.33) against a bound of 3.8e-3, where the float16 reference's worst error is 8.5e-4: SDPA's
masked float16 backward is less accurate than the error model allows (our kernel passes the same
case). That is a finding about SDPA, kept here; the per-sequence calls test SDPA's plain path,
which the dense checks hold to the same error model, and that is the reference this adapter is for.

Rows that see no key (``bottom_right`` with ``n_q > n_k``): ``CausalBias`` warns that SDPA "will
produce NaNs" there, where the contract asks for 0. It hands the call to the flash op if flash can
take it, else to the memory-efficient op, else to SDPA with the mask materialized. On the CPU (torch
2.13) the math and flash backends give 0 and no gradient (``check_empty_rows`` passes,
``tests/test_adapters.py``); each GPU backend has a kernel of its own for it, which
``check_empty_rows`` judges on a GPU run.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.nn.attention.bias import causal_lower_right

from oracle.dense import ALIGNMENTS
from oracle.varlen import sequence_rows

# Deterministic mode makes cuBLAS (SDPA's math backend) raise unless its workspace is pinned; the
# variable must be set before the first cuBLAS call, so at import, and never over a user's choice.
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

FEATURES = frozenset({"scale", "gqa", "bottom_right", "varlen"})

ALIGNMENT = 16
"""Bytes at which the adapter hands SDPA its tensors' first elements (see :func:`_aligned`)."""


@dataclass(frozen=True)
class Backend:
    """How a module runs SDPA.

    Attributes:
        forced: the one backend SDPA may use, forward and backward (``sdpa_kernel``); ``None``:
            SDPA picks.
        deterministic: run in PyTorch's deterministic mode (:class:`_SDPA`), or with it off, for
            a backend that the mode refuses (cuDNN).
        fused: hand SDPA 4-d ``[batch, heads, n, d]`` inputs whose last dim has stride 1, which
            SDPA's fused backends require of dense inputs (else "No available kernel"). A reshape
            or a copy changes no value.
    """

    forced: SDPBackend | None
    deterministic: bool = True
    fused: bool = False


AUTO = Backend(forced=None)
"""This module's own: SDPA picks, on the inputs as they come (deterministic mode excludes cuDNN)."""


def rows_without_keys(q: torch.Tensor, k: torch.Tensor, is_causal: bool, causal_alignment: str) -> str | None:
    """The reason a backend whose bottom-right path is ``CausalBias``'s mask cannot take a call in
    which some rows see no key (bottom-right causal, ``n_q > n_k``), or None.

    PyTorch documents it: ``causal_lower_right`` warns "Lower right causal bias will produce NaNs in
    the output when seq_len_q > seq_len_kv!". Measured on an H200 (torch 2.11, 2026-12-01, the
    suite's GPU runs): the memory-efficient backend returned NaN outputs and gradients on those
    rows, cuDNN finite values that are not 0 (``check_empty_rows``, ``check_convex_hull``, the
    oracle checks on ``Case(n_q=1023, n_k=257, head_dim=64, leading=(2,), dtype='float16',
    is_causal=True, seed=4, causal_alignment='bottom_right')``); the flash backend, whose own causal
    mask is bottom-right, returned 0 there and passed.
    """
    if is_causal and causal_alignment == "bottom_right" and q.shape[-2] > k.shape[-2]:
        return ("bottom-right causal with n_q > n_k leaves rows with no key, and SDPA documents that "
                "its lower-right causal bias then produces NaNs (torch.nn.attention.bias.causal_lower_right)")
    return None


def _aligned(t: torch.Tensor, unit_last_stride: bool = False) -> torch.Tensor:
    """``t``, or a contiguous copy of it when any of its ``[n, d]`` slices or rows does not start
    16-byte aligned (its first element, or a stride of a dim longer than one, is not a multiple of
    16 bytes), or, with ``unit_last_stride``, when its last dim has a stride other than 1.

    Why: on an H100 with torch 2.11 (CUDA 13), the suite's GPU run found SDPA returning NaN and then
    raising "CUDA error: misaligned address" (which poisons the CUDA context) for float16 inputs of
    the ``offset`` layout, whose data start 37 elements (74 bytes) into their allocation; on an H200
    (2026-11-30) the same error came from the ``gapped`` layout, whose first element is aligned but
    whose slices start at odd element offsets. That is a bug of SDPA's kernel selection, not of the
    math this adapter exists to provide; the copy keeps the reference usable on such inputs (a copy
    changes no value). A forced fused backend also refuses a last dim with stride other than 1 (the
    ``strided`` layout), where SDPA left to pick falls back to its math backend.
    """
    size = t.element_size()
    strides = (stride for dim, stride in zip(t.shape[:-1], t.stride()[:-1]) if dim > 1)
    # stride(-1) even where the last dim has one element: SDPA's fused-kernel checks read it there
    # too (a head dim of 1 with stride 2 found no kernel on the CPU, 2026-12-01).
    unit = not unit_last_stride or t.stride(-1) == 1
    if unit and t.data_ptr() % ALIGNMENT == 0 and all(stride * size % ALIGNMENT == 0 for stride in strides):
        return t
    return t.clone(memory_format=torch.contiguous_format)  # fresh storage: aligned, one copy


@contextlib.contextmanager
def _mode(backend: Backend):
    """The backend's deterministic setting (then the caller's back) and, if it forces one, its SDPA
    backend."""
    was = torch.are_deterministic_algorithms_enabled()
    warn_only = torch.is_deterministic_algorithms_warn_only_enabled()
    torch.use_deterministic_algorithms(backend.deterministic)
    try:
        with sdpa_kernel(backend.forced) if backend.forced is not None else contextlib.nullcontext():
            yield
    finally:
        torch.use_deterministic_algorithms(was, warn_only=warn_only)


def _sdpa(q, k, v, is_causal: bool, scale: float | None, causal_alignment: str) -> torch.Tensor:
    """One SDPA call with the contract's features in SDPA's own terms (the module docstring)."""
    if causal_alignment not in ALIGNMENTS:
        raise ValueError(f"causal_alignment must be one of {ALIGNMENTS}, got {causal_alignment!r}")
    grouped = q.dim() >= 3 and q.shape[-3] != k.shape[-3]
    kwargs = {"scale": scale, **({"enable_gqa": True} if grouped else {})}
    n_q, n_k = q.shape[-2], k.shape[-2]
    if is_causal and causal_alignment == "bottom_right" and n_q != n_k:
        return F.scaled_dot_product_attention(q, k, v, attn_mask=causal_lower_right(n_q, n_k), **kwargs)
    return F.scaled_dot_product_attention(q, k, v, is_causal=is_causal, **kwargs)


class _SDPA(torch.autograd.Function):
    """SDPA with its forward and its backward run in the backend's mode (:func:`_mode`).

    Why deterministic mode: by default SDPA's CUDA backwards (flash and memory-efficient) sum ``dq``
    with atomics, so two calls on the same inputs differ in the last bits. The suite's GPU run on an
    H200 caught exactly that (``check_deterministic``; and ``check_varlen_no_leakage``, whose other
    sequences' ``dq`` changed). Determinism is part of the contract this suite checks, and PyTorch's
    documented way to get it from SDPA is ``torch.use_deterministic_algorithms(True)`` (it then skips
    cuDNN and makes the flash and memory-efficient backwards deterministic). The flag, like the
    forced backend, is global and autograd runs a backward later (on CUDA, on another thread), so the
    backward re-enters the mode itself: it differentiates the SDPA call recorded in the forward.
    Inputs and the upstream gradient are handed to SDPA 16-byte aligned (:func:`_aligned`).
    """

    @staticmethod
    def forward(ctx, backend, q, k, v, is_causal, scale, causal_alignment):
        with torch.enable_grad(), _mode(backend):
            inputs = [_aligned(t, backend.fused).detach().requires_grad_(t.requires_grad) for t in (q, k, v)]
            o = _sdpa(*inputs, is_causal, scale, causal_alignment)
        ctx.backend, ctx.graph = backend, (inputs, o)
        return o.detach()

    @staticmethod
    def backward(ctx, do):
        inputs, o = ctx.graph
        wanted = [t for t in inputs if t.requires_grad]
        with _mode(ctx.backend):
            # retain_graph: gradcheck and double calls of backward reuse the recorded call.
            grads = iter(torch.autograd.grad(o, wanted, _aligned(do.contiguous(), ctx.backend.fused),
                                             retain_graph=True))
        return (None, *(next(grads) if t.requires_grad else None for t in inputs), None, None, None)


def _four_d(t: torch.Tensor) -> torch.Tensor:
    """``t`` as ``[batch, heads, n, d]``: leading dims before the heads merged, missing ones added."""
    if t.dim() >= 4:
        return t.reshape(-1, *t.shape[-3:])
    return t.reshape((1,) * (4 - t.dim()) + tuple(t.shape))


def attention_for(backend: Backend) -> Callable[..., torch.Tensor]:
    """The contract's ``attention`` for SDPA run as ``backend`` says (its features: the module
    docstring; it takes no ``window`` or ``softcap``)."""

    def attention(
        q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, is_causal: bool = False, *,
        scale: float | None = None, causal_alignment: str = "top_left",
    ) -> torch.Tensor:
        if not backend.fused:
            return _SDPA.apply(backend, q, k, v, is_causal, scale, causal_alignment)
        o = _SDPA.apply(backend, _four_d(q), _four_d(k), _four_d(v), is_causal, scale, causal_alignment)
        return o.reshape(*q.shape[:-1], v.shape[-1])

    return attention


attention = attention_for(AUTO)


def attention_varlen(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu_seqlens_q: torch.Tensor,
    cu_seqlens_k: torch.Tensor, max_seqlen_q: int, max_seqlen_k: int, is_causal: bool = False,
    **features,
) -> torch.Tensor:
    outs = [q[:0]]
    for rows_q, rows_k in sequence_rows(cu_seqlens_q, cu_seqlens_k):
        heads_first = (t.transpose(0, 1) for t in (q[rows_q], k[rows_k], v[rows_k]))
        outs.append(attention(*heads_first, is_causal, **features).transpose(0, 1))
    return torch.cat(outs)
