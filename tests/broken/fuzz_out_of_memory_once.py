"""Kernel module whose first call raises CUDA out of memory, as a call does on a card the other
workers of a run fill; then (and in ``attention_with_lse`` always) the correct kernel.

``FLASH_TEST_OOM_STATE``: a directory where the first call leaves its mark (each call raises while the
mark is absent); ``FLASH_TEST_OOM_ALWAYS=1`` raises on every call instead, as a kernel that needs more
than the card has. ``fuzz.isolation.run_check`` must run such a check again, alone on the card, and
give that run's verdict (``tests/test_isolation.py``).
"""

import os
import pathlib

import torch

import flash


def _maybe_out_of_memory() -> None:
    mark = pathlib.Path(os.environ["FLASH_TEST_OOM_STATE"]) / "raised"
    if os.environ.get("FLASH_TEST_OOM_ALWAYS") == "1" or not mark.exists():
        mark.touch()
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 8.94 GiB (raised by hand)")


def attention_with_lse(q, k, v, is_causal=False):
    return flash.attention_with_lse(q, k, v, is_causal)


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, is_causal: bool = False):
    _maybe_out_of_memory()
    return flash.attention(q, k, v, is_causal)
