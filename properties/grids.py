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


BACKWARD_EDGE_LENGTHS = (1, 17, 31, 33, 64, 127, 129)
"""Lengths around the backward's tiles (16, 32, 64 and 128 rows, see ``flash.backward_config``)."""


def backward_cpu_cases() -> list[Case]:
    """Gradient cases for the interpreter: backward tile edges, ``n_q != n_k``, head dims, layouts."""
    cases = []
    square = list(itertools.product(BACKWARD_EDGE_LENGTHS, (False, True)))
    for (n, causal), dtype in zip(square, _cycle(CPU_DTYPES, len(square))):
        cases.append(Case(n, n, 64 if dtype == "float16" else 32, (2,), dtype, causal))
    for (n_q, n_k), causal in itertools.product(((17, 130), (130, 17), (1, 65), (65, 1)), (False, True)):
        cases.append(Case(n_q, n_k, 32, (1, 2), "float32" if causal else "float16", causal, seed=3))
    n = len(HEAD_DIMS)
    for d, dtype, causal in zip(HEAD_DIMS, _cycle(CPU_DTYPES, n), _cycle((True, True, False), n)):
        cases.append(Case(65, 97, d, (1,), dtype, causal))
    for layout, causal in itertools.product(LAYOUTS, (False, True)):
        cases.append(Case(33, 70, 24, (2, 2), "float16" if causal else "float32", causal, layout, seed=4))
    # d > 64, causal, lengths multiples of 16: flash's backward runs one masked loop here
    # (flash.backward_triton.loop_shape), code no other case above compiles.
    cases.append(Case(128, 128, 128, (1,), "float32", True, seed=12))
    return cases


def backward_gpu_cases() -> list[Case]:
    """Gradient cases for the compiled backward: bfloat16 first, every head dim, up to 16k."""
    cases = []
    for dtype, d, causal in itertools.product(GPU_DTYPES, HEAD_DIMS, (False, True)):
        cases.append(Case(129, 127, d, (2, 2), dtype, causal))
        if dtype == "bfloat16":
            cases.append(Case(4097, 4095, d, (1, 1), dtype, causal))
            cases.append(Case(1023, 2049, d, (1, 2), dtype, causal, "heads_last"))
    for dtype, layout, causal in itertools.product(GPU_DTYPES, LAYOUTS, (False, True)):
        cases.append(Case(257, 1025, 96, (2, 3), dtype, causal, layout, seed=5))
    for causal, d in itertools.product((False, True), (64, 128)):
        cases.append(Case(16384, 16384, d, (1,), "bfloat16", causal))
    return cases


def property_cpu_cases() -> list[Case]:
    """Cases for the invariant checks in the interpreter: fewer than :func:`cpu_cases` (each check
    calls the kernel several times), still at tile edges, both dtypes, causal both ways, odd layouts."""
    return [
        Case(1, 1, 16, (), "float32", True),  # a lone row and a lone key
        Case(63, 65, 24, (2,), "float16", True),  # one short of a tile, one over; padded head dim
        Case(64, 64, 16, (2,), "float32", False),  # exactly one tile
        Case(65, 129, 32, (1,), "float32", True, distribution="uniform", scale=3.0),  # peaked rows
        Case(129, 63, 80, (1,), "float16", False),  # n_q > n_k, head dim padded to 128
        # One key that every row sees: its weight is exactly 1 and o is v in every row, where a
        # kernel may take a shortcut (no softmax, no copy: a view of v, caught by the results-kept
        # part of check_inputs_updated_in_place); the lone-row case above is causal, so takes none.
        Case(65, 1, 16, (2,), "float32", False, seed=9),
        Case(97, 65, 24, (1, 2), "float32", True, "strided", seed=1),  # two leading dims
        Case(65, 97, 16, (2,), "float16", True, "broadcast_kv", seed=2),
        Case(17, 33, 40, (), "float32", False, "offset", seed=3),
        *_other_layouts(Case(33, 47, 24, (2, 2), "float32", False, seed=5), taken=(
            "contiguous", "strided", "broadcast_kv", "offset")),
        # Every layout again at 16 bits and a head dim padded to 128, where kernels specialize
        # (flash reads k and v through tensor descriptors there, when the layout allows it): the
        # bit-for-bit checks then compare calls whose inputs differ in layout, a slice of a batch
        # alone (check_batch_independent), k and v repeated (check_gqa_matches_repeated_kv), and a
        # kernel whose arithmetic follows its read path differs from itself (flash did, until
        # 2026-12-05: docs/findings.md).
        *(Case(97, 129, 96, (2, 2), "float16", bool(i % 2), layout, seed=7)
          for i, layout in enumerate(LAYOUTS)),
    ]


