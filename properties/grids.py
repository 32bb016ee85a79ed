"""The fixed grids of cases, in one place: tile edges, odd head dims, every layout.

``cpu_cases()`` is sized for the Triton interpreter on two cores; ``gpu_cases()`` adds bfloat16,
float32 at every head dim, and lengths up to 16k. bfloat16 is GPU-only on purpose: in the Triton
interpreter, ``tl.dot`` on bfloat16 returns garbage and float-to-bf16 casts truncate, so a CPU run
would judge the interpreter, not the kernel.
"""

from __future__ import annotations

import itertools

from properties.case import LAYOUTS, Case

TILE_EDGE_LENGTHS = (1, 63, 64, 65, 97, 127, 128, 129)
"""Lengths around the default 64-wide tiles: a lone row, one short of a tile, exact, one over..."""

HEAD_DIMS = (16, 24, 32, 64, 80, 96, 128, 256)
"""Powers of two up to the maximum, and non-powers (24, 80, 96) that exercise head-dim padding."""

UNEQUAL_LENGTHS = ((1, 129), (129, 1), (65, 200), (200, 65), (63, 1025), (1023, 97))
"""``(n_q, n_k)`` with ``n_q != n_k`` both ways: causal rows past n_k see every key."""

CPU_DTYPES = ("float32", "float16")
GPU_DTYPES = ("float16", "bfloat16", "float32")


def _cycle(values, n):
    return [values[i % len(values)] for i in range(n)]


def cpu_cases() -> list[Case]:
    """Cases for the interpreter: each edge length, unequal lengths, head dims and layouts."""
    cases = []
    square = list(itertools.product(TILE_EDGE_LENGTHS, (False, True), CPU_DTYPES))
    for (n, causal, dtype), d in zip(square, _cycle(HEAD_DIMS, len(square))):
        cases.append(Case(n, n, d, (2,), dtype, causal))
    for (n_q, n_k), causal in itertools.product(UNEQUAL_LENGTHS, (False, True)):
        cases.append(Case(n_q, n_k, 32, (1,), "float32" if causal else "float16", causal))
    for d in HEAD_DIMS:
        cases.append(Case(97, 65, d, (2,), "float16", True))
    for layout, causal in itertools.product(LAYOUTS, (False, True)):
        cases.append(Case(97, 129, 24, (2, 3), "float32", causal, layout, seed=1))
    cases.append(Case(1023, 1025, 64, (1,), "float16", True))
    cases.append(Case(33, 17, 40, (), "float32", True))  # rank-2 inputs, no leading dims
    cases.append(Case(65, 65, 16, (2, 1, 3), "float16", False, "heads_last"))  # three leading dims
    return cases


def gpu_cases() -> list[Case]:
    """Cases for the compiled kernel: all dtypes and head dims, tile edges, up to 16k."""
    cases = []
    for dtype, d, causal in itertools.product(GPU_DTYPES, HEAD_DIMS, (False, True)):
        for n in (1, 65, 128, 1023):
            cases.append(Case(n, n, d, (2, 2), dtype, causal))
        for n_q, n_k in ((63, 1025), (1025, 97)):
            cases.append(Case(n_q, n_k, d, (2,), dtype, causal))
    for dtype, layout, causal in itertools.product(GPU_DTYPES, LAYOUTS, (False, True)):
        cases.append(Case(129, 1025, 80, (2, 3), dtype, causal, layout, seed=2))
    for dtype, causal in itertools.product(("float16", "bfloat16"), (False, True)):
        cases.append(Case(4097, 4095, 128, (1, 2), dtype, causal))
        cases.append(Case(16384, 16384, 64, (1,), dtype, causal))
    return cases
