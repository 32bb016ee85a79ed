"""Kernel module with one bug: the bottom-right causal mask is strict, ``j < c_i`` with
``c_i = i + n_k - n_q``, so each row misses its own diagonal key (top-left is right).

The smallest input that shows it: any causal bottom-right call, ``n_q == n_k`` included.
"""

import torch

from tests import conforming
from tests.broken._features import variant


def visible(n_q, n_k, is_causal, window, causal_alignment, device):
    seen = conforming.visible(n_q, n_k, is_causal, window, causal_alignment, device)
    if is_causal and causal_alignment == "bottom_right":
        i = torch.arange(n_q, device=device)[:, None]
        j = torch.arange(n_k, device=device)[None, :]
        seen = seen & (j != i + n_k - n_q)  # the bug: the diagonal itself is hidden
    return seen


_module = variant(__name__ + "._impl", visible=visible)
FEATURES, SUPPORTED_DTYPES = _module.FEATURES, _module.SUPPORTED_DTYPES
attention, attention_with_lse = _module.attention, _module.attention_with_lse