def _other_layouts(case: Case, taken: tuple[str, ...]) -> list[Case]:
    """``case`` in every layout of :data:`LAYOUTS` not in ``taken``, causal every other one and in
    float16 every third: so the invariant checks (``check_inputs_unchanged`` among them) meet every
    layout, not only those the hand-picked cases use."""
    others = [layout for layout in LAYOUTS if layout not in taken]
    return [case.replace(layout=layout, is_causal=bool(i % 2), dtype="float16" if i % 3 == 2 else case.dtype)
            for i, layout in enumerate(others)]


def property_gpu_cases() -> list[Case]:
    """Cases for the invariant checks on the compiled kernel: every dtype (bfloat16 only here),
    head dims up to 256, lengths past 4k."""
    cases = []
    for dtype in GPU_DTYPES:
        cases += [
            Case(1, 1, 16, (), dtype, True),
            Case(127, 129, 64, (2, 2), dtype, True),
            Case(129, 65, 80, (2, 3), dtype, False, "heads_last", seed=1),
            Case(1023, 1025, 128, (1, 2), dtype, True, seed=2),
            Case(257, 255, 256, (2,), dtype, False, "strided", seed=3),
            Case(4097, 4095, 64, (1,), dtype, True, seed=4),
            # Every row sees one and the same key (tests/broken/single_key_view.py).
            Case(129, 1, 64, (2,), dtype, False, seed=9),
        ]
    cases += _other_layouts(Case(257, 129, 96, (2, 2), "bfloat16", False, seed=6),
                            taken=("contiguous", "heads_last", "strided"))
    # More leading-dim slices than CUDA's 65535 on a grid's second or third axis, where a kernel
    # launched on (row tiles, batch x heads), as Triton's fused-attention tutorial is, cannot go
    # (tests/broken/slices_on_grid_y.py); the last slice is where a wrapped index shows.
    cases.append(Case(17, 33, 16, (4, 16500), "bfloat16", True, seed=8))
    # As on the CPU: columns sliced out of a wider tensor, a head dim that is no multiple of 16: a
    # kernel that pads rows in place writes into the caller's gap (tests/broken/pads_into_row_gap.py).
    cases.append(Case(129, 97, 72, (2, 2), "float16", False, "column_slice", seed=10))
    return cases


