"""Flash Attention in Triton: forward and backward kernels, autograd wrapper, kernel-module contract.

This package is itself a *kernel module* as the test suite understands it: it has
``attention(q, k, v, is_causal=False) -> o`` and ``attention_with_lse(...) -> (o, lse)``, and the
packed variable-length pair ``attention_varlen`` / ``attention_varlen_with_lse`` (:mod:`flash.varlen`).
Gradients come from the Triton backward (:mod:`flash.backward_triton`) by default; the spec's dense
PyTorch backward (:mod:`flash.backward`) is chosen per call with ``backward="dense"``, or as a kernel
module of its own, :mod:`flash.with_dense_backward` (``pytest --kernel flash.with_dense_backward``).
A call with a few query rows over many keys (decoding) takes the split-KV forward of
:mod:`flash.decode`; the kernel module :mod:`flash.split_kv` takes it on every call it can.
Without CUDA, the kernel runs in Triton's interpreter on CPU tensors (see :mod:`flash._runtime`).
"""

from flash._runtime import INTERPRET
from flash.backward_triton import BackwardConfig, backward_config, flash_attention_backward
from flash.checks import MAX_HEAD_DIM, SUPPORTED_DTYPES
from flash.forward import ForwardConfig, flash_attention_forward, forward_config
from flash.function import FlashAttention, attention, attention_with_lse
from flash.varlen import FlashAttentionVarlen, attention_varlen, attention_varlen_with_lse

BATCH_INVARIANT = True
"""Each leading-dim slice is computed by its own programs, so batching never changes a bit."""

FEATURES = frozenset({"scale", "gqa", "window", "softcap", "bottom_right", "varlen"})
"""Every feature of the contract (``properties/kernels.py``), in the dense and the packed entry
points, forward and backward (:mod:`flash.scores` says how the kernels see them)."""

MIN_HEAD_DIM = 1

__all__ = [
    "BATCH_INVARIANT",
    "FEATURES",
    "INTERPRET",
    "MAX_HEAD_DIM",
    "MIN_HEAD_DIM",
    "SUPPORTED_DTYPES",
    "BackwardConfig",
    "FlashAttention",
    "FlashAttentionVarlen",
    "ForwardConfig",
    "attention",
    "attention_varlen",
    "attention_varlen_with_lse",
    "attention_with_lse",
    "backward_config",
    "flash_attention_backward",
    "flash_attention_forward",
    "forward_config",
]
