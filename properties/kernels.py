"""Kernel modules: loading one by name, and what a check does when a module lacks a capability.

A *kernel module* is any importable module with
``attention(q, k, v, is_causal=False) -> o`` (differentiable in q, k, v) and, optionally,
``attention_with_lse(q, k, v, is_causal=False) -> (o, lse)`` with ``lse`` float32 of shape
``q.shape[:-1]``, and, optionally, ``BATCH_INVARIANT = True``: a promise that each leading-dim
slice is computed on its own, so a slice computed alone is bit-for-bit its part of a batched call
(``check_batch_independent`` then demands exactly that).

Optionally too, packed variable-length batches (:mod:`properties.varlen` checks them):
``attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, is_causal=False)
-> o`` and ``attention_varlen_with_lse(...) -> (o, lse)``, with ``q [total_q, heads, d]``,
``k, v [total_k, heads, d]`` (any strides), ``cu_seqlens_*`` int32 ``[batch + 1]`` offsets on q's
device (0 first, non-decreasing, ``total`` last), ``max_seqlen_*`` ints at least the longest
sequence; ``o`` like q, in q's dtype, differentiable in q, k, v; ``lse [total_q, heads]`` float32.
Sequence ``b``'s queries (rows ``cu_seqlens_q[b]:cu_seqlens_q[b + 1]``) see only its keys, causal
top-left per sequence; a sequence may have no queries (it produces nothing, its keys get zero
gradients), but one with queries and no keys is a ``ValueError``. ``BATCH_INVARIANT = True`` then
also promises that a sequence computed alone through ``attention`` is bit-for-bit its rows of the
packed call (``check_varlen_matches_separate``).
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


def require_varlen(kernel: ModuleType, with_lse: bool = False):
    """The module's ``attention_varlen`` (``attention_varlen_with_lse`` if ``with_lse``), or
    :class:`NotApplicable` saying it has none."""
    name = "attention_varlen_with_lse" if with_lse else "attention_varlen"
    fn = getattr(kernel, name, None)
    if fn is None:
        what = "the lse of packed batches" if with_lse else "packed variable-length batches"
        raise NotApplicable(f"kernel module {kernel_name(kernel)} has no {name}, so {what} cannot be checked")
    return fn
