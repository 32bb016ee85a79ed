"""The attention implementations the speed benchmarks time, by the name they report under.

- ``kernel``: ``attention(q, k, v, is_causal)`` of the kernel module under benchmark
  (``--bench-kernel``, default ``flash``; its name is recorded in ``extra_info["kernel_module"]``,
  never in the benchmark's name, so runs of different kernels compare by name);
- ``sdpa_flash``, ``sdpa_cudnn``: ``torch.nn.functional.scaled_dot_product_attention`` held to
  its FlashAttention or its cuDNN backend (``torch.nn.attention.sdpa_kernel``);
- ``flex``: FlexAttention, ``torch.compile(flex_attention, dynamic=False)`` on CUDA (one static
  graph per shape, dtype and grad mode, as a model that compiles its attention gets; eager
  ``flex_attention`` on the CPU, forward only), with a causal block mask when causal; the graph
  and the block mask are made by the benchmark's first, untimed call (:func:`flex_attention`);
- ``dense``: attention written out in PyTorch in the inputs' own dtype, the oracle's formula
  (:func:`oracle.dense.dense_scores`, softmax, matmul), which materializes ``n x n`` scores;
- ``torch_eager``, ``torch_compile``: the same plain PyTorch attention, eagerly and under
  ``torch.compile`` (the baseline a Triton kernel is trying to beat).

Every backend is a :class:`Backend`: a function of ``(q, k, v, is_causal)`` and the context it
runs in (the SDPA backend choice), entered once around a whole measurement.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType

import torch
import torch.nn.functional as F

from benchmarks.features import compiled_flex, mask_mod
from benchmarks.shapes import Pass, Shape
from oracle.dense import dense_scores

Attention = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, bool], torch.Tensor]

ATTENTION_BACKENDS = ("kernel", "sdpa_flash", "sdpa_cudnn", "flex", "dense")
"""Backends of ``test_attention_speed.py``, in the order they run for each shape."""
BASELINE_BACKENDS = ("torch_eager", "torch_compile")
"""Backends of ``test_baseline_speed.py``."""

DENSE_BACKENDS = frozenset({"dense", "torch_eager", "torch_compile"})
"""Backends that materialize ``n x n`` matrices, so may not fit in memory."""
SDPA_BACKENDS = frozenset({"sdpa_flash", "sdpa_cudnn"})
"""Backends that refuse (``RuntimeError``) the shapes or dtypes they do not support."""


@dataclass(frozen=True)
class Backend:
    name: str
    fn: Attention
    context: Callable[[], contextlib.AbstractContextManager] = contextlib.nullcontext


def plain_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, is_causal: bool = False
) -> torch.Tensor:
    """``softmax(q k^T / sqrt(d)) v`` in the inputs' dtype, with the oracle's scores and mask."""
    return torch.matmul(torch.softmax(dense_scores(q, k, is_causal), dim=-1), v)


def _sdpa(q, k, v, is_causal):
    # enable_gqa only where the heads differ (the decode shapes): the grids' calls stay plain.
    gqa = q.shape[-3] != k.shape[-3]
    extra = {"enable_gqa": True} if gqa else {}
    return F.scaled_dot_product_attention(q, k, v, is_causal=is_causal, **extra)


@functools.cache
def _compiled_attention() -> Attention:
    # dynamic=True: one graph per (dtype, causal, grad mode) serves every shape, so compilation
    # stays a few seconds per graph instead of one per shape. The matmuls go to cuBLAS either
    # way; what Inductor generates is the fused scale/mask/softmax. Dynamo's recompile limit
    # (8 per code object by default) is raised so no combination silently falls back to eager.
    import torch._dynamo.config as dynamo_config

    for name in ("recompile_limit", "cache_size_limit"):
        if hasattr(dynamo_config, name):
            setattr(dynamo_config, name, max(getattr(dynamo_config, name), 64))
            break
    return torch.compile(plain_attention, dynamic=True)


@functools.cache
def _causal_block_mask(n_q: int, n_k: int, device: torch.device):
    from torch.nn.attention.flex_attention import create_block_mask

    return create_block_mask(mask_mod(True), None, None, n_q, n_k, device=device)


def flex_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, is_causal: bool = False
) -> torch.Tensor:
    """FlexAttention on the contract's call (top-left causal): compiled on CUDA, eager on the CPU.
    The causal block mask is built once per length and device (cached), so only the benchmark's
    untimed first call of a shape pays for it, as it pays for the compilation."""
    from torch.nn.attention.flex_attention import flex_attention as eager

    mask = _causal_block_mask(q.shape[-2], k.shape[-2], q.device) if is_causal else None
    flex = compiled_flex() if q.device.type == "cuda" else eager
    return flex(q, k, v, block_mask=mask, enable_gqa=q.shape[-3] != k.shape[-3])


def get_backend(name: str, kernel: ModuleType) -> Backend:
    """The backend called ``name``; ``kernel`` is the kernel module under benchmark."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    if name == "kernel":
        return Backend(name, kernel.attention)
    if name == "sdpa_flash":
        return Backend(name, _sdpa, functools.partial(sdpa_kernel, SDPBackend.FLASH_ATTENTION))
    if name == "sdpa_cudnn":
        return Backend(name, _sdpa, functools.partial(sdpa_kernel, SDPBackend.CUDNN_ATTENTION))
    if name == "flex":
        return Backend(name, flex_attention)
    if name in ("dense", "torch_eager"):
        return Backend(name, plain_attention)
    if name == "torch_compile":
        return Backend(name, _compiled_attention())
    raise ValueError(f"unknown backend {name!r}")


DENSE_MATRICES = {"fwd": 3, "fwd+bwd": 4}
"""``n x n`` matrices a dense backend holds at its peak, with room to spare: the forward holds the
scores and the probabilities (2), forward+backward the saved probabilities and two gradients (3)."""


def dense_memory_reason(shape: Shape, pass_: Pass, free_bytes: int) -> str | None:
    """Why a dense backend cannot run ``shape`` in ``free_bytes`` of device memory, or None if it fits."""
    elem = torch.finfo(shape.torch_dtype).bits // 8
    matrix = shape.batch * shape.heads * shape.seq_len**2 * elem
    need = DENSE_MATRICES[pass_] * matrix
    if need <= free_bytes:
        return None
    return (f"dense attention does not fit: {pass_} holds about {DENSE_MATRICES[pass_]} n x n matrices "
            f"of {matrix / 2**30:.1f} GiB each (batch {shape.batch} x heads {shape.heads} x "
            f"{shape.seq_len}^2 in {shape.dtype}), {need / 2**30:.0f} GiB; "
            f"{free_bytes / 2**30:.0f} GiB free on the device")
