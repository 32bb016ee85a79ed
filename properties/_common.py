"""Helpers shared by the invariant checks: messages, placing new tensors, bounds for one output."""

from __future__ import annotations

from types import ModuleType

import torch

from oracle.dense import dense_attention
from properties import error_model as em
from properties.case import MIXED, Case, arrange
from properties.kernels import kernel_name


def context(check: str, kernel: ModuleType, case: Case) -> str:
    """The start of every message: which check, which kernel, which case (a replayable line)."""
    return f"{check} failed for kernel {kernel_name(kernel)} on {case}"


def place(t: torch.Tensor, case: Case, device, name: str) -> torch.Tensor:
    """A new input tensor ``name`` (q, k, v or do; built on the CPU, row-major) in the case's layout.

    ``broadcast_kv`` describes how k and v share memory, which a made-up tensor cannot; it is
    placed contiguously. Under ``mixed``, each tensor takes its own layout from ``case.MIXED``.
    """
    layout = case.layout
    if layout == "broadcast_kv":
        layout = "contiguous"
    elif layout == "mixed":
        layout = MIXED[name]
    return arrange(t, layout, device)


def forward(kernel: ModuleType, q, k, v, is_causal: bool):
    """``(o, lse)``, or ``(o, None)`` for a kernel module without ``attention_with_lse``."""
    with torch.no_grad():
        fn = getattr(kernel, "attention_with_lse", None)
        if fn is None:
            return kernel.attention(q, k, v, is_causal), None
        return fn(q, k, v, is_causal)


def output_bound(q, k, v, is_causal: bool) -> tuple[float, str]:
    """The error model's bound on one kernel output for these inputs (as the oracle check uses)."""
    with torch.no_grad():
        o64, _ = dense_attention(q, k, v, is_causal)
        o_ref, _ = dense_attention(q, k, v, is_causal, compute_dtype=None)
    return em.error_bound(em.OUTPUT, o_ref, o64, dtype=q.dtype, **em.output_scales(q, k, v))


def lse_bound(q, k, is_causal: bool) -> tuple[float, str]:
    """The error model's bound on one kernel lse for these inputs (as the oracle check uses)."""
    with torch.no_grad():  # the lse does not depend on v; k stands in for it
        _, lse64 = dense_attention(q, k, k, is_causal)
        _, lse_ref = dense_attention(q, k, k, is_causal, compute_dtype=None)
    return em.error_bound(em.LSE, lse_ref, lse64, dtype=q.dtype, **em.lse_scales(q, k, lse64))


def rows_to_keep(case: Case) -> int:
    """A split row ``t`` inside both lengths: rows ``<= t`` and keys ``> t`` both exist when possible."""
    return max(0, (min(case.n_q, case.n_k) - 1) // 2)
