"""The fixed grids of packed variable-length cases (:class:`~properties.varlen_case.VarlenCase`).

``varlen_cpu_cases()`` is sized for the Triton interpreter on two cores (each case runs every varlen
check, up to five packed or per-sequence calls each); it ends with ``varlen_feature_cpu_cases()``,
the cases that use the features of the extended contract (n/a for a module that does not declare
them). ``varlen_gpu_cases()`` adds bfloat16 (GPU only, as in :mod:`properties.grids`: the
interpreter's bfloat16 ``tl.dot`` is garbage), lengths up to 4096 and a mix of 64 sequences.
"""

from __future__ import annotations

import itertools

from properties.varlen_case import VarlenCase

TILE_EDGES = (1, 63, 64, 65, 127)
"""Sequence lengths around the 64-wide tiles: a lone row, one short of a tile, exact, one over, two short."""


def varlen_cpu_cases() -> list[VarlenCase]:
    """Tile edges in one batch, an empty query sequence between others, a long sequence among
    length-1 ones, ``n_q != n_k`` per sequence; causal both ways, float32 and float16, head dims
    16, 40 and 64, one and two heads, every layout; then :func:`varlen_feature_cpu_cases`."""
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
        VarlenCase((17, 0, 64), (33, 5, 65), 2, 40, "float16", False, "column_slice", seed=6),
        # 16 bits at a head dim padded to 128, where kernels specialize (flash reads k and v
        # through tensor descriptors there, one per sequence); keys past one and two 64-key tiles.
        VarlenCase((97, 1, 0, 33), (130, 65, 7, 200), 2, 96, "float16", False, "contiguous", seed=10),
        *varlen_feature_cpu_cases(),
    ]


def varlen_feature_cpu_cases() -> list[VarlenCase]:
    """Grouped-query heads (4 on 1, 6 on 2), bottom-right alignment, windows at tile edges (one of
    them one-sided), softcap and softmax scale, each with sequences whose alignment differs from the
    packed batch's (``n_k - n_q`` per sequence is not ``total_k - total_q``) and with real rows that
    see no key."""
    return [
        # Bottom-right causal: sequence 0 (65 queries, 64 keys) has a row that sees nothing, the
        # last sequence sees all its keys (top-left it would not); a query-less sequence between.
        VarlenCase((65, 1, 0, 63), (64, 17, 5, 127), 4, 16, "float32", True, seed=6, kv_heads=1,
                   causal_alignment="bottom_right"),
        # A 64-key window, top-left, capped scores: the last row of (65 queries, 1 key) sees
        # nothing, and no row of the first sequence sees its last two keys.
        VarlenCase((127, 0, 65, 64), (129, 5, 1, 64), 2, 40, "float16", False, "strided", seed=7,
                   window=(63, 0), softcap=20.0),
        # One-sided window, bottom-right causal, grouped heads, a scale: 63 of sequence 1's rows
        # and 65 of sequence 2's see nothing.
        VarlenCase((1, 64, 129), (65, 1, 64), 6, 16, "float32", True, "mixed", "uniform", 3.0, seed=8,
                   kv_heads=2, softmax_scale=0.5, window=(64, -1), causal_alignment="bottom_right"),
        # One key per row (window (0, 0), bottom-right) with a large scale and a tight cap: the
        # diagonal is shifted by +1 and -1, and a key of each of two sequences is never seen.
        VarlenCase((63, 65, 1), (64, 64, 2), 2, 64, "float16", False, "heads_first", seed=9,
                   softmax_scale=10.0, window=(0, 0), softcap=1.0, causal_alignment="bottom_right"),
        # A negative scale, causal, grouped heads: each row's largest score is its smallest q.k.
        VarlenCase((17, 65), (17, 65), 4, 32, "float32", True, seed=10, kv_heads=2, softmax_scale=-0.6),
        # Bands at d > 64: flash's backward keeps three runs on packed input, while a sequence
        # alone with lengths multiples of 16 runs one masked loop (flash.backward_triton.loop_shape).
        VarlenCase((64, 33, 96), (96, 65, 96), 2, 96, "float16", True, seed=11, window=(40, 0),
                   causal_alignment="bottom_right"),
        VarlenCase((80, 17), (80, 30), 2, 128, "float32", False, seed=12, window=(30, -1)),
        VarlenCase((48, 31), (48, 40), 1, 80, "float32", True, "strided", seed=13),
        # A batch of one sequence, bottom-right causal with n_q < n_k: a module that sends a lone
        # sequence to its dense path must keep the alignment.
        VarlenCase((5,), (23,), 2, 16, "float32", True, seed=14, causal_alignment="bottom_right"),
        # softcap=0 is off, as None is (FlashAttention's default spelling).
        VarlenCase((9, 3), (9, 12), 2, 16, "float32", False, seed=15, softcap=0.0),
        # A large cap that the scores pass (a scale of 5e3: scores up to 5e4).
        VarlenCase((9, 3), (9, 12), 2, 16, "float32", False, seed=18, softcap=1e4, softmax_scale=5e3),
        # A window side as wide as the longest key sequence still hides keys from a sequence with
        # more queries than keys: top-left, rows 13-19 of (20 queries, 5 keys) lose their first
        # keys to left = 12, rows 17-19 see none; bottom-right, right = 12 leaves rows 0-2 of
        # (20, 5) blind (c_i = i - 15).
        VarlenCase((20, 3), (5, 12), 2, 16, "float32", False, seed=16, window=(12, 2)),
        VarlenCase((3, 20), (12, 5), 1, 16, "float32", False, "strided", seed=17, window=(2, 12),
                   causal_alignment="bottom_right"),
        # A small cap with key lengths that differ within the batch, two of them (45 and 33, with
        # 40 and 33 queries) under the same powers of two: a module that pads a group of sequences
        # to its longest and hides the padding before the cap gives padded keys a score of -2
        # (tests/broken/varlen_padded_softcap_bias.py).
        VarlenCase((17, 40, 33), (40, 45, 33), 2, 32, "float32", False, seed=19, softcap=2.0),
    ]


