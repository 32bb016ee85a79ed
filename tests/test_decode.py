"""Decoding shapes (a few query rows over many keys) against every check, and flash's split-KV path.

The decode grids (:func:`properties.grids.decode_cpu_cases` and the packed
:func:`properties.varlen_grids.varlen_decode_cpu_cases`) run every check on the kernel under test.
Then ``flash``'s split-KV path (:mod:`flash.decode`) is gated on its own, whatever ``--kernel`` is:
the kernel module :mod:`flash.split_kv` cuts every call it can into 16-key splits, and runs every
check on the decode grids and on the property and feature grids' cases of at most 16 rows. Last,
the split plans themselves: they cover the band's keys exactly, never overlap, and depend on one
sequence's lengths and band only, which is what keeps ``flash``'s ``BATCH_INVARIANT`` promise true.

bfloat16 is on the GPU grids only: the Triton interpreter's bfloat16 ``tl.dot`` returns garbage.
"""

import itertools

import pytest
import torch

from flash import decode, replay
from flash.scores import resolve
from oracle.dense import visible_mask
from properties import ALL_CHECKS, BAND_EDGE_CHECKS, load_kernel
from properties.grids import (
    band_edge_decode_cpu_cases,
    band_edge_decode_gpu_cases,
    decode_cpu_cases,
    decode_gpu_cases,
    decode_long_cpu_cases,
    feature_cpu_cases,
    property_cpu_cases,
    property_gpu_cases,
)
from properties.oracle_agreement import (
    check_gradients_match_oracle,
    check_lse_matches_oracle,
    check_output_matches_oracle,
)
from properties.varlen import VARLEN_CHECKS
from properties.varlen_grids import (
    varlen_cpu_cases,
    varlen_decode_cpu_cases,
    varlen_decode_gpu_cases,
    varlen_feature_cpu_cases,
)
from tests.helpers import case_params, run_check

CHECKS = [pytest.param(check, id=check.__name__) for check in ALL_CHECKS]
EDGE_CHECKS = [pytest.param(check, id=check.__name__) for check in BAND_EDGE_CHECKS]
PACKED_CHECKS = [pytest.param(check, id=check.__name__) for check in VARLEN_CHECKS]


def _short(cases):
    """The cases with at most ``decode.MAX_SPLIT_ROWS`` query rows: those the split path takes."""
    return [c for c in cases if c.n_q <= decode.MAX_SPLIT_ROWS]


@pytest.mark.parametrize("check", CHECKS)
@pytest.mark.parametrize("case", case_params(decode_cpu_cases()))
def test_decode(kernel, check, case):
    run_check(check, kernel, case)


@pytest.mark.parametrize("check", CHECKS)
@pytest.mark.parametrize("case", case_params(decode_gpu_cases(), gpu=True))
def test_decode_gpu(kernel, check, case):
    run_check(check, kernel, case)


_LONG = decode_long_cpu_cases()
_LONG_ORACLE = [check_output_matches_oracle, check_lse_matches_oracle]


@pytest.mark.parametrize("check, case", [
    pytest.param(check, case, id=f"{check.__name__}-{case}")
    for case in _LONG for check in _LONG_ORACLE
] + [pytest.param(check_gradients_match_oracle, _LONG[0],
                  id=f"check_gradients_match_oracle-{_LONG[0]}")])
def test_decode_long_cache(kernel, check, case):
    """The oracle checks over a long cache (16k and 32k keys), the gradients on one case (the
    backward reads the forward's lse, which the lse check holds already; each costs half a minute
    in the interpreter)."""
    run_check(check, kernel, case)


@pytest.mark.parametrize("check", PACKED_CHECKS)
@pytest.mark.parametrize("case", case_params(varlen_decode_cpu_cases()))
def test_decode_packed(kernel, check, case):
    run_check(check, kernel, case)


@pytest.mark.parametrize("check", PACKED_CHECKS)
@pytest.mark.parametrize("case", case_params(varlen_decode_gpu_cases(), gpu=True))
def test_decode_packed_gpu(kernel, check, case):
    run_check(check, kernel, case)


