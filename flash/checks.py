"""Input validation for the public entry points.

Every problem with the arguments is reported here, before any kernel launch, as a ``TypeError``
(wrong kind of object or dtype) or ``ValueError`` (wrong shape, device or size) that names the
argument and what was expected. A bad shape must never reach the kernel: its pointer arithmetic
trusts the sizes and strides it is given, so a mismatch would read out of bounds instead of failing.
"""

from __future__ import annotations

import torch

from flash._runtime import INTERPRET

SUPPORTED_DTYPES = (torch.float16, torch.bfloat16, torch.float32)
MAX_HEAD_DIM = 256


def check_inputs(q: object, k: object, v: object, is_causal: object) -> None:
    """Raise ``TypeError``/``ValueError`` unless ``q, k, v, is_causal`` are a valid attention call."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
        if t.dim() < 2:
            raise ValueError(
                f"{name} must have shape [..., n, d] (rank >= 2), got rank {t.dim()} "
                f"with shape {tuple(t.shape)}"
            )
        if t.dtype not in SUPPORTED_DTYPES:
            raise TypeError(
                f"{name} has dtype {t.dtype}; supported dtypes are float16, bfloat16 and float32"
            )
    if not isinstance(is_causal, bool):
        raise TypeError(f"is_causal must be a bool, got {type(is_causal).__name__}")
    assert isinstance(q, torch.Tensor) and isinstance(k, torch.Tensor) and isinstance(v, torch.Tensor)

    if not (q.dtype == k.dtype == v.dtype):
        raise TypeError(
            f"q, k and v must share one dtype, got q {q.dtype}, k {k.dtype}, v {v.dtype}"
        )
    if not (q.device == k.device == v.device):
        raise ValueError(
            f"q, k and v must be on one device, got q on {q.device}, k on {k.device}, "
            f"v on {v.device}"
        )
    if q.device.type != "cuda" and not INTERPRET:
        raise ValueError(
            f"q is on {q.device}, but the compiled kernel needs CUDA tensors "
            "(set TRITON_INTERPRET=1 before importing flash to run on the CPU)"
        )
    if not (q.shape[:-2] == k.shape[:-2] == v.shape[:-2]):
        raise ValueError(
            "q, k and v must have the same leading dims [...], got "
            f"q {tuple(q.shape[:-2])}, k {tuple(k.shape[:-2])}, v {tuple(v.shape[:-2])} "
            "(broadcast with .expand() first: it costs no copy)"
        )
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(
            f"k and v must have the same length n_k, got k {k.shape[-2]} and v {v.shape[-2]}"
        )
    if not (q.shape[-1] == k.shape[-1] == v.shape[-1]):
        raise ValueError(
            f"q, k and v must have the same head dim d, got q {q.shape[-1]}, "
            f"k {k.shape[-1]}, v {v.shape[-1]}"
        )
    d = q.shape[-1]
    if not 1 <= d <= MAX_HEAD_DIM:
        raise ValueError(f"head dim d = q.shape[-1] must be in [1, {MAX_HEAD_DIM}], got {d}")
    if q.shape[-2] == 0:
        raise ValueError(f"q is empty: n_q = q.shape[-2] must be >= 1, got shape {tuple(q.shape)}")
    if k.shape[-2] == 0:
        raise ValueError(f"k is empty: n_k = k.shape[-2] must be >= 1, got shape {tuple(k.shape)}")
    if q.numel() == 0:
        raise ValueError(f"q has a zero-size leading dim: shape {tuple(q.shape)}")