MIX_64 = tuple(1 + (i * 389 + i * i * 7) % 1024 for i in range(63)) + (1024,)
"""64 sequence lengths spread over 1..1024 (1 first, 1024 last), uneven neighbours."""

GPU_DTYPES = ("bfloat16", "float16", "float32")


def varlen_gpu_cases() -> list[VarlenCase]:
    """Cases for the compiled kernel: every dtype, head dims 64 and 128, lengths up to 4096, an
    empty query sequence, a 64-sequence mix of 1..1024, every layout; the features together."""
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
        cases.append(VarlenCase(MIX_64[:16], MIX_64[16:32], 4, 80, "float16", causal, "column_slice", seed=7))
    # The features, compiled: a window and a softcap on packed input, GQA, bottom-right.
    cases.append(VarlenCase((1000, 1, 0, 513), (1000, 700, 5, 513), 4, 128, "bfloat16", True, seed=4,
                            kv_heads=2, causal_alignment="bottom_right", window=(200, 0), softcap=20.0))
    # Bands at d = 128 without a softcap or a group: packed, the backward runs three runs; a
    # sequence alone whose lengths are multiples of 16 runs one masked loop (loop_shape), and
    # each must be bit for bit itself alone (check_varlen_matches_separate; on a GPU only does
    # masking move a bit).
    cases.append(VarlenCase((1024, 512, 1000), (1536, 512, 1003), 2, 128, "bfloat16", True, seed=5,
                            window=(700, 0), causal_alignment="bottom_right"))
    cases.append(VarlenCase((1024, 777), (1024, 800), 2, 128, "float16", False, seed=6, window=(300, -1)))
    # As on the CPU: a window side as wide as the longest key sequence, with a sequence of more
    # queries than keys (top-left: rows 701-899 of (1000, 200) lose their first keys, rows 900 on
    # see none; bottom-right: rows 0-99 of (1000, 200) see none), and a large cap the scores pass.
    cases.append(VarlenCase((1000, 3, 300), (200, 700, 300), 2, 64, "float16", False, seed=16,
                            window=(700, 2)))
    cases.append(VarlenCase((3, 1000), (700, 200), 2, 128, "bfloat16", False, "strided", seed=17,
                            window=(2, 700), causal_alignment="bottom_right"))
    cases.append(VarlenCase((513, 7), (513, 1025), 2, 64, "bfloat16", True, seed=18, softcap=1e4,
                            softmax_scale=5e3))
    # As on the CPU: softcap=0 is off (tests/broken/varlen_softcap_zero_capped.py); one sequence,
    # causal bottom-right with more keys than queries, where a module may take the dense path and
    # drop the alignment (tests/broken/varlen_single_sequence_alignment_dropped.py).
    cases.append(VarlenCase((777, 1, 300), (1000, 513, 300), 2, 64, "float16", True, seed=19, softcap=0.0))
    cases.append(VarlenCase((1000,), (1537,), 4, 128, "bfloat16", True, seed=20,
                            causal_alignment="bottom_right"))
    # As on the CPU: a small cap, key lengths 1003 and 513 (1000 and 513 queries) under the same
    # powers of two (tests/broken/varlen_padded_softcap_bias.py).
    cases.append(VarlenCase((300, 1000, 513), (1000, 1003, 513), 2, 64, "bfloat16", False, seed=21,
                            softcap=2.0))
    return cases