def feature_cpu_cases() -> list[Case]:
    """Cases for the contract's features (n/a for a module that does not declare them): grouped
    heads (ratios 2 to 8), windows at the tile edges (63, 64, 65) and one-sided, bottom-right
    alignment with rows that see no key, softcaps that bite, small and large softmax scales, and all
    of them together.

    A band's edges are where a tiled kernel's loop bounds go wrong by one, so two cases put each
    edge one key past a tile boundary for every power-of-two tile from 16 to 64 (65 = 1 mod 16, 32
    and 64): a window ``(65, 1)``, and bottom-right diagonals ``n_k - n_q = 1`` and ``-63``. Their
    last row of a tile (``t B - 1``) then sees the first key of the next key tile, which a loop
    that ends one key short never visits (a loop over query tiles, in a backward, likewise). And
    the smallest case of rows that see no key: bottom-right with ``n_q = n_k + 1``, one such row
    (a guard for empty rows switched on only from two of them leaves it at 0 / 0)."""
    return [
        Case(193, 193, 16, (1,), "float32", False, window=(65, 1), seed=5),
        Case(129, 130, 16, (1,), "float16", True, causal_alignment="bottom_right", seed=6),
        Case(130, 67, 16, (1,), "float32", True, "seq_first", causal_alignment="bottom_right", seed=7),
        Case(65, 64, 16, (2,), "float32", True, causal_alignment="bottom_right", seed=8),
        Case(65, 65, 16, (4,), "float32", True, kv_heads=2),
        Case(97, 129, 24, (2, 8), "float16", False, "heads_last", kv_heads=1),  # multi-query
        Case(129, 129, 32, (2,), "float32", True, window=(63, 0)),
        Case(97, 65, 16, (1,), "float16", False, window=(64, 65), seed=1),
        Case(65, 97, 16, (2,), "float32", False, "strided", window=(-1, 0), seed=2),
        Case(80, 40, 16, (2,), "float32", True, causal_alignment="bottom_right"),  # 40 empty rows
        Case(40, 80, 24, (2,), "float16", True, causal_alignment="bottom_right", window=(16, -1)),
        Case(65, 65, 16, (2,), "float32", False, distribution="uniform", scale=3.0, softcap=2.0),
        Case(33, 129, 32, (1,), "float16", True, softmax_scale=0.5, softcap=30.0),
        # softcap=0 is off, as None is (FlashAttention's default spelling): a module that tests
        # `is not None` caps every score to 0.
        Case(47, 33, 16, (2,), "float32", True, seed=15, softcap=0.0),
        # A large cap that the scores pass (a scale of 5e3: scores up to 5e4, capped near 1e4 and
        # close together): a module that takes a large cap as no cap is right only while the
        # scores stay far below it.
        Case(33, 47, 16, (2,), "float32", False, seed=18, softcap=1e4, softmax_scale=5e3),
        Case(63, 65, 16, (2,), "float32", False, softmax_scale=0.01),
        Case(64, 64, 16, (2,), "float16", False, softmax_scale=10.0, seed=3),
        # A negative scale (the row max is the smallest q.k: a max taken before the scale is wrong
        # there) and 0 (every visible key alike), both allowed by the contract.
        Case(65, 97, 16, (2,), "float16", True, seed=5, softmax_scale=-0.7),
        Case(33, 65, 16, (2,), "float32", False, "strided", seed=6, softmax_scale=0.0, window=(16, 16)),
        Case(97, 65, 24, (2, 4), "float32", True, "mixed", seed=4, kv_heads=2, softmax_scale=0.2,
             window=(32, 8), softcap=5.0, causal_alignment="bottom_right"),
        # At 16 bits and d = 128, where flash reads k and v through tensor descriptors.
        Case(33, 80, 128, (1,), "float16", True, seed=9, window=(24, 0), causal_alignment="bottom_right"),
        # Grouped heads there in a layout the descriptors cannot read (k and v repeated per group
        # can): check_gqa_matches_repeated_kv's two calls then meet two read paths.
        Case(97, 129, 96, (2, 4), "float16", False, "strided", seed=12, kv_heads=2),
        # Bands at d > 64 with lengths multiples of 16, where flash's backward masks every tile in
        # one loop (flash.backward_triton.loop_shape): both bounds bottom-right, a lower bound alone.
        Case(96, 144, 96, (1,), "float16", True, seed=10, window=(40, 0), causal_alignment="bottom_right"),
        Case(160, 160, 128, (1,), "float32", False, seed=11, window=(50, -1)),
        # One query row with grouped heads, causal both ways (decoding): a kernel that folds a
        # group's query heads into the rows of one tile must not give them the rows' causal
        # positions (top-left: the row sees key 0 alone; bottom-right: every key).
        Case(1, 97, 16, (2, 8), "float32", True, seed=13, kv_heads=2),
        Case(1, 97, 16, (2, 8), "float16", True, seed=14, kv_heads=4, causal_alignment="bottom_right"),
    ]


BAND_EDGE_OFFSETS = (-2, -1, 0, 1, 2)
"""Where a band's edge falls relative to a tile boundary, in keys: a tiled kernel decides per tile
whether to mask, and where its loops start and stop, from the band's edges rounded to tiles; an
error of one or two keys in that rounding shows only when an edge lands that close to a boundary."""