SPLIT_CPU = _short(property_cpu_cases() + feature_cpu_cases()) + decode_cpu_cases()[2:]
"""The short cases, but the decode grid's two long ones: 16-key splits of 1025 keys are 64 programs
per kv head, minutes in the interpreter for every check."""
SPLIT_GPU = [c for c in _short(property_gpu_cases()) + decode_gpu_cases() if c.dtype == "bfloat16"]
"""bfloat16's (GPU-only in the suite): flash's own decode grid has the other dtypes compiled."""
SPLIT_PACKED_CPU = varlen_decode_cpu_cases() + varlen_cpu_cases()[3:4] + varlen_feature_cpu_cases()[2:3]
SPLIT_PACKED_GPU = varlen_decode_gpu_cases()[:1] + varlen_decode_gpu_cases()[-1:]
"""One-row and 16-row sequences over caches up to 32k keys; one-row ones after sequences without
queries."""


@pytest.mark.parametrize("check", CHECKS)
@pytest.mark.parametrize("case", case_params(SPLIT_CPU))
def test_split_kv(check, case):
    run_check(check, load_kernel("flash.split_kv"), case)


@pytest.mark.parametrize("check", CHECKS)
@pytest.mark.parametrize("case", case_params(SPLIT_GPU, gpu=True))
def test_split_kv_gpu(check, case):
    run_check(check, load_kernel("flash.split_kv"), case)


@pytest.mark.parametrize("check", PACKED_CHECKS)
@pytest.mark.parametrize("case", case_params(SPLIT_PACKED_CPU))
def test_split_kv_packed(check, case):
    run_check(check, load_kernel("flash.split_kv"), case)


@pytest.mark.parametrize("check", PACKED_CHECKS)
@pytest.mark.parametrize("case", case_params(SPLIT_PACKED_GPU, gpu=True))
def test_split_kv_packed_gpu(check, case):
    run_check(check, load_kernel("flash.split_kv"), case)


GROUPED_SPLIT_CPU = [c for c in SPLIT_CPU if c.kv_heads and c.leading[-1] > c.kv_heads]
"""The split cases with grouped heads: a packed tile then holds several heads' rows, and one case's
group (3 heads of 9 rows) runs over two tiles, the second starting inside a head."""
GROUPED_SPLIT_PACKED_CPU = [c for c in SPLIT_PACKED_CPU
                            if c.kv_heads and c.heads > c.kv_heads and max(c.seqlens_k) < 1024]
"""Likewise packed; not the batch with 1100 keys (five minutes of the interpreter for every check)."""


@pytest.fixture
def packed_heads(monkeypatch):
    """``flash.decode``'s GPU tile layout in the interpreter (:data:`flash.decode.PACK_HEADS`).
    Launches recorded in the other layout are forgotten first, and this layout's after, so that no
    call replays across (a recording's signature does not hold the layout).

    In the interpreter ``flash.split_kv`` is called without its ``BATCH_INVARIANT`` promise there:
    ``tl.dot`` is numpy's float32 matmul, whose bits for a row depend on the row's place in the tile
    (OpenBLAS; on this project's CI machine of 2026-12-07 a 16 x 16 product's rows rolled by 1
    differ in 24 of 256 elements), while flash packs heads on a GPU only, where they do not (the GPU
    grids hold it bit for bit). So a slice alone, and a group against k and v repeated, whose rows
    sit elsewhere in their tiles, are held to the error model; a row given another head's keys
    still fails by far."""
    monkeypatch.setattr(decode, "PACK_HEADS", True)
    if decode.INTERPRET:
        monkeypatch.setattr(load_kernel("flash.split_kv"), "BATCH_INVARIANT", False)
    replay.forget()
    yield
    replay.forget()


