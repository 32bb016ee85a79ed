"""Kernel module with one bug: query head ``h`` reads kv head ``h % h_kv`` instead of
``h // (h_q // h_kv)`` (k and v tiled across the groups instead of repeated within each).

With one kv head, or as many as query heads, both rules agree; the smallest input that shows it has
``h_q = 4``, ``h_kv = 2`` (query heads 1 and 2 read the wrong head).
"""

import torch

from tests.broken._features import variant


def kv_heads(q, t):
    if t.dim() < 3 or t.shape[-3] == q.shape[-3]:
        return t
    return torch.cat([t] * (q.shape[-3] // t.shape[-3]), dim=-3)  # the bug: tiled, not interleaved


_module = variant(__name__ + "._impl", kv_heads=kv_heads)
FEATURES, SUPPORTED_DTYPES = _module.FEATURES, _module.SUPPORTED_DTYPES
attention, attention_with_lse = _module.attention, _module.attention_with_lse
