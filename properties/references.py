"""References a call keeps: none to the caller's tensors once the caller has let go of them.

A kernel that caches by tensor (``functools.lru_cache`` on a tensor argument, a dict keyed by the
tensor, the last call's inputs kept for a debugging replay, an autograd graph parked on the module)
is right in every output and keeps alive every batch it has seen: in a training or serving loop,
device memory the caller freed stays taken, until the process runs out. No other check can see it:
they hold their tensors to the end. :func:`check_no_references_kept` watches the *storages* (through
``torch.multiprocessing.reductions.StorageWeakRef``, which holds none), so a reference kept anywhere
counts, in Python or in C++ (a saved tensor of a kept graph), on the CPU and on CUDA alike.

Not one of :data:`properties.ALL_CHECKS`: each case ends with a full garbage collection (a large
process takes a noticeable time), so ``tests/test_references.py`` runs it on a few cases, each path
of a kernel (dense, causal, one query row, packed) once. A kernel may keep memory of its own (a
workspace, a table of tiles); only the caller's tensors and the results it handed out are watched.
"""

from __future__ import annotations

import gc
from types import ModuleType

import torch
from torch.multiprocessing.reductions import StorageWeakRef

from properties import _common
from properties.kernels import default_device, gated, require_varlen
from properties.varlen import _results
from properties.varlen_case import VarlenCase


@gated
def check_no_references_kept(kernel: ModuleType, case, device=None) -> None:
    """After a round of calls (``o`` and the lse outside autograd, ``attention`` outside autograd, a
    call with gradients recorded and its backward; the packed entry points for a
    :class:`~properties.varlen_case.VarlenCase`), the caller drops every tensor it made and got and
    collects garbage: then none of their storages may be alive (the inputs', ``cu_seqlens``', the
    upstream gradient's, and each result's)."""
    ctx = _common.context("check_no_references_kept", kernel, case)
    run = _dense_round
    if isinstance(case, VarlenCase):
        require_varlen(kernel)
        run = _packed_round
    with _common.crash_is_failure(ctx, "the round of calls"):
        watched = run(kernel, case, torch.device(device or default_device()))  # its tensors die with it
    gc.collect()
    alive = [name for name, ref in watched.items() if not ref.expired()]
    if alive:
        raise AssertionError(
            f"{ctx}: the memory of {', '.join(alive)} is still alive after the caller dropped every tensor "
            f"of a round of calls and collected garbage ({len(alive)} of {len(watched)} storages "
            "watched): the kernel keeps a reference to it (a cache keyed by tensor, an lru_cache on a "
            "tensor argument, a kept autograd graph), so every batch it sees stays in memory (bound: "
            "none kept)")


def _watch(tensors: dict) -> dict[str, StorageWeakRef]:
    """A weak reference to each tensor's storage (None skipped), by name."""
    return {name: StorageWeakRef(t.untyped_storage()) for name, t in tensors.items() if t is not None}


def _dense_round(kernel: ModuleType, case, device: torch.device) -> dict[str, StorageWeakRef]:
    q, k, v = case.make_qkv(device)
    do = case.make_grad_out(q.device)
    f = case.features()
    results = _common.results_and_plain_call(kernel, q, k, v, do, case.is_causal, f)
    return _watch({"q": q, "k": k, "v": v, "the upstream gradient": do, **results})


def _packed_round(kernel: ModuleType, case: VarlenCase, device: torch.device) -> dict[str, StorageWeakRef]:
    x = case.make_qkv(device)
    do = case.make_grad_out(x.q.device)
    results = _results(kernel, x, do, case)
    return _watch({"q": x.q, "k": x.k, "v": x.v, "cu_seqlens_q": x.cu_seqlens_q,
                   "cu_seqlens_k": x.cu_seqlens_k, "the upstream gradient": do, **results})
