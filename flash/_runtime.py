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
