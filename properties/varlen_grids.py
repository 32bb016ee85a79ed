"""The fixed grids of packed variable-length cases (:class:`~properties.varlen_case.VarlenCase`).

``varlen_cpu_cases()`` is sized for the Triton interpreter on two cores (each case runs every varlen
check, up to five packed or per-sequence calls each); ``varlen_gpu_cases()`` adds bfloat16 (GPU
only, as in :mod:`properties.grids`: the interpreter's bfloat16 ``tl.dot`` is garbage), lengths up
to 4096 and a mix of 64 sequences.
"""

from __future__ import annotations

import itertools

from properties.varlen_case import VarlenCase

TILE_EDGES = (1, 63, 64, 65, 127)
"""Sequence lengths around the 64-wide tiles: a lone row, one short of a tile, exact, one over, two short."""


def varlen_cpu_cases() -> list[VarlenCase]:
    """Tile edges in one batch, an empty query sequence between others, a long sequence among
    length-1 ones, ``n_q != n_k`` per sequence; causal both ways, float32 and float16, head dims
    16, 40 and 64, one and two heads, every layout."""
    return [
        # Every tile edge, back to back: each sequence starts mid-tile of the packed rows.
        VarlenCase(TILE_EDGES, TILE_EDGES, 1, 16, "float32", False, "contiguous"),
        VarlenCase(TILE_EDGES, TILE_EDGES, 1, 64, "float16", True, "heads_first", seed=1),
        # A sequence with keys and no queries between two others: its keys must stay unseen and get
        # zero gradients; the rows on either side of it are adjacent in q, not in k.
        VarlenCase((65, 0, 63), (65, 17, 63), 2, 40, "float16", True, "strided", seed=2),
        # One long sequence among length-1 ones, and n_k != n_q in it.
        VarlenCase((1, 1, 127, 1), (1, 2, 65, 1), 2, 64, "float16", True, "mixed", seed=3),
        # n_q != n_k both ways per sequence; sequences with neither queries nor keys at both ends.
        VarlenCase((0, 1, 65, 64, 63, 0), (0, 64, 1, 63, 127, 0), 1, 40, "float32", False, "strided",
                   "uniform", 3.0, seed=4),
        VarlenCase((1, 65, 64, 63), (64, 1, 63, 127), 1, 16, "float32", True, "contiguous", "ties",
                   seed=5),
    ]


MIX_64 = tuple(1 + (i * 389 + i * i * 7) % 1024 for i in range(63)) + (1024,)
"""64 sequence lengths spread over 1..1024 (1 first, 1024 last), uneven neighbours."""

GPU_DTYPES = ("bfloat16", "float16", "float32")


def varlen_gpu_cases() -> list[VarlenCase]:
    """Cases for the compiled kernel: every dtype, head dims 64 and 128, lengths up to 4096, an
    empty query sequence, a 64-sequence mix of 1..1024, every layout."""
    cases = []
    for dtype, d, causal in itertools.product(GPU_DTYPES, (64, 128), (False, True)):
        # Up to 4096, an empty query sequence with keys, n_q != n_k both ways.
        cases.append(VarlenCase((4096, 1, 0, 4095, 2049), (4096, 1, 511, 4097, 1023), 2, d, dtype,
                                causal))
    for dtype, causal in itertools.product(GPU_DTYPES, (False, True)):
        cases.append(VarlenCase(TILE_EDGES + (128, 129), TILE_EDGES + (129, 128), 4, 128, dtype, causal,
                                "heads_first", seed=1))
        cases.append(VarlenCase(MIX_64, MIX_64[::-1], 2, 64, dtype, causal, "strided", seed=2))
    for causal in (False, True):
        cases.append(VarlenCase(MIX_64, MIX_64, 2, 128, "bfloat16", causal, "mixed", seed=3))
    return cases
