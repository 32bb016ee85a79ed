"""Kernel module: SDPA held to its memory-efficient backend (``SDPBackend.EFFICIENT_ATTENTION``,
the xFormers CUTLASS kernels), CUDA only.

Features: ``scale`` and ``bottom_right`` (``CausalBias`` calls ``_efficient_attention_forward``
itself with its lower-right ``custom_mask_type``). Not ``gqa``: in torch 2.11 the backend rejects
k and v with fewer heads than q (``check_batch_size_and_num_heads_dense<false>``; GQA for it landed
after 2.11, pytorch/pytorch#191085), so a grouped call would be "No available kernel". Declared
limits, from ``can_use_mem_efficient_attention`` (``sdp_utils.cpp``): float16, bfloat16 and
float32 (bfloat16 needs sm80 or newer), CUDA only (``DEVICE_TYPES``: a CPU case is n/a). Inputs go to
SDPA as ``[batch, heads, n, d]`` with a unit last stride, 16-byte aligned (the backend checks the
storage offset too, ``check_data_ptr_alignment_mem_efficient``). Forward and backward run in
deterministic mode (the backward then sums ``dq`` without atomics).

Declared by :func:`unsupported` (n/a, with the reason): bottom-right causal calls with ``n_q > n_k``
(:func:`oracle.adapters.sdpa.rows_without_keys`: SDPA documents NaNs there, and this backend gave
wrong rows on an H200); a head dim that is not a multiple of 8
(float16, bfloat16) or of 4 (float32) on sm80 or newer (``check_head_dim_size_mem_efficient``: SDPA
does not pad the head dim for this backend).
"""

from __future__ import annotations

import torch
from torch.nn.attention import SDPBackend

from oracle.adapters.sdpa import Backend, attention_for, rows_without_keys

FEATURES = frozenset({"scale", "bottom_right"})
SUPPORTED_DTYPES = (torch.float16, torch.bfloat16, torch.float32)
DEVICE_TYPES = frozenset({"cuda"})

attention = attention_for(Backend(SDPBackend.EFFICIENT_ATTENTION, fused=True))


def unsupported(q, k, v, is_causal=False, *, causal_alignment="top_left", **features) -> str | None:
    """Why SDPA's memory-efficient backend does not take this call (the contract's ``unsupported``)."""
    multiple = 4 if q.dtype == torch.float32 else 8
    if q.shape[-1] % multiple:
        dtype = str(q.dtype).removeprefix("torch.")
        return (f"SDPA's memory-efficient backend needs a head dim that is a multiple of {multiple} for "
                f"{dtype} (check_head_dim_size_mem_efficient), got {q.shape[-1]}")
    return rows_without_keys(q, k, is_causal, causal_alignment)