def _band_edge_cases(tile: int, n: int, head_dim: int, dtypes: tuple[str, ...]) -> list[Case]:
    """For each offset ``o`` of :data:`BAND_EDGE_OFFSETS`: a window ``(tile - o, tile + o)`` (the
    upper edge ``tile + o`` keys right of the diagonal, the lower ``tile - o`` left: residues ``o``
    and ``-o`` modulo every power-of-two tile up to ``tile``, for the first and last rows of a query
    tile alike, and likewise for the queries a key tile's band reaches), and bottom-right causal
    diagonals ``n_k - n_q = +-(tile + o)`` (the minus sign: ``tile + o`` rows that see no key)."""
    cases = []
    for i, (o, dtype) in enumerate(zip(BAND_EDGE_OFFSETS, _cycle(dtypes, len(BAND_EDGE_OFFSETS)))):
        cases += [
            Case(n, n, head_dim, (1,), dtype, False, seed=20 + i, window=(tile - o, tile + o)),
            Case(n, n + tile + o, head_dim, (1,), dtype, True, seed=30 + i,
                 causal_alignment="bottom_right"),
            Case(n + tile + o, n, head_dim, (1,), dtype, True, seed=40 + i,
                 causal_alignment="bottom_right"),
        ]
    return cases


def band_edge_cpu_cases() -> list[Case]:
    """Band edges at every offset from -2 to 2 keys of the boundaries of 16- to 64-key tiles
    (:func:`_band_edge_cases`), over three 64-row tiles and one row: few checks run on them (those
    that compare with the oracle and hide keys), as the feature grid holds every check."""
    return _band_edge_cases(64, 193, 16, CPU_DTYPES)


def band_edge_gpu_cases() -> list[Case]:
    """As :func:`band_edge_cpu_cases` for tiles up to 128 keys, at head dims 64 and 128."""
    return (_band_edge_cases(128, 1025, 64, ("float16", "bfloat16"))
            + _band_edge_cases(128, 513, 128, ("bfloat16", "float32")))


def _band_edge_decode_cases(edge: int, n_k: int, head_dim: int, leading: tuple[int, ...],
                            dtypes: tuple[str, ...]) -> list[Case]:
    """Decoding-shaped band edges, for each offset ``o`` of :data:`BAND_EDGE_OFFSETS`: two query
    rows bottom-right whose first row's lower window edge is key ``edge + o``, and three rows
    top-left whose upper edge is ``edge + o`` keys right of the diagonal (a split-KV path rounds
    the band to key tiles when it plans its splits)."""
    cases = []
    for i, (o, dtype) in enumerate(zip(BAND_EDGE_OFFSETS, _cycle(dtypes, len(BAND_EDGE_OFFSETS)))):
        cases += [
            Case(2, n_k, head_dim, leading, dtype, False, seed=50 + i, causal_alignment="bottom_right",
                 window=(n_k - 2 - edge - o, -1)),
            Case(3, n_k, head_dim, leading, dtype, False, seed=60 + i, window=(-1, edge + o)),
        ]
    return cases


def band_edge_decode_cpu_cases() -> list[Case]:
    """:func:`_band_edge_decode_cases` at key 128 of 257 (tiles up to 128 keys; the CPU suite
    splits them in 16-key splits, ``flash.split_kv``)."""
    return _band_edge_decode_cases(128, 257, 16, (2,), CPU_DTYPES)


def band_edge_decode_gpu_cases() -> list[Case]:
    """:func:`_band_edge_decode_cases` at key 1024 of 2057: bands of 1025 to 1035 keys, which
    ``flash``'s default plan cuts in two 512-key splits."""
    return _band_edge_decode_cases(1024, 2057, 128, (2, 2), ("bfloat16", "float16"))


