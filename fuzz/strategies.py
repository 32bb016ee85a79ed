"""Hypothesis strategies for attention problems: :class:`~properties.case.Case` and packed
variable-length batches (:class:`~properties.varlen_case.VarlenCase`).

Every strategy takes keyword-only parameters and draws the *description* of a problem (shapes,
dtype, layout, value distribution, a seed), never the elements: the tensors are built from the
seed by :meth:`Case.make_qkv`, so a case is cheap to draw, to shrink and to print as one line.

Shrinking goes toward the simplest problem: lengths toward 1 (then toward the tile edges), head
dim 16, no leading dims, float32, not causal, contiguous, standard normal values, seed 0 (a varlen
batch: toward one sequence of length 1, one head). So a failure is reported as the smallest case
that still shows it.

How big cases get is one parameter, a :class:`Size`: :data:`CPU` (for the Triton interpreter,
which costs about a second per call at n ~ 1000) or :data:`GPU` (lengths up to 16k, bfloat16).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from hypothesis import strategies as st

from properties.case import LAYOUTS, Case
from properties.varlen_case import VARLEN_LAYOUTS, VarlenCase

__all__ = [
    "CPU",
    "CPU_QUICK",
    "GPU",
    "DECODE_ROWS",
    "SIZES",
    "Size",
    "cases",
    "dtypes",
    "feature_fields",
    "head_dims",
    "layouts",
    "leading_dims",
    "length_pairs",
    "lengths",
    "ragged_lengths",
    "values",
    "varlen_cases",
]

BLOCK = 64
"""The kernel's default key-tile width (its query tiles, 128 rows for 16-bit inputs, are multiples):
lengths around its multiples are where masking goes wrong."""


@dataclass(frozen=True)
class Size:
    """How large drawn problems may be.

    Attributes:
        name: ``"cpu"`` or ``"gpu"``; also part of the fuzzer's database keys.
        max_len: the largest ``n_q`` / ``n_k`` drawn routinely.
        rare_max_len: tile edges up to this length are drawn rarely (one length in 20); 0: never.
        max_work: a cap on ``prod(leading) * n_q * n_k`` (the score elements of one call), so
            that the float64 oracle stays affordable; leading dims are trimmed to fit.
        dtypes: the dtypes drawn, the simplest first.
        log_lengths: draw free lengths log-uniformly (GPU: most of 1..16384 is huge) rather
            than uniformly.
        min_head_dim: the smallest head dim drawn (some checks cost ``n_k / d`` kernel calls).
    """

    name: str
    max_len: int
    rare_max_len: int
    max_work: int
    dtypes: tuple[str, ...]
    log_lengths: bool = False
    min_head_dim: int = 1


CPU = Size("cpu", max_len=300, rare_max_len=1025, max_work=2 * 1025 * 1025,
           dtypes=("float32", "float16"))
"""For the Triton interpreter: lengths up to 300, now and then a tile edge up to 1025; no bfloat16 (the
interpreter's bfloat16 ``tl.dot`` returns garbage)."""

CPU_QUICK = Size("cpu-quick", max_len=160, rare_max_len=0, max_work=2 * 160 * 160,
                 dtypes=("float32", "float16"), min_head_dim=8)
"""For the CPU test suite, which runs every check in a minute or two on two cores: lengths up to
160 (the tile edges 63..129 included), no rare long ones, head dims from 8 (reading the
probabilities back costs ``n_k / d`` kernel calls). ``python -m fuzz run`` uses :data:`CPU`."""

GPU = Size("gpu", max_len=16384, rare_max_len=16385, max_work=4 * 4096 * 4096,
           dtypes=("float16", "bfloat16", "float32"), log_lengths=True, min_head_dim=8)
"""For the compiled kernel: lengths up to 16k (log-uniform), bfloat16 included; head dims from 8
(reading probabilities back costs ``n_k / d`` calls: 2048 at 16k; the CPU sizes cover d < 8)."""

SIZES = {size.name: size for size in (CPU, CPU_QUICK, GPU)}


@st.composite
def lengths(draw, *, size: Size = CPU, block: int = BLOCK) -> int:
    """A sequence length >= 1: mostly a tile edge (1 first), else any length, rarely a long one.

    Weights: 12 in 20 a tile edge ``m * block + offset``, offset in (+1, 0, -1), up to
    ``size.max_len`` (1 is ``m = 0``); 7 in 20 a free length up to ``size.max_len``; 1 in 20 a
    tile edge up to ``size.rare_max_len``. The multiple and the offset are drawn apart, and the
    rare branch draws them the same way, so shrinking walks ``m`` down (1025 -> ... -> 65) instead
    of being stuck on one listed length. Shrinks toward 1.
    """
    kind = draw(st.integers(0, 19))
    if kind < 12 or (kind == 19 and size.rare_max_len):
        return draw(_tile_edges(size.max_len if kind < 12 else size.rare_max_len, block))
    if size.log_lengths:
        top = draw(st.integers(0, int(math.log2(size.max_len)) - 1))
        return draw(st.integers(2**top, 2 ** (top + 1)))
    return draw(st.integers(1, size.max_len))


DECODE_ROWS = 16
"""The most query rows of a decode pair (:func:`length_pairs`): one token, or a few speculated."""


@st.composite
def _tile_edges(draw, top: int, block: int, lowest: int = 0) -> int:
    """A tile edge ``m * block + offset``, ``m`` from ``lowest`` up, offset in (+1, 0, -1), within
    ``1..top``; ``m`` and the offset drawn apart, so shrinking walks ``m`` down."""
    m = draw(st.integers(lowest, top // block))
    offset = draw(st.sampled_from((1, 0, -1)))
    return min(max(1, m * block + offset), top)


@st.composite
def length_pairs(draw, *, size: Size = CPU, block: int = BLOCK) -> tuple[int, int]:
    """``(n_q, n_k)``: equal (the simplest, half the pairs), drawn independently (so ``n_q != n_k``
    both ways), or, one pair in eight, a decode pair: 1 to :data:`DECODE_ROWS` query rows over a
    long cache, a tile edge in the upper half of ``size.max_len`` (GPU: 8191 to 16384 keys).

    Kernels often take such calls down a path of their own (split-KV, FlashDecoding: the keys cut
    into slices computed side by side and merged by their log-sum-exps), which independent draws
    reach about one pair in fifty. Shrinks toward equal lengths, then toward one query row over
    the shortest long cache.
    """
    kind = draw(st.integers(0, 7))
    if kind == 7:
        n_q = draw(st.integers(1, DECODE_ROWS))
        return n_q, draw(_tile_edges(size.max_len, block, lowest=max(1, size.max_len // (2 * block))))
    n_q = draw(lengths(size=size, block=block))
    if kind >= 4:
        return n_q, draw(lengths(size=size, block=block))
    return n_q, n_q


def head_dims(*, min_dim: int = 1) -> st.SearchStrategy[int]:
    """Head dims ``min_dim``..256: powers of two (16 first), odd sizes that need padding, or any."""
    return st.one_of(
        st.sampled_from([d for d in (16, 32, 64, 128, 256, 1, 2, 4, 8) if d >= min_dim]),
        st.sampled_from([d for d in (24, 40, 59, 80, 96, 111, 3, 127, 200) if d >= min_dim]),
        st.integers(min_dim, 256),
    )


def dtypes(*, size: Size = CPU) -> st.SearchStrategy[str]:
    """The dtypes ``size`` allows: float32 and float16 on CPU, plus bfloat16 on GPU."""
    return st.sampled_from(size.dtypes)


def layouts() -> st.SearchStrategy[str]:
    """Every memory layout of :data:`properties.case.LAYOUTS`, contiguous first."""
    return st.sampled_from(LAYOUTS)


def leading_dims(*, max_dims: int = 3, max_size: int = 3) -> st.SearchStrategy[tuple[int, ...]]:
    """Leading (batch, heads, ...) dims: none first, then up to ``max_dims`` of size 1..``max_size``."""
    return st.lists(st.integers(1, max_size), max_size=max_dims).map(tuple)


# Scales per dtype for the distributions whose scale is about the dtype's range (see
# properties.case.DISTRIBUTIONS). "large": q and v reach `scale` and k 1/scale; dk grows like
# scale**2 * |do| * n, which must stay finite in the dtype, so float16 stops at 2**5 (dk ~ 2**10 *
# n) while float32 and bfloat16 reach 2**40 (inputs at 1e12 and 1e-12, gradients at ~1e24).
# "tiny": down to the dtype's smallest normal numbers, so that a share of the values is subnormal.
_LARGE = {"float16": (2.0**3, 2.0**5), "bfloat16": (2.0**20, 2.0**40), "float32": (2.0**20, 2.0**40)}
_TINY = {"float16": (2.0**-8, 2.0**-12), "bfloat16": (2.0**-60, 2.0**-120),
         "float32": (2.0**-60, 2.0**-120)}


def values(*, dtype: str) -> st.SearchStrategy[tuple[str, float]]:
    """``(distribution, scale)``, drawn together because what a scale means depends on both.

    Standard normal with scale 1 first; then uniform, larger or smaller normals, the dtype-aware
    ``large`` and ``tiny``, ``outliers`` (x10 to x100), ``ties`` and ``equal_scores``.
    """
    return st.one_of(
        st.tuples(st.just("normal"), st.sampled_from((1.0, 0.5, 2.0, 4.0))),
        st.tuples(st.just("uniform"), st.sampled_from((1.0, 3.0))),
        st.tuples(st.just("large"), st.sampled_from(_LARGE[dtype])),
        st.tuples(st.just("tiny"), st.sampled_from(_TINY[dtype])),
        st.tuples(st.just("outliers"), st.sampled_from((10.0, 30.0, 100.0))),
        st.tuples(st.just("ties"), st.sampled_from((1.0, 4.0))),
        st.tuples(st.just("equal_scores"), st.sampled_from((1.0, 4.0))),
    )


def _fit_leading(leading: tuple[int, ...], n_q: int, n_k: int, max_work: int) -> tuple[int, ...]:
    """``leading`` with trailing dims dropped (then sizes lowered) until the work fits."""
    lead = list(leading)
    while lead and math.prod(lead) * n_q * n_k > max_work:
        if lead[-1] > 1:
            lead[-1] -= 1
        else:
            lead.pop()
    return tuple(lead)


@st.composite
def cases(draw, *, size: Size = CPU, block: int = BLOCK, features: frozenset[str] = frozenset()) -> Case:
    """A :class:`Case`: lengths, head dim, leading dims, dtype, causality, layout, values, seed, and
    the contract's features that ``features`` names (a kernel module's ``FEATURES``).

    Related values are drawn together: the pair of lengths at once, the distribution with its
    dtype-aware scale. Leading dims are trimmed so ``prod(leading) * n_q * n_k`` stays within
    ``size.max_work``. The features are drawn last, each "off" first, so with none declared the
    draws (and the examples saved in a database) are those of a plain case.
    """
    n_q, n_k = draw(length_pairs(size=size, block=block))
    head_dim = draw(head_dims(min_dim=size.min_head_dim))
    leading = _fit_leading(draw(leading_dims()), n_q, n_k, size.max_work)
    dtype = draw(dtypes(size=size))
    is_causal = draw(st.booleans())
    layout = draw(layouts())
    distribution, scale = draw(values(dtype=dtype))
    seed = draw(st.integers(0, 2**16))
    case = Case(n_q, n_k, head_dim, leading, dtype, is_causal, layout, distribution, scale, seed)
    if not features:
        return case
    return case.replace(**draw(feature_fields(features=features, n_q=n_q, n_k=n_k, leading=leading,
                                              max_work=size.max_work, block=block)))


WINDOW_EDGES = (0, 1, 2, 16, 62, 63, 64, 65, 66, 126, 127, 128, 129, 130)
"""Window bounds drawn often: 0 (the row's own key), small ones, and the tile edges give or take
two keys (where a tiled kernel's rounding of the band to tiles goes wrong by one or two:
:data:`properties.grids.BAND_EDGE_OFFSETS`)."""

SOFTCAPS = (1.0, 2.0, 5.0, 10.0, 30.0, 50.0, 0.0, 1e4)
"""Softcaps drawn often: small enough to bite on scores of that size (Gemma-2 uses 50 and 30), 0,
the contract's other spelling of off (FlashAttention's default), passed to the kernel as given, and
1e4, which the ``large`` values' scores reach (a module that takes a large cap as none is wrong
only there). Between them, any cap from 1 to 1e4 is drawn too (:func:`feature_fields`): a kernel's
rule for "a cap this large cannot bite" or "this cap keeps exp in range" may hold up to 50 and fail
at 60 (the eighth held-out round's survivor kept the cap as the row maximum below 63, where exp of
-2 c already underflows above 43.7)."""

SOFTMAX_SCALES = (0.01, 0.1, 0.5, 2.0, 10.0, 0.0, -0.5, -4.0)
"""Softmax scales drawn often, from 1e-2 (nearly uniform rows) to 10 (nearly one-hot), and the
ones the contract allows that a kernel may get wrong: 0 (every visible key alike), and negative
scales (a row's largest score is its smallest ``q.k``: a kernel that takes the row max of the
dot products before scaling them is wrong there only)."""

GQA_RATIOS = (1, 2, 4, 8, 3, 5, 6, 7)
"""Query heads per kv head: 1 (no grouping) first, then the powers of two models use, then others."""


def _window_bound(n_k: int) -> st.SearchStrategy[int]:
    return st.one_of(st.just(-1), st.sampled_from(WINDOW_EDGES), st.integers(0, max(0, n_k)))


@st.composite
def feature_fields(draw, *, features: frozenset[str], n_q: int, n_k: int, leading: tuple[int, ...],
                   max_work: int, block: int = BLOCK) -> dict:
    """The feature fields of a :class:`Case` for a module that declares ``features``: grouped-query
    heads (ratios 1 to 8, the heads grown to fit, within ``max_work``), windows at tile edges and
    one-sided (so some rows may see no key), bottom-right alignment, softcaps of 1 to 1e4 (most of
    them up to 50) and 0 (off), softmax scales of 1e-2 to 10, 0 and -1e-2 to -10. Each is off first,
    so each shrinks away when it is not needed."""
    out: dict = {}
    if "gqa" in features:
        ratio = draw(st.sampled_from(GQA_RATIOS))
        kv = leading[-1] if leading else 1
        grouped = (*leading[:-1], kv * ratio)
        if ratio > 1 and math.prod(grouped) * n_q * n_k > max_work:
            kv, grouped = 1, (ratio,)  # the batch dims dropped to make room for the group
        if ratio > 1 and math.prod(grouped) * n_q * n_k <= max_work:
            out.update(leading=grouped, kv_heads=kv)
    if "window" in features and draw(st.booleans()):
        out["window"] = (draw(_window_bound(n_k)), draw(_window_bound(n_k)))
    if "bottom_right" in features and draw(st.booleans()):
        out["causal_alignment"] = "bottom_right"
    if "softcap" in features and draw(st.booleans()):
        out["softcap"] = draw(st.one_of(st.sampled_from(SOFTCAPS), st.floats(1.0, 50.0),
                                        st.floats(50.0, 1e4)))
    if "scale" in features and draw(st.booleans()):
        out["softmax_scale"] = draw(st.one_of(st.sampled_from(SOFTMAX_SCALES), st.floats(0.01, 10.0),
                                              st.floats(-10.0, -0.01)))
    return out


@st.composite
def ragged_lengths(draw, *, size: Size = CPU, max_sequences: int = 4,
                   block: int = BLOCK) -> tuple[int, ...]:
    """Per-sequence lengths of one batch: each a tile edge or any length, in uneven mixes.

    Either independent lengths (:func:`lengths`), or a deliberately lopsided mix: one long
    sequence among length-1 ones, or every sequence the same length (a batch of decoding steps or
    of equal prefill chunks, whose keys :func:`varlen_cases` may still draw apart: a kernel that
    takes equal query lengths for a dense batch must not assume its keys are too). Shrinks toward
    a single sequence of length 1 (the mix, too, may shrink to its long sequence alone, so the
    shrinker need not leave that branch).
    """
    kind = draw(st.sampled_from(("independent", "lopsided", "equal")))
    if kind == "equal":
        return (draw(lengths(size=size, block=block)),) * draw(st.integers(1, max_sequences))
    if kind == "lopsided":
        long = draw(lengths(size=size, block=block))
        n_short = draw(st.integers(0, max_sequences - 1))
        where = draw(st.integers(0, n_short))
        mix = [1] * n_short
        mix.insert(where, long)
        return tuple(mix)
    return tuple(draw(st.lists(lengths(size=size, block=block), min_size=1, max_size=max_sequences)))


PADDED_WORK_RATIO = 4
"""How much more than ``size.max_work`` the padded varlen oracle may do: it pads every sequence to
the longest, so one long sequence among short ones costs ``batch`` times the kernel's work."""


def _fit_sequences(seqlens_q, seqlens_k, heads, max_work):
    """Sequences dropped from the end (then heads lowered) until both the kernel's work,
    ``heads * sum(n_q n_k)``, and the padded oracle's, ``heads * batch * max n_q * max n_k``, fit."""
    q, k = list(seqlens_q), list(seqlens_k)

    def fits():
        return (heads * sum(a * b for a, b in zip(q, k)) <= max_work
                and heads * len(q) * max(q) * max(k) <= PADDED_WORK_RATIO * max_work)

    while len(q) > 1 and not fits():
        q.pop()
        k.pop()
    while heads > 1 and not fits():
        heads -= 1
    return tuple(q), tuple(k), heads


_VARLEN_WINDOW_SIDES = (-1, 0, BLOCK - 2, BLOCK - 1, BLOCK, BLOCK + 1, BLOCK + 2)
"""Window sides the varlen strategy draws besides small ones: unbounded, none, and the tile edge
give or take two keys."""

_VARLEN_SOFTMAX_SCALES = (0.01, 0.1, 0.5, 2.0, 10.0, 0.0, -0.5)
"""Softmax scales the varlen strategy draws (``None``, the default ``1 / sqrt(d)``, first; 0 and a
negative one as in :data:`SOFTMAX_SCALES`)."""


def _fit_groups(kv_heads: int, group: int, heads: int) -> tuple[int, int]:
    """``(kv_heads, group)`` with ``kv_heads * group <= heads``: what :func:`_fit_sequences` left of
    ``kv_heads * group`` query heads, in whole groups."""
    kv_heads = min(kv_heads, heads)
    return kv_heads, max(1, heads // kv_heads) if group > 1 else 1


@st.composite
def _varlen_feature_fields(draw, *, features: frozenset[str], longest_k: int) -> dict:
    """The :class:`VarlenCase` feature fields besides ``kv_heads``, each drawn only if declared in
    ``features`` and off first: ``causal_alignment`` (bottom-right), ``window`` (each side -1,
    0, a tile edge 62 to 66, small, or up to ``longest_k``, the longest key sequence: so one-sided
    windows, rows that see no key, and sides as wide as every sequence's keys come up),
    ``softcap`` 0..50, 51..1e4 (0: off, passed as given) and ``softmax_scale`` 1e-2..10, 0 or -0.5."""
    fields = {}
    if "bottom_right" in features and draw(st.booleans()):
        fields["causal_alignment"] = "bottom_right"
    if "window" in features and draw(st.booleans()):
        side = st.one_of(st.sampled_from(_VARLEN_WINDOW_SIDES), st.integers(1, 16),
                         st.integers(0, max(0, longest_k)))
        fields["window"] = (draw(side), draw(side))
    if "softcap" in features and draw(st.booleans()):
        # 0: off, as None; most caps small enough to bite, some of any size up to 1e4
        fields["softcap"] = float(draw(st.one_of(st.integers(0, 50), st.integers(51, 10_000),
                                                 st.just(10_000))))
    if "scale" in features and draw(st.booleans()):
        fields["softmax_scale"] = draw(st.sampled_from(_VARLEN_SOFTMAX_SCALES))
    return fields


@st.composite
def varlen_cases(draw, *, size: Size = CPU, max_sequences: int = 6, block: int = BLOCK,
                 features: frozenset[str] = frozenset()) -> VarlenCase:
    """A packed batch as a :class:`VarlenCase`: per-sequence lengths from :func:`ragged_lengths`
    (tile edges, 1, a long sequence among length-1 ones), then, each now and then: ``n_k`` drawn
    apart from ``n_q`` per sequence, and a sequence with no queries (with no keys, or some) put
    among the others (its keys, up to the longest, shrink toward none); heads 1..3, and the head
    dim, dtype, causality, layout and values as :func:`cases` draws them.

    ``features`` (a kernel module's ``FEATURES``) are the features of the extended contract the case
    may use, each now and then and off when shrunk: ``"gqa"`` makes the 1..3 heads drawn kv heads,
    each shared by 2..8 query heads; the others as :func:`_varlen_feature_fields` draws them. With
    none (the default) the draws are those of a strategy without features, example for example.

    Shrinks toward one sequence of length 1 with one head. Before the query-less sequence goes in,
    sequences are dropped from the end (then heads lowered, in whole groups) until
    ``heads * sum(n_q n_k)`` fits ``size.max_work`` and the padded oracle's work fits
    :data:`PADDED_WORK_RATIO` times it.
    """
    seqlens_q = draw(ragged_lengths(size=size, max_sequences=max_sequences, block=block))
    seqlens_k = seqlens_q
    if draw(st.booleans()):
        seqlens_k = tuple(draw(lengths(size=size, block=block)) for _ in seqlens_q)
    kv_heads = draw(st.integers(1, 3))
    group = 1  # query heads per kv head
    if "gqa" in features and draw(st.booleans()):
        group = draw(st.integers(2, 8))
    seqlens_q, seqlens_k, heads = _fit_sequences(seqlens_q, seqlens_k, kv_heads * group, size.max_work)
    kv_heads, group = _fit_groups(kv_heads, group, heads)
    if draw(st.integers(0, 4)) == 4:  # one case in five: a sequence without queries, somewhere
        where = draw(st.integers(0, len(seqlens_q)))
        n_k = draw(st.integers(0, max(seqlens_k)))
        seqlens_q = seqlens_q[:where] + (0,) + seqlens_q[where:]
        seqlens_k = seqlens_k[:where] + (n_k,) + seqlens_k[where:]
    head_dim = draw(head_dims(min_dim=size.min_head_dim))
    dtype = draw(dtypes(size=size))
    is_causal = draw(st.booleans())
    fields = draw(_varlen_feature_fields(features=features, longest_k=max(seqlens_k))) if features else {}
    layout = draw(st.sampled_from(VARLEN_LAYOUTS))
    distribution, scale = draw(values(dtype=dtype))
    seed = draw(st.integers(0, 2**16))
    return VarlenCase(seqlens_q, seqlens_k, kv_heads * group, head_dim, dtype, is_causal, layout,
                      distribution, scale, seed, kv_heads=kv_heads if group > 1 else None, **fields)
