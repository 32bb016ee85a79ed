"""Kernel module: SDPA held to its flash backend (``SDPBackend.FLASH_ATTENTION``): FlashAttention-2
on CUDA, ``_scaled_dot_product_flash_attention_for_cpu`` on the CPU.

Features: ``scale``, ``gqa`` (flash is the backend ``enable_gqa`` was written for) and
``bottom_right`` (``CausalBias`` calls the flash op itself, whose ``is_causal`` is bottom-right
aligned). Declared limits, from SDPA's backend selection (``can_use_flash_attention`` in
``aten/src/ATen/native/transformers/cuda/sdp_utils.cpp``): float16 and bfloat16 only on CUDA
(``check_dtypes_flash_attention``; the CPU kernel also takes float32 and float64, but the contract's
limits are one set for every device), head dim at most 256 (``check_head_dim_size_flash``; SDPA pads
smaller ones to a multiple of 8 itself). Inputs go to SDPA as ``[batch, heads, n, d]`` with a unit
last stride (reshaped, or copied where a reshape cannot; see :class:`oracle.adapters.sdpa.Backend`).
Forward and backward run in deterministic mode (flash's backward then sums ``dq`` without atomics).

Declared by :func:`unsupported` (n/a, with the reason): on CUDA, ``is_causal`` with ``n_q != n_k``
top-left aligned (``check_flash_causal_non_square_seqlens``: FlashAttention-2's causal mask is
bottom-right aligned, and SDPA will not hand it top-left non-square problems). Not declared, and so
a failure ("No available kernel") where it applies: on sm86-sm89 GPUs only, a backward with head
dim in (192, 224] (the suite's GPU runs are on an H200, sm90). Nor declared: a zero or negative
``scale`` (the contract allows any finite one), for which this backend returned non-finite outputs
on an H200 (``docs/findings.md``, finding 18): a wrong answer, for the gate to show.
"""

from __future__ import annotations

import torch
from torch.nn.attention import SDPBackend

from oracle.adapters.sdpa import Backend, attention_for

FEATURES = frozenset({"scale", "gqa", "bottom_right"})
SUPPORTED_DTYPES = (torch.float16, torch.bfloat16)
MAX_HEAD_DIM = 256

attention = attention_for(Backend(SDPBackend.FLASH_ATTENTION, fused=True))


def unsupported(q, k, v, is_causal=False, *, causal_alignment="top_left", **features) -> str | None:
    """Why SDPA's flash backend does not take this call (the contract's ``unsupported``), or None."""
    if q.is_cuda and is_causal and causal_alignment == "top_left" and q.shape[-2] != k.shape[-2]:
        return ("SDPA's flash backend takes no top-left causal call with n_q != n_k on CUDA "
                "(check_flash_causal_non_square_seqlens)")
    return None
