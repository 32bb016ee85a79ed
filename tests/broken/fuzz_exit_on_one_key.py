"""Kernel module that kills its process on some shapes, as a GPU kernel's illegal memory access can.

Its ``attention`` calls ``os._exit(3)`` when ``n_k % 64 == 1`` (one key alone in the last tile,
n_k = 1 included); otherwise, and in ``attention_with_lse`` always, it is the correct kernel.
``python -m fuzz run`` must report that as a crash of the case that caused it and go on fuzzing,
in a fresh worker process (``tests/test_fuzz_end_to_end.py``).
"""

import os

import torch

import flash


def _maybe_die(k: torch.Tensor) -> None:
    if k.shape[-2] % 64 == 1:
        os._exit(3)


def attention_with_lse(q, k, v, is_causal=False):
    return flash.attention_with_lse(q, k, v, is_causal)


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, is_causal: bool = False):
    _maybe_die(k)
    return flash.attention(q, k, v, is_causal)
