"""The cache every "kept from an earlier call" broken module uses: by tensor object.

A value made from some tensors is kept and handed out again whenever the *same tensor objects*
come back (their identity, checked through weak references, so a freed object's recycled ``id``
is not taken for it), as ``functools.lru_cache`` on tensor arguments would key it. That is each
of these modules' bug: identity says nothing of what the tensors hold now, after an in-place
update. (Not by address: a fresh tensor at a freed one's address would get the old copy, and the
module would fail checks that are not about in-place updates.)
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

import torch


def kept(cache: dict, tensors: tuple[torch.Tensor, ...], make: Callable[[], Any]) -> Any:
    """``make()`` the first time ``tensors`` (these objects) are seen; the same value after."""
    key = tuple(id(t) for t in tensors)
    hit = cache.get(key)
    if hit is None or any(ref() is not t for ref, t in zip(hit[0], tensors)):
        hit = cache[key] = (tuple(weakref.ref(t) for t in tensors), make())
    return hit[1]