def feature_gpu_cases() -> list[Case]:
    """Feature cases for a compiled kernel: every dtype, head dims 64 and 128, GQA 8:1, windows at
    tile edges over a few thousand keys, empty rows, softcap and scale, up to 4k; as on the CPU
    (:func:`feature_cpu_cases`), band edges one key past a tile boundary for every power-of-two
    tile up to 128 (a window ``(129, 1)``, a bottom-right diagonal ``n_k - n_q = 1``)."""
    cases = []
    for dtype in GPU_DTYPES:
        cases += [
            Case(1023, 1025, 128, (2, 8), dtype, True, kv_heads=1),
            Case(513, 513, 64, (1, 8), dtype, False, "heads_last", seed=1, kv_heads=2),
            Case(2049, 2049, 64, (1, 2), dtype, True, seed=2, window=(1024, 0)),
            Case(1025, 1023, 128, (2,), dtype, False, seed=3, window=(63, 64)),
            Case(1023, 257, 64, (2,), dtype, True, seed=4, causal_alignment="bottom_right"),
            Case(1025, 1025, 64, (2,), dtype, False, seed=8, window=(129, 1)),
            Case(1023, 1024, 128, (2,), dtype, True, seed=9, causal_alignment="bottom_right"),
            Case(4097, 4095, 64, (1, 2), dtype, True, seed=5, softcap=30.0),
            Case(1023, 1023, 128, (2,), dtype, False, seed=6, softmax_scale=0.05, softcap=10.0),
            Case(1025, 1023, 64, (2,), dtype, True, seed=10, softmax_scale=-0.3),
            Case(769, 1024, 64, (2, 4), dtype, True, "strided", seed=7, kv_heads=2, softmax_scale=0.3,
                 window=(255, 64), softcap=20.0, causal_alignment="bottom_right"),
            # Decoding: one query row with grouped heads, causal both ways
            # (tests/broken/decode_gqa_heads_as_rows.py); flash splits the 4097 keys (flash.decode).
            Case(1, 1025, 64, (2, 8), dtype, True, seed=14, kv_heads=2),
            Case(1, 4097, 128, (2, 32), dtype, True, seed=15, kv_heads=8, causal_alignment="bottom_right"),
        ]
    # A lower bound alone, bottom-right: each row sees every key from c_i - 300 on.
    return cases + [Case(1000, 1500, 128, (2, 2), "bfloat16", False, seed=11, window=(300, -1),
                         causal_alignment="bottom_right"),
                    # Bands at d = 128 with lengths multiples of 16: flash's one-loop backward
                    # (flash.backward_triton.loop_shape), bottom-right and with a lower bound alone.
                    Case(1024, 1536, 128, (2, 2), "bfloat16", True, seed=12, window=(700, 0),
                         causal_alignment="bottom_right"),
                    Case(1024, 1024, 128, (2,), "float16", False, seed=13, window=(300, -1)),
                    # As on the CPU: a window side as wide as the keys with more queries than
                    # keys (top-left, rows 201-399 lose their first keys and rows 400 on see
                    # none; bottom-right, rows 0-624 see none), and a large cap the scores pass.
                    Case(1025, 200, 64, (2,), "float16", False, seed=16, window=(200, 2)),
                    Case(1025, 200, 128, (2,), "bfloat16", False, "strided", seed=17, window=(2, 200),
                         causal_alignment="bottom_right"),
                    Case(1023, 1025, 64, (2,), "bfloat16", False, seed=18, softcap=1e4, softmax_scale=5e3),
                    Case(1023, 1025, 128, (2,), "float32", True, seed=18, softcap=1e4, softmax_scale=5e3),
                    # As on the CPU: softcap=0 is off, as None is (tests/broken/softcap_zero_capped.py).
                    Case(1025, 1023, 64, (2, 2), "bfloat16", True, seed=19, softcap=0.0)]


