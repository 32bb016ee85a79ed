"""Flash Attention in Triton: a forward kernel, its autograd wrapper, and the kernel-module contract.

This package is itself a *kernel module* as the test suite understands it: it has
``attention(q, k, v, is_causal=False) -> o`` and ``attention_with_lse(...) -> (o, lse)``.
Without CUDA, the kernel runs in Triton's interpreter on CPU tensors (see :mod:`flash._runtime`).
"""

from flash._runtime import INTERPRET
from flash.checks import MAX_HEAD_DIM, SUPPORTED_DTYPES
from flash.forward import ForwardConfig, flash_attention_forward, forward_config
from flash.function import FlashAttention, attention, attention_with_lse

__all__ = [
    "INTERPRET",
    "MAX_HEAD_DIM",
    "SUPPORTED_DTYPES",
    "FlashAttention",
    "ForwardConfig",
    "attention",
    "attention_with_lse",
    "flash_attention_forward",
    "forward_config",
]
