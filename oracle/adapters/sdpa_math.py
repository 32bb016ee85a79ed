"""Kernel module: SDPA held to its math backend (``SDPBackend.MATH``), PyTorch's composite of
matmul and softmax, on any device.

Features: ``scale``, ``gqa`` and ``bottom_right`` (see :mod:`oracle.adapters.sdpa`); math takes
every argument SDPA has (``bottom_right`` arrives as the boolean mask that ``CausalBias``
materializes). No declared limits: any dtype (float64 too, so ``check_gradcheck_float64`` runs), any
head dim, any rank and layout (the inputs are handed over as they come). Forward and backward run in
deterministic mode, as :mod:`oracle.adapters.sdpa` does; math's backward is plain matmuls, which
that mode keeps deterministic on CUDA (cuBLAS with its workspace pinned).
"""

from __future__ import annotations

from torch.nn.attention import SDPBackend

from oracle.adapters.sdpa import Backend, attention_for

FEATURES = frozenset({"scale", "gqa", "bottom_right"})

attention = attention_for(Backend(SDPBackend.MATH))