@pytest.mark.parametrize("check", CHECKS)
@pytest.mark.parametrize("case", case_params(GROUPED_SPLIT_CPU))
def test_split_kv_packed_heads(packed_heads, check, case):
    """The split path in the GPU's tile layout, which the interpreter does not take by default:
    the row-to-head arithmetic of a packed tile is gated on the CPU too."""
    run_check(check, load_kernel("flash.split_kv"), case)


@pytest.mark.parametrize("check", PACKED_CHECKS)
@pytest.mark.parametrize("case", case_params(GROUPED_SPLIT_PACKED_CPU))
def test_split_kv_packed_batch_packed_heads(packed_heads, check, case):
    run_check(check, load_kernel("flash.split_kv"), case)


@pytest.mark.parametrize("check", EDGE_CHECKS)
@pytest.mark.parametrize("case", case_params(band_edge_decode_cpu_cases()))
@pytest.mark.parametrize("module", ("flash.split_kv", None), ids=("split_kv", "kernel"))
def test_band_edge_decode(kernel, module, check, case):
    """Band edges a key or two either side of a tile boundary in decoding shapes, where a split-KV
    plan rounds the band to tiles: through 16-key splits (``flash.split_kv``), and the kernel under
    test as it is."""
    run_check(check, load_kernel(module) if module else kernel, case)


@pytest.mark.parametrize("check", EDGE_CHECKS)
@pytest.mark.parametrize("case", case_params(band_edge_decode_gpu_cases(), gpu=True))
@pytest.mark.parametrize("module", ("flash.split_kv", None), ids=("split_kv", "kernel"))
def test_band_edge_decode_gpu(kernel, module, check, case):
    run_check(check, load_kernel(module) if module else kernel, case)


def _features(case):
    f = case.features()
    return resolve(case.head_dim, case.is_causal, f.get("scale"), f.get("window"), f.get("softcap"),
                   f.get("causal_alignment", "top_left"))


def _seen_span(case) -> int:
    """How many keys lie from the first to the last key that some row of ``case`` sees (the
    oracle's mask: causal, window, alignment); 0 when no row sees any."""
    f = case.features()
    mask = visible_mask(case.n_q, case.n_k, is_causal=case.is_causal, window=f.get("window"),
                        causal_alignment=f.get("causal_alignment", "top_left"))
    if mask is None:
        return case.n_k
    seen = mask.any(0).nonzero().flatten()
    return int(seen[-1] - seen[0] + 1) if len(seen) else 0


def test_the_grids_reach_the_split_path():
    """The gate above is only as good as its reach: flash's default splits some decode cases (and
    some packed sequences), and 16-key splits nearly all short ones, some into many pieces."""
    default = [decode.split_plan(c.n_q, c.n_k, _features(c)) for c in decode_cpu_cases()]
    assert sum(p is not None for p in default) == 2, default
    sixteen = [decode.split_plan(c.n_q, c.n_k, _features(c), 16) for c in SPLIT_CPU]
    # Which cases must split, from the oracle's mask alone: every one whose rows see keys spanning
    # two 16-key splits (and few enough rows). Most do; a case whose rows see one key each does not.
    must = [c.n_q <= decode.MAX_SPLIT_ROWS and _seen_span(c) >= 32 for c in SPLIT_CPU]
    wrong = [(c, p) for c, p, m in zip(SPLIT_CPU, sixteen, must) if (p is not None) != m]
    assert not wrong, f"split plans that disagree with the oracle's mask: {wrong}"
    assert 2 * sum(must) > len(SPLIT_CPU), [c for c, m in zip(SPLIT_CPU, must) if not m]
    assert max(p.splits for p in sixteen if p) >= 8
    packed = [decode.split_plan(n_q, n_k, _features(c))
              for c in varlen_decode_cpu_cases() for n_q, n_k in zip(c.seqlens_q, c.seqlens_k)]
    assert sum(p is not None for p in packed) >= 1, packed
    long = [decode.split_plan(c.n_q, c.n_k, _features(c)) for c in decode_long_cpu_cases()]
    assert sorted(decode.default_split_keys(p.hi - p.lo) for p in long) == [1024, 2048], long


