"""Kernel module with one bug: each call visits the heads in a random order (a load-balancing
schedule), drawn from the caller's default generator (``torch.randperm`` without a generator of its
own), so every call advances the caller's random state.

Each head is computed alone, so the order changes no bit of any output. What it breaks is the
caller's reproducibility: a seeded training run draws other dropout masks, another sampled token,
depending on how many attention calls came before. Smallest input that shows it:
``torch.get_rng_state()`` before and after one call.
"""

import torch

from tests.broken import _float32


def _heads(q: torch.Tensor) -> int:
    return q.shape[-3] if q.dim() >= 3 else 1


def attention_with_lse(q, k, v, is_causal=False):
    order = torch.randperm(_heads(q)).tolist()  # the bug: the caller's generator, not one of its own
    if q.dim() < 3:
        return _float32.attention_with_lse(q, k, v, is_causal)
    parts = {}
    for h in order:
        parts[h] = _float32.attention_with_lse(q[..., h, :, :], k[..., h, :, :], v[..., h, :, :], is_causal)
    o = torch.stack([parts[h][0] for h in range(len(order))], dim=-3)
    lse = torch.stack([parts[h][1] for h in range(len(order))], dim=-2)
    return o, lse


def attention(q, k, v, is_causal=False):
    return attention_with_lse(q, k, v, is_causal)[0]