def decode_cpu_cases() -> list[Case]:
    """Decoding-shaped cases: a few query rows (1 to 16 per head) over many keys, as a serving
    kernel sees them after the prefill (grouped heads, the bottom-right diagonal a KV cache needs,
    windows, softcaps, odd layouts and head dims). A kernel with a split-KV path (FlashDecoding) cuts
    such keys in pieces and merges them by their lse; the merge has its own ways to be wrong.

    The first two have keys enough for ``flash``'s default split of 512 (two splits); the others,
    up to 300 keys, make 2 to 19 splits of 16 keys (:mod:`flash.split_kv`), and a window of 56 keys
    at the end of 300, with 16 rows each seeing 41 of them, leaves a row some splits with nothing in
    them. The one over 301 keys has slices that start 8 elements apart, not 16
    (``flash.forward.offset_alignment``), which the split-KV kernel compiles for separately; the
    last a window with a lower bound alone (``(60, -1)``: every key after ``c_i - 60``). Sized for
    the interpreter: every check runs on each."""
    return [
        Case(1, 1025, 64, (2, 2), "float32", False, kv_heads=1),  # decode, multi-query
        Case(3, 1100, 64, (1, 2), "float16", True, "heads_last", seed=1, kv_heads=1,
             causal_alignment="bottom_right", softcap=5.0),  # speculative decoding
        Case(16, 300, 16, (2,), "float32", True, seed=3, causal_alignment="bottom_right",
             window=(40, 0)),
        Case(4, 200, 24, (1, 4), "float16", True, "strided", seed=2, kv_heads=2,
             causal_alignment="bottom_right"),
        Case(2, 160, 80, (3,), "float16", False, "broadcast_kv", seed=4, softmax_scale=0.3),
        Case(9, 129, 16, (2, 3), "float32", False, "offset", seed=5, kv_heads=1, window=(60, 60),
             distribution="uniform", scale=3.0),
        Case(3, 301, 40, (2,), "float32", True, seed=6, causal_alignment="bottom_right"),  # odd strides
        Case(4, 150, 16, (2,), "float32", False, seed=7, causal_alignment="bottom_right",
             window=(60, -1)),  # a lower bound alone
    ]


def decode_long_cpu_cases() -> list[Case]:
    """Decoding over a long cache, sized for the interpreter by a small head dim: one row over 16k
    keys (multi-query) and three rows over 32k (causal, bottom-right, strided, float16). A split-KV
    path may cut a long cache into longer pieces than a short one (``flash`` does: 1024 keys from
    16k, 2048 from 32k); these reach such pieces on the CPU. Too long for the checks that read the
    probabilities back (``n_k / d`` calls): the oracle checks run on them."""
    return [
        Case(3, 32769, 16, (1,), "float16", True, "strided", seed=2, causal_alignment="bottom_right"),
        Case(1, 16385, 16, (2,), "float32", False, seed=1, kv_heads=1),
    ]


def decode_gpu_cases() -> list[Case]:
    """Decoding cases for a compiled kernel: one row over 32k keys with GQA 4:1 (the shape a split-KV
    path is for) and speculative decoding (4 and 16 rows, bottom-right) with a softcap or a window,
    in both 16-bit dtypes; float32 at head dims 128 and 256, whose tiles differ (shared memory); a
    padded head dim (80) in the gapped layout, whose slices start at odd offsets though every row
    is 16-byte aligned (compiled apart: ``OFFSET_ALIGN`` 1, not 16); and a head dim that is not a
    multiple of 16 (72) at an unaligned address (the offset layout), multi-query, with a window
    wide enough to split, on which Triton compiles the split-KV path apart again; a top-left window
    with a softcap and a bottom-right lower bound alone, each wide enough to split."""
    cases = []
    for dtype in ("bfloat16", "float16"):
        cases += [
            Case(1, 32769, 128, (2, 8), dtype, False, kv_heads=2),
            Case(4, 8191, 64, (2, 4), dtype, True, "strided", seed=1, kv_heads=1,
                 causal_alignment="bottom_right", softcap=30.0),
            Case(16, 4097, 128, (1, 8), dtype, True, seed=2, kv_heads=2,
                 causal_alignment="bottom_right", window=(1500, 0)),
        ]
    return cases + [
        Case(1, 1024, 256, (2,), "float32", False, "heads_last", seed=3),
        Case(4, 2049, 128, (1, 4), "float32", True, seed=4, kv_heads=2,
             causal_alignment="bottom_right", softcap=20.0),
        Case(3, 20001, 80, (3,), "bfloat16", True, "gapped", seed=5, causal_alignment="bottom_right"),
        Case(5, 9000, 72, (2, 2), "bfloat16", False, "offset", seed=6, kv_heads=1,
             causal_alignment="bottom_right", window=(3000, 0)),
        Case(4, 6000, 64, (2,), "bfloat16", False, seed=7, window=(100, 3000), softcap=15.0),
        Case(2, 5000, 128, (2, 4), "bfloat16", False, seed=8, kv_heads=2,
             causal_alignment="bottom_right", window=(2500, -1), softcap=25.0),
    ]
