"""Kernel modules: loading one by name, and what a check does when a module lacks a capability.

A *kernel module* is any importable module with
``attention(q, k, v, is_causal=False) -> o`` (differentiable in q, k, v) and, optionally,
``attention_with_lse(q, k, v, is_causal=False) -> (o, lse)`` with ``lse`` float32 of shape
``q.shape[:-1]``, and, optionally, ``BATCH_INVARIANT = True``: a promise that each leading-dim
slice is computed on its own, so a slice computed alone is bit-for-bit its part of a batched call
(``check_batch_independent`` then demands exactly that).
"""

from __future__ import annotations

import importlib
from types import ModuleType

DEFAULT_KERNEL = "flash"


class NotApplicable(Exception):
    """A check cannot run against this kernel (for example, it has no ``attention_with_lse``)."""


def load_kernel(name: str) -> ModuleType:
    """Import the kernel module ``name`` and check that it has ``attention``."""
    module = importlib.import_module(name)
    if not callable(getattr(module, "attention", None)):
        raise TypeError(f"kernel module {name!r} has no callable attention(q, k, v, is_causal)")
    return module


def kernel_name(kernel: ModuleType) -> str:
    return kernel.__name__


def require_lse(kernel: ModuleType):
    """The module's ``attention_with_lse``, or :class:`NotApplicable` saying it has none."""
    fn = getattr(kernel, "attention_with_lse", None)
    if fn is None:
        raise NotApplicable(
            f"kernel module {kernel_name(kernel)} has no attention_with_lse, so its lse cannot be checked"
        )
    return fn
