"""Kernel module with one bug: the softcap is applied only to the keys of the last, partial key tile
(16 keys), as in a kernel that caps scores in its masked path and forgets the unmasked one.

With ``n_k <= 16`` every key is in that tile and it is right; the smallest input that shows it has
more than 16 keys, a softcap, and uncapped scores beyond it.
"""

import torch

from tests.broken._features import variant

TILE = 16


def cap(s, softcap):
    n_k = s.shape[-1]
    last = torch.arange(n_k, device=s.device) >= ((n_k - 1) // TILE) * TILE
    return torch.where(last, softcap * torch.tanh(s / softcap), s)  # the bug: other tiles uncapped


_module = variant(__name__ + "._impl", cap=cap)
FEATURES, SUPPORTED_DTYPES = _module.FEATURES, _module.SUPPORTED_DTYPES
attention, attention_with_lse = _module.attention, _module.attention_with_lse
