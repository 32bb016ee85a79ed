"""Kernel module: SDPA held to its cuDNN backend (``SDPBackend.CUDNN_ATTENTION``), CUDA only.

Features: ``scale``, ``gqa`` (cuDNN takes k and v with fewer heads since pytorch/pytorch#150337,
torch 2.8) and ``bottom_right`` (``CausalBias`` has no cuDNN path of its own: it materializes the
lower-right boolean mask and calls SDPA with it, which cuDNN takes as an additive -inf bias).
Declared limits, from ``can_use_cudnn_attention`` (``sdp_utils.cpp``): float16 and bfloat16
(``check_dtypes_low_precision``), head dim at most 128 (``check_cudnn_tensor_shapes``: 256 only on
sm90/sm100 with cuDNN newer than 9.22, and even there the backward takes no head dim in (128, 256)
but 192 and 256), CUDA only. Inputs go to SDPA as ``[batch, heads, n, d]`` with a unit last stride,
16-byte aligned.

Determinism: PyTorch refuses cuDNN under ``torch.use_deterministic_algorithms(True)``
(``check_cudnn_deterministic``: "cuDNN SDPA is not deterministic"), so this module, unlike the
others here, runs SDPA with deterministic mode off (forward and backward; the caller's setting is
restored after). ``check_deterministic`` is expected to FAIL for it (cuDNN's backward accumulates
``dq`` in an order that varies from call to call). That is a finding about cuDNN, not to be hidden
by the adapter; a pass on a GPU run would be worth recording too. Likewise not declared: a zero or
negative ``scale`` (the contract allows any finite one), for which this backend returned non-finite
outputs on an H200 (``docs/findings.md``, finding 18).

Declared by :func:`unsupported` (n/a, with the reason): bottom-right causal calls with ``n_q > n_k``
(:func:`oracle.adapters.sdpa.rows_without_keys`: SDPA documents NaNs there, and this backend gave
wrong rows on an H200); a head dim that is not a multiple of 8, and
``n_k = 1`` (``check_cudnn_tensor_shapes``: "cudnn SDPA does not support key/value sequence length
1").
"""

from __future__ import annotations

import torch
from torch.nn.attention import SDPBackend

from oracle.adapters.sdpa import Backend, attention_for, rows_without_keys

FEATURES = frozenset({"scale", "gqa", "bottom_right"})
SUPPORTED_DTYPES = (torch.float16, torch.bfloat16)
MAX_HEAD_DIM = 128
DEVICE_TYPES = frozenset({"cuda"})

attention = attention_for(Backend(SDPBackend.CUDNN_ATTENTION, deterministic=False, fused=True))


def unsupported(q, k, v, is_causal=False, *, causal_alignment="top_left", **features) -> str | None:
    """Why SDPA's cuDNN backend does not take this call (the contract's ``unsupported``), or None."""
    if q.shape[-1] % 8:
        return f"SDPA's cuDNN backend needs a head dim that is a multiple of 8, got {q.shape[-1]}"
    if k.shape[-2] == 1:
        return "SDPA's cuDNN backend takes no key/value sequence of length 1 (check_cudnn_tensor_shapes)"
    return rows_without_keys(q, k, is_causal, causal_alignment)
