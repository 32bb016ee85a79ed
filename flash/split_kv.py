"""Kernel module: :mod:`flash` with its split-KV forward (:mod:`flash.decode`) on every call it can take.

``flash`` takes the split-KV path only for a few query rows over many keys (at most 16 rows per
head, 512 keys per split, two splits at least), which the CPU suite's short lengths rarely reach.
This module asks for splits of 16 keys, so every call (and every packed sequence) with at most 16
query rows and 32 keys in its band is cut in splits of one 16-key tile each and merged: the merge
meets many splits, and empty ones (a window or a causal diagonal that a split does not reach for
some row). The suite gates it like any kernel:

    python -m pytest --kernel flash.split_kv

Equivalent per call: ``flash.attention(q, k, v, is_causal, split_keys=16)`` (and
``attention_varlen``). Calls with more rows take ``flash``'s forward; the backward is ``flash``'s.
"""

from __future__ import annotations

import torch

from flash import BATCH_INVARIANT, MAX_HEAD_DIM, MIN_HEAD_DIM, SUPPORTED_DTYPES  # noqa: F401
from flash import function as _function
from flash import varlen as _varlen

SPLIT_KEYS = 16
"""Keys per split: one key tile of the smallest size."""


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, is_causal: bool = False,
              **features) -> torch.Tensor:
    """:func:`flash.attention` with ``split_keys=16`` (the same feature arguments)."""
    return _function.attention(q, k, v, is_causal, split_keys=SPLIT_KEYS, **features)


def attention_with_lse(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, is_causal: bool = False,
                       **features) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`flash.attention_with_lse` with ``split_keys=16``."""
    return _function.attention_with_lse(q, k, v, is_causal, split_keys=SPLIT_KEYS, **features)


def attention_varlen(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *args,
                     **features) -> torch.Tensor:
    """:func:`flash.attention_varlen` with ``split_keys=16``."""
    return _varlen.attention_varlen(q, k, v, *args, split_keys=SPLIT_KEYS, **features)


def attention_varlen_with_lse(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *args,
                              **features) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`flash.attention_varlen_with_lse` with ``split_keys=16``."""
    return _varlen.attention_varlen_with_lse(q, k, v, *args, split_keys=SPLIT_KEYS, **features)


FEATURES = frozenset({"scale", "gqa", "window", "softcap", "bottom_right", "varlen"})
"""flash's features."""
