"""Kernel module: the Triton forward with the spec's dense PyTorch backward.

The same forward as :mod:`flash`, backpropagated by :func:`flash.backward.flash_attention_backward`
(dense, from the saved lse, ``torch.compile``-d under CUDA) instead of the Triton backward that is
``flash``'s default. It exists so the suite gates both backward passes:

    python -m pytest --kernel flash.with_dense_backward

Equivalent per call: ``flash.attention(q, k, v, is_causal, backward="dense")``.
"""

from __future__ import annotations

import torch

from flash import MAX_HEAD_DIM, MIN_HEAD_DIM, SUPPORTED_DTYPES  # noqa: F401  (the same limits)
from flash import function as _function


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, is_causal: bool = False,
              **features) -> torch.Tensor:
    """:func:`flash.attention` with ``backward="dense"`` (the same feature arguments)."""
    return _function.attention(q, k, v, is_causal, backward="dense", **features)


def attention_with_lse(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, is_causal: bool = False,
                       **features) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`flash.attention_with_lse` with ``backward="dense"``."""
    return _function.attention_with_lse(q, k, v, is_causal, backward="dense", **features)

BATCH_INVARIANT = True
"""The same forward as :mod:`flash`: each leading-dim slice is computed by its own programs."""

FEATURES = frozenset({"scale", "gqa", "window", "softcap", "bottom_right"})
"""flash's features but packed batches (this module has no varlen entry points)."""
