"""Kernel module: PyTorch's ``scaled_dot_product_attention``, whatever backend it picks.

It has no ``attention_with_lse`` (SDPA does not return the lse), so tests that need one skip for
this module and say why.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, is_causal: bool = False
) -> torch.Tensor:
    return F.scaled_dot_product_attention(q, k, v, is_causal=is_causal)