BANDS = [dict(), dict(is_causal=True), dict(is_causal=True, causal_alignment="bottom_right"),
         dict(window=(40, 3)), dict(window=(100, 0), is_causal=True, causal_alignment="bottom_right"),
         dict(window=(7, 900))]


@pytest.mark.parametrize("band", BANDS, ids=str)
@pytest.mark.parametrize("split_keys", [16, 100, 512, None])
def test_split_plans_cover_the_band_exactly(band, split_keys):
    """Every key some row sees lies in exactly one split; no split starts past the band's end; a
    plan's splits are at least 2 and fit ``MAX_SPLITS``; and the slots of a batch of sequences are
    disjoint and within the slot count (the partials of two sequences never share memory).
    ``None`` is the default, whose split length grows with the band (40000 keys: 2048)."""
    is_causal = band.pop("is_causal", False)
    features = resolve(64, is_causal, **band)
    lengths = list(itertools.product((1, 2, 5, 16, 17), (1, 31, 200, 1025, 5000, 40000)))
    for n_q, n_k in lengths:
        plan = decode.split_plan(n_q, n_k, features, split_keys)
        seen = _visible_keys(n_q, n_k, features)
        if plan is None:
            continue
        assert 2 <= plan.splits <= decode.MAX_SPLITS and n_q <= decode.MAX_SPLIT_ROWS
        covered = [range(max(plan.lo + s * plan.split_len, 0),
                         min(plan.lo + (s + 1) * plan.split_len, plan.hi)) for s in range(plan.splits)]
        keys = [j for r in covered for j in r]
        assert len(keys) == len(set(keys)), (n_q, n_k, plan)
        assert seen <= set(keys) <= set(range(n_k)), (n_q, n_k, plan)
        assert all(len(r) for r in covered), (n_q, n_k, plan)  # no split beyond the band
    table, slots, most = decode.split_plans([n for n, _ in lengths], [n for _, n in lengths],
                                            features, split_keys, torch.device("cpu")) or (None, 0, 0)
    if table is not None:
        used = [(int(first) + s) for splits, *_, first in table.tolist() for s in range(splits)]
        assert sorted(used) == list(range(slots)) and most == max(table[:, 0].tolist())


def test_default_split_grows_with_the_band():
    """By default a split is 512 keys, 1024 once the band holds 32 of those, 2048 once it holds 32
    of 1024, and no longer: the band is what a row sees (a window shortens it), and nothing of the
    batch enters the rule, so a sequence splits alike alone, batched and packed."""
    full = resolve(128, False)
    assert [decode.default_split_keys(n) for n in (1024, 16383, 16384, 32767, 32768, 10**6)] == [
        512, 512, 1024, 1024, 2048, 2048]
    for n_k, keys in ((8191, 512), (16384, 1024), (32769, 2048), (131072, 2048)):
        assert decode.split_plan(1, n_k, full) == decode.split_plan(1, n_k, full, keys), n_k
    assert decode.split_plan(1, 131072, full).splits == 64
    windowed = resolve(128, True, window=(1500, 0), causal_alignment="bottom_right")
    assert decode.split_plan(16, 40000, windowed) == decode.split_plan(16, 40000, windowed, 512)
    assert decode.split_plan(1, 40000, full, 512).split_len < 1024  # a named length is kept


def _visible_keys(n_q, n_k, features):
    diag = n_k - n_q if features.bottom_right else 0
    keys = set()
    for i in range(n_q):
        lo = 0 if features.left == -1 else i + diag - features.left
        hi = n_k - 1 if features.right == -1 else i + diag + features.right
        keys |= set(range(max(lo, 0), min(hi, n_k - 1) + 1))
    return keys


def test_split_keys_is_checked():
    import flash

    q = torch.randn(1, 1, 16)
    for bad, error in ((-1, ValueError), ("16", TypeError), (True, TypeError), (16.0, TypeError)):
        with pytest.raises(error, match="split_keys"):
            flash.attention(q, q, q, split_keys=bad)