def varlen_decode_cpu_cases() -> list[VarlenCase]:
    """Packed decoding (:func:`properties.grids.decode_cpu_cases`, one batch): a few query rows per
    sequence and keys long enough for ``flash``'s split-KV path (1100 keys); and, at 16 bits and
    d = 128 (the tensor-descriptor reads), top-left and without a band, with a softcap; and batches
    whose sequences all have the same number of queries (one each, sixteen each) over keys of
    different lengths; and split sequences past the first, one of several rows."""
    return [
        VarlenCase((1, 1, 16, 3, 0, 40), (1100, 40, 300, 99, 7, 40), 4, 16, "float32", True,
                   kv_heads=2, causal_alignment="bottom_right"),
        VarlenCase((16, 2, 5, 20), (300, 64, 130, 90), 2, 32, "float16", True, "strided", seed=1,
                   window=(100, 0), softcap=5.0, causal_alignment="bottom_right"),
        VarlenCase((1, 3, 20), (100, 90, 40), 2, 128, "float16", False, seed=2, softcap=8.0),
        # Every sequence with the same number of queries (decoding steps, equal prefill chunks) over
        # caches of different lengths: a kernel may run equal query lengths as a dense batch, and
        # must not take the keys for equal too.
        VarlenCase((1, 1, 1, 1), (1100, 1, 65, 14), 2, 16, "float32", False, seed=3),  # 4 | total_k
        # One query row each, causal top-left: every row sees its sequence's first key alone
        # (FlashAttention drops is_causal when max_seqlen_q == 1, right only bottom-right).
        VarlenCase((1, 1, 1), (7, 1, 40), 2, 16, "float32", True, seed=6),
        VarlenCase((16, 16, 16), (16, 80, 33), 2, 32, "float16", True, "heads_first", seed=4,
                   causal_alignment="bottom_right"),
        # Split sequences that do not start the batch, one with several rows: the merge stores
        # rows at their packed place (start + row, times the heads), which a split first sequence
        # of one row (the cases above) never tells from row 0.
        VarlenCase((2, 4, 1), (33, 1100, 40), 2, 16, "float32", True, seed=5,
                   causal_alignment="bottom_right"),
        # Decoding steps with sequences that have no query (a finished request, a kept cache slot)
        # before others: a kernel that takes row r for sequence r when max_seqlen_q == 1 reads
        # another sequence's keys (tests/broken/varlen_decode_rows_as_sequences.py).
        VarlenCase((0, 1, 1, 0, 1), (5, 40, 1, 3, 70), 2, 16, "float32", True, seed=7,
                   causal_alignment="bottom_right"),
        VarlenCase((0, 1, 0, 1), (33, 7, 1, 100), 4, 16, "float16", False, "strided", seed=8, kv_heads=2),
    ]


def varlen_decode_gpu_cases() -> list[VarlenCase]:
    """Packed decoding for a compiled kernel: both 16-bit dtypes, eight one-row sequences over caches
    of 1 to 32768 keys, two of 16 and 4 rows, GQA 4:1, bottom-right; and, as on the CPU, batches of
    equal query lengths (1, 64) over caches of different lengths, and one-row sequences after
    sequences without queries."""
    return [
        VarlenCase((1,) * 8 + (16, 4), (32768, 100, 4096, 1, 9000, 513, 1024, 2049, 8192, 300), 8,
                   128, dtype, True, seed=4, kv_heads=2, causal_alignment="bottom_right")
        for dtype in ("bfloat16", "float16")
    ] + [
        VarlenCase((1, 4, 30), (5000, 3000, 100), 4, 64, "bfloat16", True, seed=5, kv_heads=2,
                   causal_alignment="bottom_right", window=(2000, 0), softcap=30.0),
        # Equal query lengths over unequal caches (as in the CPU grid).
        VarlenCase((1,) * 8, (16384, 1, 2049, 300, 4096, 65, 1000, 8191), 8, 128, "bfloat16", False,
                   seed=6),
        VarlenCase((64,) * 4, (64, 1000, 513, 4096), 4, 128, "float16", True, "heads_first", seed=7,
                   kv_heads=2, causal_alignment="bottom_right"),
        # One row per sequence, causal top-left: each row sees its sequence's first key alone
        # (tests/broken/varlen_single_query_causal_dropped.py).
        VarlenCase((1,) * 6, (4096, 1, 300, 8192, 65, 1000), 8, 128, "bfloat16", True, seed=9),
        # One-row sequences after sequences without queries
        # (tests/broken/varlen_decode_rows_as_sequences.py).
        VarlenCase((0, 1, 1, 0, 1, 1), (4096, 1000, 1, 77, 8192, 300), 8, 128, "bfloat16", True, seed=8,
                   kv_heads=2, causal_alignment="bottom_right"),
    ]
