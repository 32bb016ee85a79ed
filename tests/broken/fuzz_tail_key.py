"""Kernel module with one bug, for the fuzzer to find: a lone key in the last tile is read twice.

When ``n_k % 64 == 1`` and ``n_k > 1`` (a full 64-key tile, then a tail tile holding one key), the
last key's value row counts double, as if a tail-tile mask were off by one. Every other length is
the correct kernel, so the smallest input that shows the bug has ``n_k = 65``; the fuzzer must find
it, shrink to it, save it, and replay it (``tests/test_fuzz_end_to_end.py``).
"""

import torch

import flash


def _break(v: torch.Tensor) -> torch.Tensor:
    n_k = v.shape[-2]
    if n_k % 64 == 1 and n_k > 1:
        v = torch.cat([v[..., :-1, :], 2 * v[..., -1:, :]], dim=-2)
    return v


def attention_with_lse(q, k, v, is_causal=False):
    return flash.attention_with_lse(q, k, _break(v), is_causal)


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, is_causal: bool = False):
    return flash.attention(q, k, _break(v), is_causal)
