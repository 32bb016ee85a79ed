"""Where the Triton kernels run: compiled on a CUDA GPU, or in Triton's interpreter on the CPU.

Triton picks between compiling and interpreting when a kernel is *decorated*, by reading
``TRITON_INTERPRET``. So this module must be imported before any ``@triton.jit`` in this package:
without CUDA, it sets ``TRITON_INTERPRET=1`` (unless the user already set it either way), and the
kernels then run on CPU tensors, slowly but with the same code. An explicit ``TRITON_INTERPRET=1``
also forces the interpreter on a machine with a GPU, which is how one debugs a kernel with prints.
"""

from __future__ import annotations

import os

import torch

if "TRITON_INTERPRET" not in os.environ and not torch.cuda.is_available():
    os.environ["TRITON_INTERPRET"] = "1"

INTERPRET: bool = os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")
"""True when the kernels run in Triton's interpreter (on CPU tensors)."""


def _scratch(size: int, alignment: int, stream: int | None) -> torch.Tensor:
    # PyTorch's caching allocator returns 256-byte aligned blocks on the current device and stream,
    # where Triton launches.
    return torch.empty(size, dtype=torch.int8, device="cuda")


def ensure_scratch_allocator() -> None:
    """Give Triton an allocator for kernels that need global scratch memory, unless one is set.

    A kernel that builds tensor descriptors on the device (``tl.make_tensor_descriptor``) asks
    Triton's launcher for a few bytes of scratch per program, from the allocator set with
    ``triton.set_allocator``; without one the launch raises. The allocator lives in a context
    variable (per thread), so this runs before each such launch, in the launching thread, and
    leaves an allocator the caller set alone.
    """
    if INTERPRET:
        return  # the interpreter builds descriptors on the host
    import triton  # here, not at the top: triton must be imported after TRITON_INTERPRET is set

    try:
        from triton.runtime import _allocation

        current = _allocation._allocator.get()
        unset = isinstance(current, _allocation.NullAllocator)
    except (ImportError, AttributeError):  # another Triton's internals: set ours
        unset = True
    if unset:
        triton.set_allocator(_scratch)
